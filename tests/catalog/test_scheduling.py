"""The scheduler's store (:class:`SchedulingStore`): compare-and-set claims and the run queue on
the catalog alone (no Spark), on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from sparkmv.catalog import Catalog, ObjectKind, RefreshState, RunState, Trigger
from sparkmv.catalog.models import ObjectRow
from sparkmv.catalog.scheduling import NOT_BEFORE, Enqueued, QueuedRun, finish_pending, start_pending
from sparkmv.errors import BusyError, ObjectNotFoundError
from sparkmv.names import ObjectName
from sparkmv.scheduler.due import check_due

T0 = datetime(2026, 1, 1, 0, 0, 0)


@pytest.fixture
def catalog(catalog_url: str) -> Iterator[Catalog]:
    cat = Catalog.open(catalog_url)
    yield cat
    cat.close()


def _mv(catalog: Catalog, name: str = "m") -> ObjectRow:
    with catalog.transaction() as s:
        return catalog.objects.insert(
            s,
            ObjectName("default", name),
            ObjectKind.MATERIALIZED_VIEW,
            definition="SELECT 1",
            refresh_scheme="ASYNC EVERY (INTERVAL 2 SECOND)",
            schedule_every_seconds=2,
            next_fire_time=T0,
        )


def _race(n: int, contender: Callable[[], object]) -> None:
    barrier = threading.Barrier(n)

    def run() -> None:
        barrier.wait()
        contender()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_a_due_time_is_claimed_once_by_racing_schedulers(catalog: Catalog) -> None:
    row = _mv(catalog)
    fire = check_due(T0, 2, T0 + timedelta(seconds=5))
    assert fire is not None and fire.missed == 3
    wins: list[Enqueued] = []

    def contender() -> None:
        opts = {"due": fire.due_time.isoformat()}
        queued = catalog.scheduling.claim_fire(row.id, T0, fire.next_fire_time, fire.due_time, opts, 3)
        if queued is not None:
            wins.append(queued)

    _race(4, contender)
    assert len(wins) == 1
    run = wins[0].run
    assert not wins[0].merged
    assert run == QueuedRun(run.run_id, row.id, RunState.PENDING, Trigger.SCHEDULED, {"due": "2026-01-01T00:00:04"}, 3)
    with catalog.read() as s:
        fresh = catalog.objects.by_id(s, row.id)
        assert fresh.next_fire_time == T0 + timedelta(seconds=6)
        assert fresh.last_fire_time == T0 + timedelta(seconds=4)
    assert catalog.scheduling.pending_runs(row.id) == [run]
    # A stale claim (the fire time moved on) matches no row: nothing is queued.
    assert catalog.scheduling.claim_fire(row.id, T0, fire.next_fire_time, fire.due_time) is None
    assert len(catalog.scheduling.pending_runs(row.id)) == 1


def test_the_first_fire_time_is_stored_once(catalog: Catalog) -> None:
    row = _mv(catalog)
    with catalog.transaction() as s:
        catalog.objects.set_fields(s, row.id, next_fire_time=None)
    assert catalog.scheduling.init_fire_time(row.id, T0 + timedelta(seconds=2))
    assert not catalog.scheduling.init_fire_time(row.id, T0 + timedelta(seconds=9))
    with catalog.read() as s:
        assert catalog.objects.by_id(s, row.id).next_fire_time == T0 + timedelta(seconds=2)


def test_enqueue_merges_and_a_pending_run_starts_once(catalog: Catalog) -> None:
    row = _mv(catalog)
    sched = catalog.scheduling
    first = sched.enqueue_run(row.id, Trigger.MANUAL, {"force": True})
    assert not first.merged and first.run.state == RunState.PENDING and first.run.options == {"force": True}
    again = sched.enqueue_run(row.id, Trigger.ON_BASE_TABLE_CHANGE)
    assert again.merged and again.run.run_id == first.run.run_id  # automatic triggers coalesce silently
    request = sched.enqueue_run(row.id, Trigger.MANUAL)
    assert request.merged and request.run.state == RunState.MERGED
    assert request.run.reason == f"merged into pending run {first.run.run_id}"
    with catalog.transaction() as s:
        assert start_pending(s, catalog.objects.by_id(s, row.id), first.run.run_id, "a:1:1", 60)
    with catalog.transaction() as s:
        assert not start_pending(s, row, first.run.run_id, "b:2:2", 60)  # already started
    second = sched.enqueue_run(row.id, Trigger.SCHEDULED)
    with pytest.raises(BusyError), catalog.transaction() as s:
        start_pending(s, catalog.objects.by_id(s, row.id), second.run.run_id, "b:2:2", 60)
    # The busy start rolled back: still pending.
    assert [r.run_id for r in sched.pending_runs(row.id)] == [second.run.run_id]
    assert sched.finish_pending(second.run.run_id, RunState.UPSTREAM_FAILED, "upstream 'x' failed")
    assert not sched.finish_pending(second.run.run_id, RunState.SKIPPED)
    with catalog.read() as s:
        assert catalog.runs.get(s, second.run.run_id).error == "upstream 'x' failed"
    with pytest.raises(ObjectNotFoundError):
        sched.enqueue_run(10_000, Trigger.MANUAL)


def test_concurrent_requests_queue_one_run(catalog: Catalog) -> None:
    row = _mv(catalog)
    results: list[Enqueued] = []
    lock = threading.Lock()

    def contender() -> None:
        queued = catalog.scheduling.enqueue_run(row.id, Trigger.MANUAL, {"force": False})
        with lock:
            results.append(queued)

    _race(4, contender)
    assert sorted(r.merged for r in results) == [False, True, True, True]
    pending = catalog.scheduling.pending_runs(row.id)
    assert len(pending) == 1
    merged = [r.run for r in results if r.merged]
    assert {r.reason for r in merged} == {f"merged into pending run {pending[0].run_id}"}


def test_an_explicit_request_lifts_a_retrys_backoff(catalog: Catalog) -> None:
    row = _mv(catalog)
    retry = catalog.scheduling.enqueue_run(
        row.id, Trigger.SCHEDULED, {"attempt": 2, NOT_BEFORE: "2026-01-01T00:05:00"}, 0, "retry 2 of run 1"
    )
    assert retry.run.not_before == datetime(2026, 1, 1, 0, 5)
    assert retry.run.reason == "retry 2 of run 1"
    catalog.scheduling.enqueue_run(row.id, Trigger.MANUAL)
    (pending,) = catalog.scheduling.pending_runs(row.id)
    assert pending.options == {"attempt": 2} and pending.not_before is None


def test_an_on_change_run_is_queued_only_if_nothing_ran_since(catalog: Catalog) -> None:
    row = _mv(catalog)
    assert catalog.scheduling.enqueue_on_change(row.id, 41, 0, "changed: default.t") is None  # a run ended since
    queued = catalog.scheduling.enqueue_on_change(row.id, None, 5, "changed: default.t")
    assert queued is not None and not queued.merged
    assert (queued.run.trigger, queued.run.priority, queued.run.reason) == (
        Trigger.ON_BASE_TABLE_CHANGE,
        5,
        "changed: default.t",
    )
    with catalog.transaction() as s:
        catalog.objects.set_fields(s, row.id, state=RefreshState.REFRESHING)
    assert catalog.scheduling.enqueue_on_change(row.id, None, 0, "changed: default.t") is None


def test_upstream_failure_marks_pending_runs_or_records_one(catalog: Catalog) -> None:
    row = _mv(catalog)
    sched = catalog.scheduling
    assert sched.mark_upstream_failed(row.id, "upstream 'a' failed", record_on_change=False) == []
    recorded = sched.mark_upstream_failed(row.id, "upstream 'a' failed", record_on_change=True)
    assert len(recorded) == 1
    queued = sched.enqueue_run(row.id, Trigger.SCHEDULED)
    assert sched.mark_upstream_failed(row.id, "upstream 'b' failed", record_on_change=True) == [queued.run.run_id]
    with catalog.read() as s:
        runs = {r.run_id: r for r in catalog.runs.list(s, row.id)}
    assert runs[recorded[0]].state == RunState.UPSTREAM_FAILED
    assert runs[recorded[0]].trigger == Trigger.ON_BASE_TABLE_CHANGE
    assert (runs[queued.run.run_id].state, runs[queued.run.run_id].error) == (
        RunState.UPSTREAM_FAILED,
        "upstream 'b' failed",
    )
    assert sched.pending_runs(row.id) == []


def test_an_interval_reload_is_claimed_once(catalog: Catalog) -> None:
    row = _mv(catalog)
    wins: list[bool] = []
    _race(3, lambda: wins.append(catalog.scheduling.claim_reload(row.id, None)))
    assert sorted(wins) == [False, False, True]
    with catalog.read() as s:
        seen = catalog.objects.by_id(s, row.id).last_trigger_time
    assert seen is not None
    assert not catalog.scheduling.claim_reload(row.id, None)
    with catalog.transaction() as s:
        catalog.objects.set_fields(s, row.id, state=RefreshState.REFRESHING)
    assert not catalog.scheduling.claim_reload(row.id, seen)  # busy: not claimed


def test_run_counts_and_suspension(catalog: Catalog) -> None:
    row = _mv(catalog)
    first = catalog.scheduling.enqueue_run(row.id, Trigger.MANUAL)
    catalog.scheduling.enqueue_run(row.id, Trigger.MANUAL)
    with catalog.transaction() as s:
        assert finish_pending(s, first.run.run_id, RunState.SKIPPED, "why")
    assert catalog.scheduling.run_counts() == {RunState.SKIPPED: 1, RunState.MERGED: 1}
    catalog.scheduling.suspend_schedule(row.id, "too many failures")
    with catalog.read() as s:
        fresh = catalog.objects.by_id(s, row.id)
    assert (fresh.suspended, fresh.refresh_state_reason) == (True, "too many failures")
