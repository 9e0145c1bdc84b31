"""Compare-and-set claims on the catalog alone (no Spark), on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from sparkmv.catalog import Catalog, ObjectKind, RunState, Trigger
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import BusyError
from sparkmv.names import ObjectName
from sparkmv.scheduler import claims
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


def test_a_due_time_is_claimed_once_by_racing_schedulers(catalog: Catalog) -> None:
    row = _mv(catalog)
    fire = check_due(T0, 2, T0 + timedelta(seconds=5))
    assert fire is not None and fire.missed == 3
    wins: list[int] = []
    barrier = threading.Barrier(4)

    def contender() -> None:
        barrier.wait()
        with catalog.transaction() as s:
            if claims.claim_fire(s, row.id, T0, fire):
                run, _ = claims.enqueue_run(s, row, Trigger.SCHEDULED, {"due": fire.due_time.isoformat()})
                wins.append(run.run_id)

    threads = [threading.Thread(target=contender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    with catalog.transaction() as s:
        fresh = catalog.objects.by_id(s, row.id)
        assert fresh.next_fire_time == T0 + timedelta(seconds=6)
        assert fresh.last_fire_time == T0 + timedelta(seconds=4)
        assert [r.run_id for r in claims.pending_runs(s, row.id)] == wins


def test_enqueue_merges_and_a_pending_run_starts_once(catalog: Catalog) -> None:
    row = _mv(catalog)
    with catalog.transaction() as s:
        first, merged = claims.enqueue_run(s, row, Trigger.MANUAL, {"force": True})
        assert not merged and first.state == RunState.PENDING
    with catalog.transaction() as s:
        again, merged = claims.enqueue_run(s, row, Trigger.ON_BASE_TABLE_CHANGE)
        assert merged and again.run_id == first.run_id  # automatic triggers coalesce silently
        request, merged = claims.enqueue_run(s, row, Trigger.MANUAL)
        assert merged and request.state == RunState.MERGED and str(first.run_id) in (request.mode_reason or "")
    with catalog.transaction() as s:
        assert claims.start_pending(s, catalog.objects.by_id(s, row.id), first.run_id, "a:1:1", 60)
    with catalog.transaction() as s:
        assert not claims.start_pending(s, row, first.run_id, "b:2:2", 60)  # already started
    with catalog.transaction() as s:
        second, _ = claims.enqueue_run(s, row, Trigger.SCHEDULED)
    with pytest.raises(BusyError), catalog.transaction() as s:
        claims.start_pending(s, catalog.objects.by_id(s, row.id), second.run_id, "b:2:2", 60)
    with catalog.transaction() as s:  # the busy start rolled back: still pending
        assert [r.run_id for r in claims.pending_runs(s, row.id)] == [second.run_id]
        assert claims.finish_pending(s, second.run_id, RunState.UPSTREAM_FAILED, "upstream 'x' failed")
        assert not claims.finish_pending(s, second.run_id, RunState.SKIPPED)
