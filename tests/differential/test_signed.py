"""Differential tests of incremental refresh after deletes and updates: Iceberg
base tables changed by an outside writer with copy-on-write deletes, overwrites (updates)
and position delete files; after every refresh each MV equals, as a multiset, DuckDB's
result of its query over what pyiceberg reads of the base tables now
(``scan().to_arrow()``, deletes applied), and every refresh after the first build is
INCREMENTAL (the MVs are strict ``refresh_mode = 'INCREMENTAL'``).

The sequence is seeded (``SPARKMV_SIGNED_SEED``, default 23): which rows are deleted or
updated and the values written are drawn, the kinds of change per step are fixed so that
each step holds these cases:

1. deletes of ``fact`` and ``dim`` in one run (both join sides), ``more`` (UNION ALL), and
   a row of ``fact`` updated into another group and another MV partition;
2. a group emptied, the row holding a group's MAX deleted, rows with NULL group keys
   deleted, rows deleted that the filtered MVs never saw, and an append;
3. ``fact`` emptied (every group disappears);
4. an expired consumed snapshot: the AUTO MV falls back to PCT or FULL with the reason.

A nested MV (an aggregate over the partitioned aggregate MV) follows its base MV's
incremental publishes (Iceberg overwrites of its partitions). A second test writes
position delete files into a table of an external Iceberg catalog (merge-on-read, as
Spark or Trino do) and crashes the INCREMENTAL runs applying them (before and after the
publish): recovery applies each change exactly once.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import AlwaysTrue, EqualTo, In, IsNull

from tests.differential.ivm_compare import compare
from tests.differential.ivm_harness import (
    AMTS,
    COLUMNS,
    DATES,
    DIM_KEYS,
    KEYS,
    LABELS,
    REGION_KEYS,
    STRS,
    VS,
    XS,
    IvmMv,
    arrow_schema,
    mv_of,
    run_oracle,
)

pytestmark = [pytest.mark.spark, pytest.mark.differential]

SEED = int(os.environ.get("SPARKMV_SIGNED_SEED", "23"))
PARTS = ["p0", None, "p1", "p2"]
NESTED = IvmMv(
    "mv_nested",
    None,
    "SELECT a.p, count(*) AS groups, sum(a.n) AS n, max(a.mx_v) AS mx_v, min(a.mn_s) AS mn_s "
    "FROM mv_agg_by_p a GROUP BY a.p",
    "SELECT a.p, count(*) AS groups, sum(a.n) AS n, max(a.mx_v) AS mx_v, min(a.mn_s) AS mn_s "
    "FROM mv_agg_by_p a GROUP BY a.p",
)


class World:
    """Iceberg base tables of sparkmv's catalog (or of an external one), written as an
    outside writer would, and the oracle over what pyiceberg reads of them now."""

    def __init__(self, client: Any, rnd: random.Random, load: Any) -> None:
        self.client, self.rnd, self.load = client, rnd, load
        self.next_id = 0
        self.log: list[str] = []

    def row(self, table: str) -> dict[str, Any]:
        """One generated row of ``table`` (``fact``/``more`` rows get a fresh ``id``)."""
        r = self.rnd
        if table == "dim":
            return {"k": r.choice(DIM_KEYS), "label": r.choice(LABELS), "r": r.choice(REGION_KEYS)}
        self.next_id += 1
        values = (r.choice(KEYS), r.choice(VS), r.choice(AMTS), r.choice(XS), r.choice(STRS), r.choice(DATES))
        return dict(zip([c[0] for c in COLUMNS[table]], (self.next_id, *values, r.choice(PARTS)), strict=True))

    def append(self, table: str, n: int) -> None:
        rows = [self.row(table) for _ in range(n)]
        self.load(table).append(pa.Table.from_pylist(rows, schema=arrow_schema(table)))
        self.log.append(f"append to {table}: {rows}")

    def delete(self, table: str, predicate: Any) -> None:
        self.load(table).delete(predicate)
        self.log.append(f"delete from {table} where {predicate}")

    def now(self, table: str) -> pa.Table:
        return self.load(table).scan().to_arrow()

    def pick_ids(self, table: str, n: int) -> list[int]:
        ids = sorted(self.now(table).column("id").to_pylist())
        return self.rnd.sample(ids, min(n, len(ids)))

    def update(self, table: str, row_id: int, **values: Any) -> None:
        """Overwrite the row ``row_id`` with ``values`` changed (a delete and an append)."""
        old = self.now(table).filter(pc.field("id") == row_id).to_pylist()[0]
        new = {**old, **values}
        self.load(table).overwrite(pa.Table.from_pylist([new], schema=arrow_schema(table)), EqualTo("id", row_id))
        self.log.append(f"update {table} row {old} -> {new}")

    def oracle(self, mv: IvmMv, con: duckdb.DuckDBPyConnection, tables: list[str]) -> tuple[list[str], list[Any]]:
        for t in tables:
            con.register(f"{t}_now", self.now(t))
        ctes = [f"{t} AS (SELECT * FROM {t}_now)" for t in tables]
        if mv is NESTED:
            ctes.append(f"mv_agg_by_p AS ({mv_of('agg_by_p').duck_sql})")
        return run_oracle(con, f"WITH {', '.join(ctes)} {mv.duck_sql}")


def check(client: Any, world: World, mv: IvmMv, tables: list[str], expect: str | None, step: str) -> Any:
    """Refresh ``mv``; its run must end SUCCESS with mode ``expect`` (any when None) and its
    rows equal the oracle's."""
    run = client.refresh(mv.name)
    context = f"{mv.name} after {step}: run {run.run_id} {run.state} {run.mode} ({run.reason}) {run.error or ''}"
    assert run.state == "SUCCESS" and (expect is None or run.mode == expect), context + "\n" + "\n".join(world.log)
    assert_oracle(client, world, mv, tables, context)
    return run


def assert_oracle(client: Any, world: World, mv: IvmMv, tables: list[str], context: str) -> None:
    """``mv`` holds exactly the oracle's rows."""
    df = client.table(mv.name)
    with duckdb.connect() as con:
        columns, rows = world.oracle(mv, con, tables)
    diff = compare(list(df.columns), [tuple(r) for r in df.collect()], columns, rows)
    assert diff is None, f"{context}\n{diff}\nwrites:\n" + "\n".join(world.log)


def _mvs() -> list[tuple[IvmMv, list[str]]]:
    return [
        (mv_of("agg_by_p"), ["fact"]),
        (mv_of("join"), ["fact", "dim"]),
        (mv_of("union"), ["fact", "more"]),
        (NESTED, ["fact"]),
    ]


def _steps(world: World) -> list[tuple[str, Any]]:
    def step1() -> None:
        world.delete("fact", In("id", world.pick_ids("fact", 3)))
        dim_keys = [k for k in world.now("dim").column("k").to_pylist() if k is not None]
        world.delete("dim", EqualTo("k", world.rnd.choice(dim_keys)))
        world.delete("more", In("id", world.pick_ids("more", 2)))
        moved = world.now("fact").filter(pc.field("p") == "p0").column("id").to_pylist()
        world.update("fact", world.rnd.choice(moved), k="moved", p="p2", v=world.rnd.choice([5, -7]))

    def step2() -> None:
        fact = world.now("fact")
        keys = [k for k in set(fact.column("k").to_pylist()) if k is not None]
        world.delete("fact", EqualTo("k", world.rnd.choice(sorted(keys))))  # a group emptied in every p
        fact = world.now("fact")
        top = max((v for v in fact.column("v").to_pylist() if v is not None), default=None)
        if top is not None:
            world.delete("fact", EqualTo("v", top))  # a group loses its MAX
        world.delete("fact", IsNull("k"))  # NULL group keys
        unseen = fact.filter(pc.field("v") <= 0).column("id").to_pylist()  # not in the filtered MVs
        if unseen:
            world.delete("fact", In("id", unseen))
        world.append("fact", 4)

    def step3() -> None:
        world.delete("fact", AlwaysTrue())

    return [("step 1 (deletes, an update)", step1), ("step 2 (groups emptied)", step2), ("step 3 (emptied)", step3)]


def _assert_explained(client: Any, world: World) -> None:
    """EXPLAIN REFRESH of the join MV shows the change log of both bases: rows added and
    retracted, files read."""
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_join").message or ""
    lines = {x.split()[0]: x for x in text.splitlines() if x.startswith("  default.")}
    assert set(lines) == {"default.dim", "default.fact"}, text
    fact = lines["default.fact"].split()
    assert fact[1] == "signed" and fact[2].startswith("+") and int(fact[4].lstrip("-")) >= 4, text
    assert lines["default.dim"].split()[1] == "signed", text


def test_mvs_follow_copy_on_write_deletes_and_updates(make_client: Any, tmp_path: Path) -> None:
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "more", "dim"):
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 12), ("fact", 12), ("fact", 10), ("more", 6), ("dim", 6)):
        world.append(table, n)
    mvs = _mvs()
    for mv, _ in mvs:
        client.sql(mv.ddl("INCREMENTAL"))
    for mv, tables in mvs:
        check(client, world, mv, tables, "FULL", "the first build")
    for i, (step, change) in enumerate(_steps(world)):
        change()
        if i == 0:
            _assert_explained(client, world)
        for mv, tables in mvs:
            run = check(client, world, mv, tables, "INCREMENTAL", step)
            incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
            assert "signed change log" in incremental["reason"], incremental
    # an expired consumed snapshot: no change log, AUTO falls back saying why
    agg, tables = mvs[0]
    consumed = store.load(ObjectName("default", "fact")).current_snapshot().snapshot_id
    world.append("fact", 3)
    world.delete("fact", In("id", world.pick_ids("fact", 1)))
    store.load(ObjectName("default", "fact")).maintenance.expire_snapshots().by_id(consumed).commit()
    client.sql(f"ALTER MATERIALIZED VIEW {agg.name} SET PROPERTIES ('refresh_mode' = 'AUTO')")
    run = check(client, world, agg, tables, None, "the consumed snapshot expired")
    assert run.mode in ("PCT", "FULL"), run
    reason = next(c["reason"] for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert reason == f"snapshot {consumed} of base table 'default.fact' was expired", reason


def _external_world(client: Any, tmp_path: Path) -> World:
    """``lake.db.fact`` (partitioned by ``p``) in an external SQLite Iceberg catalog."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    uri, warehouse = f"sqlite:///{tmp_path / 'lake.db'}", tmp_path / "lake"
    warehouse.mkdir()
    lake = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    lake.create_namespace("db")
    table = lake.create_table(("db", "fact"), schema=arrow_schema("fact"))
    p = table.schema().find_field("p")
    with table.update_spec() as spec:
        spec.add_field(p.name, IdentityTransform(), "p")
    del PartitionField, PartitionSpec
    client.execute(
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )
    return World(client, random.Random(SEED + 1), lambda _t: lake.load_table(("db", "fact")))


def _crashed_then_recovered(client: Any, name: str, point: str, chunk: int | None) -> Any:
    """Refresh ``name`` crashing at fault ``point`` (a process death: the run is left with
    its lease), wait for the lease to expire, recover; returns the recovered run."""
    from sparkmv.refresh.faults import FaultInjector
    from tests.refresh.procs import wait_lease_expired
    from tests.refresh.test_fault_inprocess import CrashAt, SimulatedCrash

    client.runtime.faults = CrashAt(point, chunk)
    with pytest.raises(SimulatedCrash):
        client.refresh(name)
    client.runtime.faults = FaultInjector()
    wait_lease_expired(client, name)
    outcome = next(o for o in client.recover() if o.run is not None)
    return outcome.run


def test_position_deletes_applied_exactly_once_across_crashes(make_client: Any, tmp_path: Path) -> None:
    from sparkmv.demo.iceberg_deletes import delete_rows
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    world = _external_world(client, tmp_path)
    for n in (14, 12):
        world.append("fact", n)
    base = mv_of("agg_by_p")
    mv = IvmMv(
        base.name, base.partition_by, base.spark_sql.replace("FROM fact f", "FROM lake.db.fact f"), base.duck_sql
    )
    client.sql(
        mv.ddl("INCREMENTAL").replace(
            "'refresh_mode' = 'INCREMENTAL'",
            "'refresh_mode' = 'INCREMENTAL', 'lease_timeout_seconds' = '2', 'lease_renew_seconds' = '1'",
        )
    )
    check(client, world, mv, ["fact"], "FULL", "the first build")

    def snapshot() -> int:
        return int(client.runtime.iceberg.load(ObjectName.parse(mv.name)).current_snapshot().snapshot_id)

    # position delete files (merge-on-read): the run dies after staging its chunk, recovery
    # resumes it and publishes once
    deleted = delete_rows(world.load("fact"), lambda t: pc.fill_null(pc.equal(t.column("k"), "a"), False))
    world.log.append(f"position deletes of {deleted} rows with k = 'a'")
    assert deleted > 0
    run = _crashed_then_recovered(client, mv.name, "after_progress_recorded", 0)
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert_oracle(client, world, mv, ["fact"], "position deletes (recovered)")
    # more position deletes on files that have some already, and a copy-on-write delete of
    # rows of files with delete files: the run dies after its publish, recovery completes
    # the catalog side without publishing again
    ids = world.pick_ids("fact", 4)
    deleted = delete_rows(world.load("fact"), lambda t: pc.is_in(t.column("id"), pa.array(ids[:2], pa.int64())))
    world.delete("fact", In("id", ids[2:]))
    world.log.append(f"position deletes of ids {ids[:2]} ({deleted} rows)")
    run = _crashed_then_recovered(client, mv.name, "after_publish", None)
    published = snapshot()
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert snapshot() == published
    run = client.refresh(mv.name)
    assert run.state == "SKIPPED", f"the consumed positions advanced with the recovered run: {run}"
    assert_oracle(client, world, mv, ["fact"], "position and copy-on-write deletes (recovered)")
