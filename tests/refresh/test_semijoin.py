"""Semi-join reduction of the delta terms: which join columns are reduced
(pure), the MV still equal to DuckDB's result with the reduction on (appends, NULL join
keys, a key range overlapping the old one partly, a signed change), and the pushed filter
pruning what the term reads."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.expressions import In

from sparkmv.analysis.query import parse_query
from sparkmv.analysis.semijoin import reductions
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import delta, semijoin
from tests.helpers import rows_of


@pytest.fixture(autouse=True)
def _reduce_small_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tables are a few KiB: reduce them all the same."""
    monkeypatch.setattr(semijoin, "MIN_TARGET_BYTES", 0)


ORD, ITEMS, CUST = (ObjectName("default", n) for n in ("orders", "items", "cust"))
COLS: dict[ObjectName, dict[str, object]] = {
    ORD: {"ok": "long", "ck": "long", "amt": "long"},
    ITEMS: {"ok": "long", "qty": "long"},
    CUST: {"ck": "long", "name": "string"},
}


def _found(sql: str, changed: ObjectName, cols: dict[ObjectName, dict[str, object]] = COLS) -> list[str]:
    return [f"{r.target.name}.{r.column}<-{r.source}" for r in reductions(parse_query(sql), changed, cols)]


def test_reductions_follow_inner_equi_joins_and_equality_classes() -> None:
    q = "SELECT * FROM orders o JOIN items i ON i.ok = o.ok JOIN cust c ON c.ck = o.ck"
    assert _found(q, ITEMS) == ["orders.ok<-ok"]
    assert _found(q, ORD) == ["cust.ck<-ck", "items.ok<-ok"]
    assert _found(q, CUST) == ["orders.ck<-ck"]
    # WHERE conjuncts and unqualified columns; transitively through the class {o.ok, i.ok, c.ck}.
    q2 = "SELECT * FROM orders, items i, cust WHERE i.ok = orders.ok AND orders.ok = cust.ck AND amt > 1"
    assert _found(q2, ITEMS) == ["cust.ck<-ok", "orders.ok<-ok"]
    # Not sound, so nothing: an outer join, a disjunction, a self-join, a type mismatch.
    assert _found("SELECT * FROM orders o LEFT JOIN items i ON i.ok = o.ok", ORD) == []
    assert _found("SELECT * FROM orders o JOIN items i ON i.ok = o.ok OR i.qty = o.amt", ORD) == []
    assert _found("SELECT * FROM orders o JOIN items i ON i.ok = o.ok JOIN orders p ON p.ok = i.ok", ITEMS) == []
    mixed = {**COLS, CUST: {"ck": "string", "name": "string"}}
    assert _found("SELECT * FROM orders o JOIN cust c ON c.ck = o.ck", ORD, mixed) == []
    # An ambiguous unqualified column (both tables have ck) and a subquery with * are left alone.
    assert _found("SELECT * FROM orders o JOIN cust c ON ck = o.ok", ORD) == []
    starred = "SELECT * FROM orders o JOIN (SELECT * FROM items) s ON ok = o.ok JOIN cust c ON ok = c.ck"
    assert _found(starred, ORD) == []
    # A UNION ALL branch reading the target elsewhere: two references, no reduction.
    assert _found("SELECT o.ok FROM orders o JOIN items i ON i.ok = o.ok UNION ALL SELECT ok FROM items", ORD) == []


QUERY = (
    "SELECT c.name, count(*) AS n, sum(i.qty) AS q, sum(o.amt) AS a FROM orders o "
    "JOIN items i ON i.ok = o.ok JOIN cust c ON c.ck = o.ck GROUP BY c.name"
)
SCHEMAS = {
    "orders": pa.schema([("ok", pa.int64()), ("ck", pa.int64()), ("amt", pa.int64())]),
    "items": pa.schema([("ok", pa.int64()), ("qty", pa.int64())]),
    "cust": pa.schema([("ck", pa.int64()), ("name", pa.string())]),
}


class World:
    def __init__(self, client: Any) -> None:
        self.store = client.runtime.iceberg
        for name, schema in SCHEMAS.items():
            self.store.create_table(ObjectName("default", name), schema, None)

    def append(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        names = SCHEMAS[table].names
        data = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=SCHEMAS[table])
        self.store.load(ObjectName("default", table)).append(data)

    def orders(self, lo: int, hi: int) -> None:
        # amt: 4 bytes of noise a row (incompressible), so that reading orders costs bytes.
        amt = [int.from_bytes(hashlib.sha256(str(k).encode()).digest()[:4], "big") for k in range(lo, hi)]
        self.append("orders", [(k, None if k % 13 == 0 else k % 40, amt[k - lo]) for k in range(lo, hi)])
        self.append("items", [(None if j % 17 == 0 else k, j % 5) for k in range(lo, hi) for j in range(2)])

    def oracle(self) -> list[tuple[Any, ...]]:
        con = duckdb.connect()
        for name in SCHEMAS:
            arrow = self.store.load(ObjectName("default", name)).scan().to_arrow()  # noqa: F841
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
        return sorted(con.execute(QUERY).fetchall(), key=repr)


def _setup(make_client: Any, tmp_path: Path) -> tuple[Any, World]:
    client = make_client(tmp_path / "home")
    world = World(client)
    world.append("cust", [(k, f"c{k % 6}") for k in range(40)])
    for lo in range(0, 8000, 1000):  # files of 1,000 orders each, sorted by key: min/max prune
        world.orders(lo, lo + 1000)
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    assert client.refresh("mv").mode == "FULL"
    return client, world


def _check(client: Any, world: World) -> Any:
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    got = sorted((tuple(r) for r in rows_of(client.table("mv"))), key=repr)
    assert got == world.oracle()
    return run


@pytest.mark.spark
def test_reduced_terms_keep_the_mv_equal_to_duckdb(make_client: Any, tmp_path: Path) -> None:
    client, world = _setup(make_client, tmp_path)
    # New orders above the old keys, items of old and new orders (a key range overlapping
    # the old one partly), items with NULL keys, a new customer.
    world.orders(8000, 8020)
    world.append("items", [(5, 3), (7999, 4), (8005, 1), (None, 9), (123456, 2)])
    world.append("cust", [(41, "c-new"), (None, "c-null")])
    _check(client, world)
    # Only items appended, every key NULL: the orders term reads nothing of orders.
    world.append("items", [(None, 1), (None, 2)])
    _check(client, world)
    # A signed change: orders and items deleted (copy-on-write), one order re-added.
    world.store.load(ObjectName("default", "items")).delete(In("ok", [3, 8001, 7999]))
    world.store.load(ObjectName("default", "orders")).delete(In("ok", [3, 4, 8002]))
    world.append("orders", [(4, 5, 100)])
    _check(client, world)


def _scan_rows(frame: Any, table: str) -> int:
    """Rows the Parquet scans of ``table``'s files output when ``frame`` runs: the rows of
    the row groups not skipped by a pushed filter (Spark's scan metric, before the Filter)."""
    return _scans(frame, table)[0]


def _scans(frame: Any, table: str) -> tuple[int, int]:
    """(:func:`_scan_rows`, the number of ``table``'s files those scans list)."""
    frame.collect()
    total = listed = 0
    stack = [frame._jdf.queryExecution().executedPlan()]
    while stack:
        node = stack.pop()
        kind = node.getClass().getSimpleName()
        if kind == "AdaptiveSparkPlanExec":
            stack.append(node.executedPlan())
        elif kind.endswith("QueryStageExec"):
            stack.append(node.plan())
        elif kind == "FileSourceScanExec":
            files = node.relation().location().inputFiles()
            if any(f"/{table}/" in files[i] for i in range(len(files))):
                total += node.metrics().apply("numOutputRows").value()
                listed += len(files)
        children = node.children()
        stack += [children.apply(i) for i in range(children.size())]
    return total, listed


@pytest.mark.spark
def test_the_reduction_prunes_the_other_tables_row_groups_and_the_estimate_counts_it(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, world = _setup(make_client, tmp_path)
    terms: list[Any] = []
    term = delta.Views.term
    monkeypatch.setattr(delta.Views, "term", lambda self, *a: terms.append(term(self, *a)) or terms[-1])
    world.append("items", [(7990 + j, 1) for j in range(5)])
    run = _check(client, world)
    # The items term reads only orders' last file (keys 7000..7999), not its 8,000 rows.
    assert _scan_rows(terms[-1], "orders") == 1000
    reason = run.candidates[0]["reason"]
    joined = re.search(r"joins (\S+) KiB of (\S+) KiB \(min/max pruning on ok\)", reason)
    assert joined is not None, reason
    assert float(joined.group(1)) * 4 < float(joined.group(2)), reason
    monkeypatch.setattr(semijoin, "ENABLED", False)
    world.append("items", [(7980 + j, 1) for j in range(5)])
    run = _check(client, world)
    assert _scan_rows(terms[-1], "orders") == 8000
    assert "min/max pruning" not in run.candidates[0]["reason"]


EXISTS_QUERY = (
    "SELECT c.name, count(*) AS n, sum(o.amt) AS s FROM orders o JOIN cust c ON c.ck = o.ck "
    "WHERE EXISTS (SELECT 1 FROM items i WHERE i.ok = o.ok AND i.qty > 0) GROUP BY c.name"
)


@pytest.mark.spark
def test_a_semijoin_stage_is_estimated_by_its_keys_range(make_client: Any, tmp_path: Path) -> None:
    """TPC-H Q4's shape: the EXISTS split into a stage of distinct order keys. New orders
    above the old keys: the stage's recomputation and the terms over it are estimated at
    the new files of items and orders (their bounds of ``ok``), not at the whole tables;
    the refresh is INCREMENTAL and exact."""
    client, world = _setup(make_client, tmp_path)
    client.sql(f"CREATE MATERIALIZED VIEW mv_exists PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {EXISTS_QUERY}")
    world.orders(8000, 8010)
    run = client.refresh("mv_exists")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    con = duckdb.connect()
    for name in SCHEMAS:
        arrow = world.store.load(ObjectName("default", name)).scan().to_arrow()  # noqa: F841
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
    expected = sorted(con.execute(EXISTS_QUERY).fetchall(), key=repr)
    assert sorted((tuple(r) for r in rows_of(client.table("mv_exists"))), key=repr) == expected
    reason = run.candidates[0]["reason"]
    staged = re.search(
        r"inner stages \(__smv_stage_1\) recompute their touched keys over the old and new input \(~(\S+) (\S+)\)",
        reason,
    )
    assert staged is not None and staged.group(2) in ("bytes", "KiB"), reason
    items = sum(
        f.file_size_in_bytes
        for f in (t.file for t in world.store.load(ObjectName("default", "items")).scan().plan_files())
    )
    size = float(staged.group(1)) * (1024 if staged.group(2) == "KiB" else 1)
    assert size * 4 < 2 * items, reason  # twice the new items file, not twice all of items
    joined = re.search(r"joins (\S+) KiB of (\S+) KiB \(min/max pruning on [^)]*ok", reason)
    assert joined is not None and float(joined.group(1)) * 4 < float(joined.group(2)), reason


@pytest.mark.spark
def test_a_table_smaller_than_the_threshold_is_joined_whole(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below MIN_TARGET_BYTES no key is collected: the term reads orders whole, exactly."""
    monkeypatch.setattr(semijoin, "MIN_TARGET_BYTES", 1 << 40)
    client, world = _setup(make_client, tmp_path)
    terms: list[Any] = []
    term = delta.Views.term
    monkeypatch.setattr(delta.Views, "term", lambda self, *a: terms.append(term(self, *a)) or terms[-1])
    collected: list[Any] = []
    collect = semijoin.Reducer._collect
    monkeypatch.setattr(semijoin.Reducer, "_collect", lambda self, *a: collected.append(a) or collect(self, *a))
    world.append("items", [(7990 + j, 1) for j in range(5)])
    _check(client, world)
    assert collected == []
    assert _scan_rows(terms[-1], "orders") == 8000


@pytest.mark.spark
def test_an_unclustered_join_column_is_not_reduced(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``orders.ck`` holds 0..39 in every file and ``cust`` is one file (spread 1.0): no
    term whose delta's keys fall inside that range collects them to filter it (no file
    could be skipped), while ``orders.ok`` and ``items.ok`` (one key range per file) are
    still reduced, and so is ``orders.ck`` by new keys above its range; exact."""
    from sparkmv.refresh.incremental.pruned import column_spread

    client, world = _setup(make_client, tmp_path)
    orders = world.store.load(ORD)
    snapshot = orders.current_snapshot().snapshot_id
    assert column_spread(orders, snapshot, "ck") == (1.0, 0, 39)
    ok_spread = column_spread(orders, snapshot, "ok")
    assert ok_spread is not None and ok_spread[0] < 0.2
    seen: dict[str, list[str]] = {}
    original = semijoin.Reducer.conditions

    def recording(self: Any, query: Any, changed: str, *args: Any, **kwargs: Any) -> Any:
        out = original(self, query, changed, *args, **kwargs)
        seen[changed] = sorted(out)
        return out

    monkeypatch.setattr(semijoin.Reducer, "conditions", recording)
    world.append("cust", [(41, "c-new"), (7, "c7b")])
    world.orders(8000, 8010)
    _check(client, world)
    assert seen == {
        "default.cust": [],
        "default.items": ["default.orders"],
        "default.orders": ["default.items"],
    }, seen
    # New customer keys above every ck of orders: that filter skips every file, so it is kept.
    seen.clear()
    world.append("cust", [(50, "c-50"), (51, "c-51")])
    _check(client, world)
    assert seen == {"default.cust": ["default.orders"]}, seen


@pytest.mark.spark
def test_an_unclustered_column_read_new_is_reduced_to_the_files_holding_the_new_keys(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """TPC-H RF1's shape: ``items.ok`` is spread over every file (each holds keys from the
    whole range), and the orders term reads items at its new position, which holds the
    appended items of the new orders. The new keys lie above every old file's range, so
    the term is reduced, by the range of the new orders' keys from their manifests (no
    Spark job collects them), and reads only the new items file, the others left out of
    the scan by their manifest bounds; exact."""
    client = make_client(tmp_path / "home")
    world = World(client)
    world.append("cust", [(k, f"c{k % 6}") for k in range(40)])
    world.append("orders", [(k, k % 40, k) for k in range(8000)])
    for r in range(4):  # four files of items, each with keys from all of 0..7999
        world.append("items", [(k, k % 5) for k in range(r, 8000, 4)])
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    assert client.refresh("mv").mode == "FULL"
    terms: list[Any] = []
    term = delta.Views.term
    monkeypatch.setattr(delta.Views, "term", lambda self, *a: terms.append(term(self, *a)) or terms[-1])
    world.orders(8000, 8020)  # one new file each of orders and items, keys 8000..8019
    caplog.set_level("INFO", logger="sparkmv.refresh")
    _check(client, world)
    # Only the new file is read: its 40 rows, not the 8,000 old ones, and the old files are not even opened.
    assert _scans(terms[-1], "items") == (40, 1)
    reduced = [r.getMessage() for r in caplog.records if "semi-join reduction" in r.getMessage()]
    assert "semi-join reduction: term of 'default.orders': 'default.items' ok BETWEEN min and max of ok" in reduced
