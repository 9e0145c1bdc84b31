"""Emptiness probes of the delta terms of a signed change (TPC-H's RF2): orders
deleted with their items (merge-on-read position deletes and copy-on-write) refresh
INCREMENTAL without reading the other table's rows; deletes that do leave joining rows
(items of a kept order, orphan items, an update) take the terms as before. After every
step the MV equals DuckDB's result of its query."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import In

from sparkmv.demo.iceberg_deletes import delete_rows
from sparkmv.refresh.incremental import delta, probe
from sparkmv.sources import change_cache
from sparkmv.storage import position_deletes
from tests.helpers import rows_of
from tests.refresh.lake import Lake
from tests.refresh.test_semijoin import _scans

pytestmark = pytest.mark.spark

QUERY = (
    "SELECT c.name, count(*) AS n, sum(i.qty) AS q, sum(o.amt) AS a FROM {p}orders o "
    "JOIN {p}items i ON i.ok = o.ok JOIN {p}cust c ON c.ck = o.ck GROUP BY c.name"
)
SCHEMAS = {
    "orders": pa.schema([("ok", pa.int64()), ("ck", pa.int64()), ("amt", pa.int64())]),
    "items": pa.schema([("ok", pa.int64()), ("qty", pa.int64())]),
    "cust": pa.schema([("ck", pa.int64()), ("name", pa.string())]),
}


@pytest.fixture(autouse=True)
def _probe_small_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tables are a few KiB: probe them all the same."""
    monkeypatch.setattr(probe, "MIN_TARGET_BYTES", 0)


class World(Lake):
    """The base tables in an external SQLite Iceberg catalog ``lake`` (namespace ``db``),
    written as an outside writer would (sparkmv's own tables take no delete files)."""

    def __init__(self, client: Any, tmp_path: Path) -> None:
        super().__init__(client, tmp_path, SCHEMAS, QUERY)

    def delete_positions(self, table: str, keys: list[int]) -> None:
        """Merge-on-read: position delete files for the rows whose ``ok`` is in ``keys``."""
        values = pa.array(keys, pa.int64())
        delete_rows(self.load(table), lambda t: pc.is_in(t.column("ok"), value_set=values), ["ok"])


def _setup(make_client: Any, tmp_path: Path) -> tuple[Any, World]:
    client = make_client(tmp_path / "home")
    world = World(client, tmp_path)
    world.append("cust", [(k, f"c{k % 6}") for k in range(40)])
    for lo in range(0, 3000, 1000):
        amt = [int.from_bytes(hashlib.sha256(str(k).encode()).digest()[:4], "big") for k in range(lo, lo + 1000)]
        world.append("orders", [(k, k % 40, amt[k - lo]) for k in range(lo, lo + 1000)])
        world.append("items", [(k, j + k % 7) for k in range(lo, lo + 1000) for j in range(3)])
    query = QUERY.format(p="lake.db.")
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}")
    assert client.refresh("mv").mode == "FULL"
    return client, world


def _check(client: Any, world: World) -> Any:
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (run.error, run.reason)
    got = sorted((tuple(r) for r in rows_of(client.table("mv"))), key=repr)
    assert got == world.oracle()
    return run


def _probes(client: Any) -> list[Path]:
    """The probes' stored answers."""
    directory = Path(str(client.runtime.iceberg.warehouse).removeprefix("file://")) / change_cache.DIRECTORY
    return [f for f in directory.iterdir() if f.name.startswith("probe-")] if directory.exists() else []


def _terms(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    terms: list[Any] = []
    term = delta.Views.term
    monkeypatch.setattr(delta.Views, "term", lambda self, *a: terms.append(term(self, *a)) or terms[-1])
    return terms


def test_orders_deleted_with_their_items_read_neither_table(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world = _setup(make_client, tmp_path)
    terms = _terms(monkeypatch)
    set_up: list[Any] = []  # merge-on-read scans set up (each learns its files' spellings first)
    spellings = position_deletes.spark_spellings
    monkeypatch.setattr(position_deletes, "spark_spellings", lambda *a: set_up.append(a) or spellings(*a))
    keys = [5, 777, 1500, 2999, 1234]
    world.delete_positions("orders", keys)
    world.delete_positions("items", keys)
    run = _check(client, world)
    assert set_up == []  # probed first: neither table's merge-on-read scan was even set up
    reason = run.candidates[0]["reason"]
    # Sorted by name: the items term reads orders old (its retracted rows), the orders term
    # reads items new (no row joins).
    assert "term of 'lake.db.items': 'lake.db.orders' only its retracted rows join (ok probed for the keys of ok)" in (
        reason
    ), reason
    assert "term of 'lake.db.orders': 'lake.db.items' no row joins (ok probed for the keys of ok)" in reason, reason
    items_term, orders_term = terms
    assert _scans(items_term, "orders") == (0, 0)  # the retracted rows come from the change cache
    assert _scans(orders_term, "items") == (0, 0)  # a FALSE filter: Spark reads no file of items
    # The answers are stored beside the change cache: two probes.
    assert len(_probes(client)) == 2


def test_deletes_that_leave_joining_rows_take_the_terms_as_before(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world = _setup(make_client, tmp_path)
    terms = _terms(monkeypatch)
    # Items of kept orders: the orders still join (their probe finds rows).
    world.delete_positions("items", [10, 11, 2500])
    run = _check(client, world)
    assert "probed" not in run.candidates[0]["reason"]
    # Not even probed: the orders of the deleted items did not change, so their rows are
    # likely there (a probe would read the column for nothing).
    assert _probes(client) == []
    assert _scans(terms[-1], "orders")[0] > 0
    # Orders deleted, their items kept (orphans): the items still join nothing after the
    # delete, but at their new position they hold the keys, so the orders term reads them.
    world.delete_positions("orders", [20, 21])
    run = _check(client, world)
    assert "probed" not in run.candidates[0]["reason"]
    # An update (copy-on-write delete and re-append of an order) and deletes of both: the
    # orders change inserts a row, so the items term reads orders old as before.
    world.load("items").delete(In("ok", [30, 31]))
    world.load("orders").delete(In("ok", [30, 31, 40]))
    world.append("orders", [(40, 3, 99)])
    run = _check(client, world)
    assert "'lake.db.orders' only its retracted rows join" not in run.candidates[0]["reason"]
    # Then both deleted copy-on-write: netted to retractions only, and probed.
    world.load("orders").delete(In("ok", [50, 2050]))
    world.load("items").delete(In("ok", [50, 2050]))
    run = _check(client, world)
    assert "only its retracted rows join" in run.candidates[0]["reason"], run.candidates[0]["reason"]


EXISTS_QUERY = (
    "SELECT c.name, count(*) AS n, sum(o.amt) AS s FROM {p}orders o JOIN {p}cust c ON c.ck = o.ck "
    "WHERE EXISTS (SELECT 1 FROM {p}items i WHERE i.ok = o.ok AND i.qty > 1) GROUP BY c.name"
)
IN_JOIN_QUERY = (  # TPC-H Q18's shape: the stage's table also joined above it
    "SELECT c.name, count(*) AS n, sum(i.qty) AS q FROM {p}orders o JOIN {p}cust c ON c.ck = o.ck "
    "JOIN {p}items i ON i.ok = o.ok "
    "WHERE o.ok IN (SELECT ok FROM {p}items GROUP BY ok HAVING sum(qty) > 9) GROUP BY c.name"
)
IN_QUERY = (
    "SELECT c.name, count(*) AS n, sum(o.amt) AS s FROM {p}orders o JOIN {p}cust c ON c.ck = o.ck "
    "WHERE o.ok IN (SELECT ok FROM {p}items GROUP BY ok HAVING sum(qty) > 9) GROUP BY c.name"
)


def test_stages_of_order_keys_follow_orders_deleted_with_their_items_from_the_changes_alone(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """TPC-H Q4's and Q18's shapes: a stage of order keys over ``items`` (``EXISTS``, and
    ``IN`` a grouped subquery with ``HAVING``). After orders deleted with their items, the
    stage's delta is computed from the retracted items alone, the orders term reads nothing
    of the stage, and AUTO's estimate counts no read of either (``cust`` is not probed: its
    customers are not deleted)."""
    client, world = _setup(make_client, tmp_path)
    from sparkmv.refresh.incremental import stages

    computed: list[Any] = []
    retracted_delta = stages._retracted_delta
    monkeypatch.setattr(stages, "_retracted_delta", lambda *a: computed.append(retracted_delta(*a)) or computed[-1])
    for name, sql in (("mv_exists", EXISTS_QUERY), ("mv_in", IN_QUERY), ("mv_in_join", IN_JOIN_QUERY)):
        query = sql.format(p="lake.db.")
        client.sql(
            f"CREATE MATERIALIZED VIEW {name} REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}"
        )
        assert client.refresh(name).mode == "FULL"
    keys = [5, 777, 1500, 2999, 1234, 13, 14]
    world.delete_positions("orders", keys)
    world.delete_positions("items", keys)
    items_bytes = sum(f.file.file_size_in_bytes for f in world.load("items").scan().plan_files())
    caplog.set_level("INFO", logger="sparkmv.refresh")
    for name, sql in (("mv_exists", EXISTS_QUERY), ("mv_in", IN_QUERY), ("mv_in_join", IN_JOIN_QUERY)):
        run = client.refresh(name)
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (run.error, run.reason)
        got = sorted((tuple(r) for r in rows_of(client.table(name))), key=repr)
        con = duckdb.connect()
        for table in SCHEMAS:
            arrow = world.load(table).scan().to_arrow()  # noqa: F841
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM arrow")
        assert got == sorted(con.execute(sql.format(p="")).fetchall(), key=repr), name
        assert computed and computed[-1] is not None, name
        reason = run.candidates[0]["reason"]
        joined = re.search(r"joins (\S+) KiB", reason)
        assert "inner stages" not in reason and joined is not None, reason
        assert float(joined.group(1)) * 1024 < items_bytes / 4, (reason, items_bytes)  # cust's rows only
        # A read a probe emptied is not reduced too: the reduction of the stage read new would
        # read the stage over items back (TPC-H SF1 Q4: 42 MB).
        logged = [r.getMessage() for r in caplog.records]
        probed = {m.split(": ", 1)[1].split(" only ")[0].split(" no row ")[0] for m in logged if m.startswith("probe:")}
        reduced = [m for m in logged if m.startswith("semi-join reduction:") and any(p in m for p in probed)]
        assert probed and reduced == [], (name, probed, reduced)
        caplog.clear()


def test_auto_reads_an_unread_change_when_its_probes_could_empty_the_terms(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AUTO reads a large signed change before deciding only when INCREMENTAL could win
    (its floor estimate): that estimate counts the probes not run yet as finding nothing,
    so orders deleted with their items are read, probed and applied INCREMENTAL, where
    without the probes every term would read the other table whole and FULL would win.
    Three more MVs over both tables share reading the change (a quarter each), as TPC-H's
    22 MVs share ``lineitem``'s."""
    from sparkmv.refresh.incremental import decide

    client, world = _setup(make_client, tmp_path)
    # At this size only the proportions matter: no fixed costs; every change "large".
    monkeypatch.setattr(decide, "JOIN_TERM_FIXED_BYTES", 0)
    monkeypatch.setattr(decide, "SIGNED_FIXED_BYTES", 0)
    client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('refresh_mode' = 'AUTO')")
    for i in range(3):
        client.sql(
            f"CREATE MATERIALIZED VIEW other{i} REFRESH DEFERRED AS SELECT o.ck, count(*) AS n "
            "FROM lake.db.orders o JOIN lake.db.items i ON i.ok = o.ok GROUP BY o.ck"
        )
        assert client.refresh(f"other{i}").state == "SUCCESS"
    world.delete_positions("orders", [8, 9, 2222])
    world.delete_positions("items", [8, 9, 2222])
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (run.error, run.reason)
    got = sorted((tuple(r) for r in rows_of(client.table("mv"))), key=repr)
    assert got == world.oracle()
    chosen = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert "probed for the keys of ok" in chosen["reason"], chosen["reason"]
    assert "change cache" in chosen["reason"], chosen["reason"]  # both changes were read
