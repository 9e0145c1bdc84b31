"""Differential tests of affected-key recomputation by a correlation key (the shapes
of TPC-H Q13, Q17, Q21 and Q22): aggregates over relations with correlated ``EXISTS``,
``NOT EXISTS``, ``NOT IN`` and scalar subqueries, and over a derived table the key
partitions (grouped by it, or under its ``NOT EXISTS``), kept by strict INCREMENTAL refreshes through appends,
copy-on-write deletes and updates of the tables the key binds (the seeded steps of
:mod:`tests.differential.test_signed`, NULL keys among them), and through a change of a table
it binds to no key (then maintained by affected-key recomputation of the group keys). After
every refresh each MV equals DuckDB's result of its query over what pyiceberg reads now.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.differential.ivm_harness import IvmMv, arrow_schema
from tests.differential.test_signed import SEED, World, _steps, check

pytestmark = [pytest.mark.spark, pytest.mark.differential]

# TPC-H Q21's shape: fact as l1 (joined to dim on the key), fact again as l3 under NOT
# EXISTS, more as l2 under EXISTS, all correlated on k; reg joined through dim.r: no key.
_Q21 = (
    "SELECT rg.region, count(*) AS n, sum(f.amt) AS sa, avg(f.v) AS av FROM fact f, dim dm, reg rg "
    "WHERE f.k = dm.k AND dm.r = rg.r AND f.x IS NOT NULL "
    "AND EXISTS (SELECT * FROM more m WHERE m.k = f.k AND m.id <> f.id) "
    "AND NOT EXISTS (SELECT * FROM fact g WHERE g.k = f.k AND g.id <> f.id AND g.v > f.v) "
    "GROUP BY rg.region"
)
# NOT IN's NULL semantics (a NULL in the subquery's column for a key rejects every row of
# it), a correlated scalar average, and a NULL correlation key (the outer row of a NULL k
# passes NOT IN over no rows, and fails the comparison with a NULL average).
_NOT_IN = (
    "SELECT f.p, count(*) AS n, sum(f.amt) AS s FROM fact f "
    "WHERE f.v NOT IN (SELECT m.v FROM more m WHERE m.k = f.k AND m.x IS NOT NULL) "
    "AND (f.d IS NULL OR f.v >= (SELECT avg(g.v) FROM fact g WHERE g.k = f.k)) GROUP BY f.p"
)
# TPC-H Q13's shape: a derived table grouped by the key its LEFT JOIN binds (dim's keys
# repeat and hold NULL), counted again above it.
_Q13 = (
    "SELECT n, count(*) AS c FROM (SELECT dm.k, count(f.id) AS n FROM dim dm "
    "LEFT OUTER JOIN fact f ON dm.k = f.k AND f.v > 0 GROUP BY dm.k) AS d GROUP BY n"
)
# TPC-H Q22's shape: a derived table of the rows with no match under NOT EXISTS, beside an
# uncorrelated scalar subquery over a table bound to no key.
_Q22 = (
    "SELECT g, count(*) AS n, sum(amt) AS s FROM (SELECT substring(f.s, 1, 1) AS g, f.amt FROM fact f "
    "WHERE f.v >= (SELECT count(*) FROM reg WHERE reg.region IS NOT NULL) "
    "AND NOT EXISTS (SELECT * FROM dim dm WHERE dm.k = f.k)) AS sub GROUP BY g"
)
# TPC-H Q17's shape: a global aggregate over a correlated scalar average.
_Q17 = (
    "SELECT sum(f.v) / 7 AS avg_yearly, count(*) AS n FROM fact f, dim dm "
    "WHERE dm.k = f.k AND dm.label IS NOT NULL AND f.v < (SELECT 0.5 * avg(g.v) FROM more g WHERE g.k = dm.k)"
)
MVS = [
    (IvmMv("mv_corr_q21", None, _Q21, _Q21), ["fact", "dim", "reg", "more"]),
    (IvmMv("mv_corr_not_in", None, _NOT_IN, _NOT_IN), ["fact", "more"]),
    (IvmMv("mv_corr_q13", None, _Q13, _Q13), ["fact", "dim"]),
    (IvmMv("mv_corr_q22", None, _Q22, _Q22), ["fact", "dim", "reg"]),
    (IvmMv("mv_corr_q17", None, _Q17, _Q17), ["fact", "dim", "more"]),
]
# Their technique after a change of reg, a table they read but bind to no key.
REG_CHANGED = {
    "mv_corr_q21": "affected-key recomputation of the group keys (region)",
    "mv_corr_q22": "affected-key recomputation of the group keys (g)",
}
REGS = [{"r": "r1", "region": "north"}, {"r": "r2", "region": None}, {"r": None, "region": "south"}]


def test_correlated_mvs_follow_appends_deletes_and_updates(make_client: Any, tmp_path: Path) -> None:
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim", "more", "reg"):
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED + 21), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 18), ("fact", 14), ("dim", 7), ("more", 16)):
        world.append(table, n)
    world.load("reg").append(pa.Table.from_pylist(REGS, schema=arrow_schema("reg")))
    for mv, tables in MVS:
        client.sql(mv.ddl("INCREMENTAL"))
        check(client, world, mv, tables, "FULL", "the first build")

    for name in (mv.name for mv, _ in MVS):
        text = client.execute(f"EXPLAIN REFRESH MATERIALIZED VIEW {name}").message or ""
        assert "maintenance plan: affected-key recomputation of a correlation key" in text, text
    lines = (client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_corr_q21").message or "").splitlines()
    assert "    default.reg bound by no key (a change of it recomputes the touched groups)" in lines, lines
    assert "    default.more bound by k" in lines, lines

    steps = dict(_steps(world))
    first, second, third = steps.values()

    def changed() -> None:  # appends to every bound table, deletes of both sides, an update
        world.append("fact", 6)
        world.append("dim", 2)
        world.append("more", 5)
        first()

    def region_renamed() -> None:  # a table bound to no key: the group keys are recomputed
        world.load("reg").overwrite(
            pa.Table.from_pylist([*REGS[:2], {"r": "r3", "region": "east"}], schema=arrow_schema("reg"))
        )
        world.append("fact", 3)

    def appended() -> None:  # appends only: the old side is the new files but the appended ones
        world.append("fact", 5)
        world.append("more", 4)

    key = "affected-key recomputation of a correlation key"
    for step, change, techniques in [
        ("appends", appended, {}),
        ("appends, deletes and an update", changed, {}),
        ("a region renamed", region_renamed, REG_CHANGED),
        ("groups emptied, MAX rows deleted, an append", second, {}),
        ("fact emptied", third, {}),
    ]:
        change()
        for mv, tables in MVS:
            run = check(client, world, mv, tables, "INCREMENTAL", step)
            technique = techniques.get(mv.name, key)
            assert technique in (run.reason or ""), f"{mv.name} after {step}: {run.reason}"
