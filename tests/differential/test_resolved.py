"""Differential tests of queries maintained only once resolved against their base tables'
schemas (:mod:`sparkmv.analysis.qualify`): a CTE and a derived table that select ``*``
joined to another table, and a derived table of unqualified columns under a join (an SDP
temporary view inlined into the MV that reads it). Kept by strict INCREMENTAL refreshes
through appends, copy-on-write deletes and updates of Iceberg base tables (the seeded steps
of :mod:`tests.differential.test_signed`); after every refresh each MV equals DuckDB's
result of its query over what pyiceberg reads now.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.differential.ivm_harness import IvmMv, arrow_schema
from tests.differential.test_signed import SEED, World, _steps, check

pytestmark = [pytest.mark.spark, pytest.mark.differential]

_STAR_CTE = (
    "WITH f AS (SELECT * FROM fact WHERE v IS NOT NULL) "
    "SELECT f.id, f.k, f.v, dm.label FROM f JOIN (SELECT * FROM dim) AS dm ON f.k = dm.k"
)
_VIEW_UNDER_JOIN = (
    "SELECT c.k, c.w, dm.label FROM (SELECT k, v * 2 AS w, amt FROM fact WHERE amt IS NOT NULL) AS c "
    "JOIN dim dm ON c.k = dm.k"
)
_AGG_OF_VIEW = (
    "SELECT dm.label, count(*) AS n, sum(c.w) AS sw FROM (SELECT k, v * 2 AS w FROM fact WHERE v > 0) AS c "
    "JOIN dim dm ON c.k = dm.k GROUP BY dm.label"
)
_STAR_CTE_DUCK = (  # the oracle's relations are CTEs already: the CTE as a derived table
    "SELECT f.id, f.k, f.v, dm.label FROM (SELECT * FROM fact WHERE v IS NOT NULL) AS f "
    "JOIN (SELECT * FROM dim) AS dm ON f.k = dm.k"
)
MVS = [
    (IvmMv("mv_resolved_star_cte", None, _STAR_CTE, _STAR_CTE_DUCK), ["fact", "dim"]),
    (IvmMv("mv_resolved_view_join", None, _VIEW_UNDER_JOIN, _VIEW_UNDER_JOIN), ["fact", "dim"]),
    (IvmMv("mv_resolved_agg_view", None, _AGG_OF_VIEW, _AGG_OF_VIEW), ["fact", "dim"]),
]


def test_star_and_unqualified_derived_tables_follow_appends_deletes_and_updates(
    make_client: Any, tmp_path: Path
) -> None:
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim", "more"):  # the seeded steps change all three
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED + 310), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 16), ("fact", 12), ("dim", 6), ("more", 8)):
        world.append(table, n)
    for mv, tables in MVS:
        client.sql(mv.ddl("INCREMENTAL"))  # refused before the query was resolved
        check(client, world, mv, tables, "FULL", "the first build")
        text = client.execute(f"EXPLAIN REFRESH MATERIALIZED VIEW {mv.name}").message or ""
        assert "maintenance plan: delta rules" in text, text

    steps = dict(_steps(world))
    first, second, _ = steps.values()

    def changed() -> None:  # appends, deletes of both join sides and an update in one run
        world.append("fact", 6)
        world.append("dim", 2)
        first()

    for step, change in [("appends, deletes and an update", changed), ("groups emptied", second)]:
        change()
        for mv, tables in MVS:
            check(client, world, mv, tables, "INCREMENTAL", step)
