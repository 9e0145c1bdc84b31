"""Catalog: migrations from empty, compare-and-set transitions under two concurrent
connections (SQLite and PostgreSQL), drop/create round trips, duplicate names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from sqlalchemy import inspect, select, text, update

from sparkmv.catalog import Catalog, ObjectKind, RefreshState, RunState, Trigger, migrate
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow, ProgressRow, TaskRunRow, VersionRow
from sparkmv.catalog.versions import VersionEntry
from sparkmv.errors import BusyError, CatalogError, LeaseLostError, ObjectExistsError, ObjectNotFoundError
from sparkmv.names import ObjectName
from tests.catalog.lock_waits import LockWaiter

SMV_TABLES = {
    "smv_objects",
    "smv_task_runs",
    "smv_refresh_progress",
    "smv_version_map",
    "smv_control",
    "smv_expectation_results",
    "smv_pipeline_events",
}
MV = ObjectName("default", "mv1")


@pytest.fixture
def catalogs(catalog_url: str) -> Iterator[tuple[Catalog, Catalog]]:
    """Two catalogs on the same database: two engines, two connection pools."""
    a = Catalog.open(catalog_url)
    b = Catalog.open(catalog_url)
    yield a, b
    a.close()
    b.close()


def _mv(cat: Catalog, name: ObjectName = MV) -> int:
    with cat.transaction() as s:
        return cat.objects.insert(s, name, ObjectKind.MATERIALIZED_VIEW, definition="SELECT 1 AS a").id


def _run(cat: Catalog, object_id: int) -> int:
    with cat.transaction() as s:
        return cat.runs.create(s, object_id, "mv1", Trigger.MANUAL).run_id


def _row(cat: Catalog, object_id: int) -> ObjectRow:
    with cat.transaction() as s:
        return cat.objects.by_id(s, object_id)


# -- migrations -------------------------------------------------------------------------------------
def test_migrations_from_empty_create_every_table_at_head(catalog_url: str) -> None:
    cat = Catalog.open(catalog_url)
    try:
        tables = set(inspect(cat.db.engine).get_table_names())
        assert SMV_TABLES <= tables
        assert "smv_alembic_version" in tables
        assert migrate.current_revision(cat.db.engine) == migrate.head_revision() == "0010"
        columns = {c["name"] for c in inspect(cat.db.engine).get_columns("smv_objects")}
        assert {"namespace", "name", "kind", "state", "current_run_id", "lease_owner", "lease_expires"} <= columns
    finally:
        cat.close()


def test_reopen_is_a_no_op_and_keeps_rows(catalog_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = Catalog.open(catalog_url)
    object_id = _mv(cat)
    cat.close()

    def no_upgrade(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("alembic upgrade must not run on a database at head")

    import alembic.command

    monkeypatch.setattr(alembic.command, "upgrade", no_upgrade)
    again = Catalog.open(catalog_url)
    try:
        assert migrate.current_revision(again.db.engine) == "0010"
        with again.transaction() as s:
            versions = s.execute(text("SELECT version_num FROM smv_alembic_version")).scalars().all()
            assert versions == ["0010"]
            assert again.objects.by_id(s, object_id).name == "mv1"
    finally:
        again.close()


def test_open_unreachable_database_raises_catalog_error() -> None:
    with pytest.raises(CatalogError, match=r"^cannot open catalog 'postgresql\+psycopg://nobody@127\.0\.0\.1:1/x': "):
        Catalog.open("postgresql+psycopg://nobody@127.0.0.1:1/x")


def test_open_bad_url_raises_catalog_error() -> None:
    with pytest.raises(CatalogError, match=r"^cannot open catalog 'nosuchdb://x': "):
        Catalog.open("nosuchdb://x")


# -- names --------------------------------------------------------------------------------------------
def test_duplicate_name_insert_raises_object_exists(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    _mv(a)
    with pytest.raises(ObjectExistsError, match=r"^'mv1' already exists$"):
        _mv(b)
    with pytest.raises(ObjectExistsError, match=r"^'mv1' already exists$"):
        with b.transaction() as s:
            b.objects.insert(s, MV, ObjectKind.EXTERNAL_TABLE, location="/x")
    with a.transaction() as s:
        assert [(r.name, r.kind) for r in a.objects.list(s)] == [("mv1", "MATERIALIZED_VIEW")]


def test_same_name_in_other_namespace_is_allowed(catalogs: tuple[Catalog, Catalog]) -> None:
    a, _ = catalogs
    _mv(a)
    _mv(a, ObjectName("sales", "mv1"))
    with a.transaction() as s:
        assert [(r.namespace, r.name) for r in a.objects.list(s)] == [("default", "mv1"), ("sales", "mv1")]


def test_get_missing_and_wrong_kind(catalogs: tuple[Catalog, Catalog]) -> None:
    a, _ = catalogs
    with a.transaction() as s:
        a.objects.insert(s, ObjectName("default", "t"), ObjectKind.EXTERNAL_TABLE, location="/x")
    with pytest.raises(ObjectNotFoundError, match=r"^materialized view 't' does not exist$"):
        with a.transaction() as s:
            a.objects.get(s, ObjectName("default", "t"), ObjectKind.MATERIALIZED_VIEW)
    with pytest.raises(ObjectNotFoundError, match=r"^table or view 'nope' does not exist$"):
        with a.transaction() as s:
            a.objects.get(s, ObjectName("default", "nope"))


# -- drop / create round trips ------------------------------------------------------------------------
def test_drop_cascades_and_recreate_starts_clean(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    for _ in range(3):
        object_id = _mv(a)
        run_id = _run(a, object_id)
        with a.transaction() as s:
            a.runs.add_chunks(s, run_id, [["1995-01"], ["1995-02"]])
            a.versions.apply(s, object_id, run_id, [VersionEntry("default.li", "m=1995-01", "v1")], [])
        with b.transaction() as s:
            assert len(b.runs.list(s, object_id)) == 1
            assert len(b.runs.chunks(s, run_id)) == 2
            assert list(b.versions.load(s, object_id)) == [("default.li", "m=1995-01")]
            b.objects.delete(s, b.objects.get(s, MV))
        with a.transaction() as s:
            assert a.objects.find(s, MV) is None
            assert s.scalars(select(TaskRunRow)).all() == []
            assert s.scalars(select(ProgressRow)).all() == []
            assert s.scalars(select(VersionRow)).all() == []
    # A new object of the same name has no runs or versions of the old one.
    object_id = _mv(b)
    with a.transaction() as s:
        assert a.runs.list(s, object_id) == []
        assert a.versions.load(s, object_id) == {}
        assert a.objects.by_id(s, object_id).state == RefreshState.IDLE


# -- compare-and-set ----------------------------------------------------------------------------------
def test_begin_refresh_twice_raises_busy_naming_state_and_run(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    object_id = _mv(a)
    run1, run2 = _run(a, object_id), _run(a, object_id)
    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run1, "host:1", 30)
    expected = rf"^MV 'mv1' is being refreshed \(state REFRESHING, run {run1}, owner host:1, since \d{{4}}-"
    with pytest.raises(BusyError, match=expected):
        with b.transaction() as s:
            b.objects.begin_refresh(s, b.objects.by_id(s, object_id), run2, "host:2", 30)
    row = _row(a, object_id)
    assert (row.state, row.current_run_id, row.lease_owner) == ("REFRESHING", run1, "host:1")


def _begin_refresh(catalog: Catalog, object_id: int, run_id: int, owner: str) -> Callable[[], None]:
    """``begin_refresh`` of ``run_id`` for ``owner`` in its own transaction on ``catalog``."""

    def work() -> None:
        with catalog.transaction() as s:
            catalog.objects.begin_refresh(s, catalog.objects.by_id(s, object_id), run_id, owner, 30)

    return work


def test_concurrent_begin_refresh_one_wins(catalogs: tuple[Catalog, Catalog]) -> None:
    """A holds its transaction open after its CAS; B's CAS waits for it, then sees B busy."""
    a, b = catalogs
    object_id = _mv(a)
    run_a, run_b = _run(a, object_id), _run(a, object_id)
    waiter = LockWaiter(b, _begin_refresh(b, object_id, run_b, "host:b"))

    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_a, "host:a", 30)
        waiter.start_blocked(a)  # B's compare-and-set waits for A's transaction
    outcome = waiter.join()
    assert isinstance(outcome, BusyError)
    assert str(outcome).startswith(f"MV 'mv1' is being refreshed (state REFRESHING, run {run_a}, owner host:a")
    row = _row(b, object_id)
    assert (row.state, row.current_run_id, row.lease_owner) == ("REFRESHING", run_a, "host:a")


def test_concurrent_begin_refresh_after_rollback_succeeds(catalogs: tuple[Catalog, Catalog]) -> None:
    """When A's transaction rolls back, B's waiting CAS takes the object."""
    a, b = catalogs
    object_id = _mv(a)
    run_a, run_b = _run(a, object_id), _run(a, object_id)
    waiter = LockWaiter(b, _begin_refresh(b, object_id, run_b, "host:b"))

    with pytest.raises(RuntimeError, match=r"^crash$"):
        with a.transaction() as s:
            a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_a, "host:a", 30)
            waiter.start_blocked(a)
            raise RuntimeError("crash")
    assert waiter.join() is None
    row = _row(a, object_id)
    assert (row.state, row.current_run_id, row.lease_owner) == ("REFRESHING", run_b, "host:b")


def test_transition_lifecycle_and_wrong_owner(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_id, "host:a", 30)
    # Another owner, or the wrong expected state, cannot move it.
    with pytest.raises(
        LeaseLostError, match=rf"^run {run_id} lost its lease on object {object_id} \(expected state REFRESHING\)$"
    ):
        with b.transaction() as s:
            b.objects.transition(s, object_id, run_id, "host:b", RefreshState.REFRESHING, RefreshState.FINISHING, 30)
    with pytest.raises(LeaseLostError, match=r"\(expected state FINISHING\)$"):
        with b.transaction() as s:
            b.objects.transition(s, object_id, run_id, "host:a", RefreshState.FINISHING, RefreshState.IDLE, 30)
    with pytest.raises(LeaseLostError):
        with b.transaction() as s:
            b.objects.transition(s, object_id, run_id + 1, "host:a", RefreshState.REFRESHING, RefreshState.IDLE, 30)
    assert _row(a, object_id).state == "REFRESHING"
    # The owner can.
    with b.transaction() as s:
        b.objects.transition(s, object_id, run_id, "host:a", RefreshState.REFRESHING, RefreshState.FINISHING, 30)
    row = _row(a, object_id)
    assert (row.state, row.current_run_id, row.lease_owner) == ("FINISHING", run_id, "host:a")
    with a.transaction() as s:
        a.objects.transition(s, object_id, run_id, "host:a", RefreshState.FINISHING, RefreshState.IDLE, 30)
    row = _row(b, object_id)
    assert (row.state, row.current_run_id, row.lease_owner, row.lease_expires) == ("IDLE", None, None, None)
    assert row.last_run_id == run_id
    # IDLE again: a new refresh may start.
    run2 = _run(b, object_id)
    with b.transaction() as s:
        b.objects.begin_refresh(s, b.objects.by_id(s, object_id), run2, "host:b", 30)
    assert _row(a, object_id).current_run_id == run2


def test_concurrent_transitions_only_one_applies(catalogs: tuple[Catalog, Catalog]) -> None:
    """Two processes believing they own the run: the second CAS sees the state moved."""
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_id, "host:a", 30)

    def finish_b() -> None:
        with b.transaction() as s:
            b.objects.transition(s, object_id, run_id, "host:a", RefreshState.REFRESHING, RefreshState.FINISHING, 30)

    waiter = LockWaiter(b, finish_b)
    with a.transaction() as s:
        a.objects.transition(s, object_id, run_id, "host:a", RefreshState.REFRESHING, RefreshState.IDLE, 30)
        waiter.start_blocked(a)
    assert isinstance(waiter.join(), LeaseLostError)
    assert _row(b, object_id).state == "IDLE"


def test_renew_lease_only_for_owner(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        assert a.objects.renew_lease(s, object_id, run_id, "host:a", 30) is False  # IDLE: nothing held
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_id, "host:a", 1)
    before = _row(a, object_id).lease_expires
    assert before is not None
    with b.transaction() as s:
        assert b.objects.renew_lease(s, object_id, run_id, "host:b", 600) is False
        assert b.objects.renew_lease(s, object_id, run_id + 1, "host:a", 600) is False
    assert _row(a, object_id).lease_expires == before
    with b.transaction() as s:
        assert b.objects.renew_lease(s, object_id, run_id, "host:a", 600) is True
    after = _row(a, object_id).lease_expires
    assert after is not None and after - before > timedelta(seconds=500)


def _expire(cat: Catalog, object_id: int) -> None:
    with cat.transaction() as s:
        s.execute(
            update(ObjectRow).where(ObjectRow.id == object_id).values(lease_expires=utcnow() - timedelta(seconds=5))
        )


def test_take_over_only_expired_lease(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_id, "host:a", 600)
    with b.transaction() as s:
        assert b.objects.expired_leases(s) == []
        assert b.objects.take_over(s, b.objects.by_id(s, object_id), "host:b", 600) is False
    assert _row(a, object_id).lease_owner == "host:a"
    _expire(a, object_id)
    with b.transaction() as s:
        expired = b.objects.expired_leases(s)
        assert [r.id for r in expired] == [object_id]
        assert b.objects.take_over(s, expired[0], "host:b", 600) is True
    row = _row(a, object_id)
    assert (row.state, row.current_run_id, row.lease_owner) == ("REFRESHING", run_id, "host:b")
    # The old owner lost its lease: it can neither renew nor transition.
    with a.transaction() as s:
        assert a.objects.renew_lease(s, object_id, run_id, "host:a", 30) is False
    with pytest.raises(LeaseLostError):
        with a.transaction() as s:
            a.objects.transition(s, object_id, run_id, "host:a", RefreshState.REFRESHING, RefreshState.IDLE, 30)
    with b.transaction() as s:
        b.objects.transition(s, object_id, run_id, "host:b", RefreshState.REFRESHING, RefreshState.IDLE, 30)
    assert _row(a, object_id).state == "IDLE"


def test_concurrent_take_over_one_wins(catalogs: tuple[Catalog, Catalog]) -> None:
    """Two recoverers both saw the expired lease; exactly one takes it."""
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        a.objects.begin_refresh(s, a.objects.by_id(s, object_id), run_id, "host:dead", 600)
    _expire(a, object_id)
    seen_a, seen_b = _row(a, object_id), _row(b, object_id)  # both read the expired row first
    results: list[bool] = []

    def take_b() -> None:
        with b.transaction() as s:
            results.append(b.objects.take_over(s, seen_b, "host:b", 600))

    waiter = LockWaiter(b, take_b)
    with a.transaction() as s:
        assert a.objects.take_over(s, seen_a, "host:a", 600) is True
        waiter.start_blocked(a)
    assert waiter.join() is None
    assert results == [False]
    assert _row(b, object_id).lease_owner == "host:a"


def test_run_states_and_progress(catalogs: tuple[Catalog, Catalog]) -> None:
    a, b = catalogs
    object_id = _mv(a)
    run_id = _run(a, object_id)
    with a.transaction() as s:
        a.runs.add_chunks(s, run_id, [["a"], ["b"], ["c"]])
        done = {"bytes_written": 10, "duration_seconds": 0.5}
        a.runs.complete_chunk(s, run_id, 1, files=["f1", "f2"], processed_rows=7, **done)  # type: ignore[arg-type]
        a.runs.complete_chunk(s, run_id, 2, files=["f3"], processed_rows=5, **done)  # type: ignore[arg-type]
        a.runs.update(s, run_id, state=RunState.RUNNING)
    with b.transaction() as s:
        run = b.runs.get(s, run_id)
        assert (run.state, run.chunks_done, run.rows_written) == ("RUNNING", 2, 12)
        assert [(c.chunk_id, c.is_completed, c.files_written) for c in b.runs.chunks(s, run_id)] == [
            (0, False, 0),
            (1, True, 2),
            (2, True, 1),
        ]
    with pytest.raises(ObjectNotFoundError, match=r"^refresh run 999999 does not exist$"):
        with b.transaction() as s:
            b.runs.get(s, 999999)
