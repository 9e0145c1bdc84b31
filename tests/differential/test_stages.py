"""Differential tests of nested stages: queries with a non-linear operator inside
them, kept by strict INCREMENTAL refreshes through appends, copy-on-write deletes and updates
of Iceberg base tables (the seeded steps of :mod:`tests.differential.test_signed`); after
every refresh each MV equals DuckDB's result of its query over what pyiceberg reads now.

The shapes of TPC-H Q13 (an aggregate of an aggregate, here over an inner join), Q17 (a
correlated scalar subquery decorrelated into a grouped stage, under a global aggregate kept
by the delta rules), Q20 (an IN subquery holding subquery predicates), Q15 (a grouped CTE
joined and compared with its MAX), Q4 / Q18 (EXISTS and an IN of a grouped subquery split
into stages of distinct keys), and stages nested two deep.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.differential.ivm_harness import IvmMv, arrow_schema
from tests.differential.test_signed import SEED, World, _steps, check

pytestmark = [pytest.mark.spark, pytest.mark.differential]

_AGG_OF_AGG = (
    "SELECT s.n, count(*) AS groups, sum(s.sv) AS ssv FROM "
    "(SELECT f.k, count(*) AS n, sum(f.v) AS sv FROM fact f JOIN dim dm ON f.k = dm.k GROUP BY f.k) s GROUP BY s.n"
)
# Its MAX keeps it from a correlation key (a MAX's retractions recompute its groups), so
# the scalar subquery is decorrelated into a stage (the same shape without it is
# maintained through the key: tests/differential/test_correlated.py).
_DECORRELATED = (
    "SELECT sum(f.amt) AS total, count(*) AS n, max(f.v) AS top FROM fact f JOIN dim dm ON f.k = dm.k "
    "WHERE f.v < (SELECT 2 * avg(g.v) FROM fact g WHERE g.k = dm.k AND g.x IS NOT NULL)"
)
_NESTED_IN = (
    "SELECT dm.k, dm.label FROM dim dm WHERE dm.k IN (SELECT f.k FROM fact f WHERE f.x IS NOT NULL "
    "AND f.v >= (SELECT avg(g.v) FROM fact g WHERE g.k = f.k) AND f.k IN (SELECT m.k FROM more m WHERE m.v > 0))"
)
_MAX_OF_CTE = (
    "WITH r AS (SELECT f.k, sum(f.v) AS t FROM fact f WHERE f.v IS NOT NULL GROUP BY f.k) "
    "SELECT dm.label, r.k, r.t FROM dim dm, r WHERE dm.k = r.k AND r.t = (SELECT max(t) FROM r)"
)
_MAX_OF_CTE_DUCK = (
    "SELECT dm.label, r.k, r.t FROM dim dm, "
    "(SELECT f.k, sum(f.v) AS t FROM fact f WHERE f.v IS NOT NULL GROUP BY f.k) r WHERE dm.k = r.k AND "
    "r.t = (SELECT max(t) FROM (SELECT f.k, sum(f.v) AS t FROM fact f WHERE f.v IS NOT NULL GROUP BY f.k) r2)"
)
_TWO_DEEP = (
    "SELECT t.cnt, count(*) AS m, sum(t.c) AS sc FROM (SELECT s.n AS c, count(*) AS cnt FROM "
    "(SELECT f.k, count(*) AS n FROM fact f GROUP BY f.k) s GROUP BY s.n) t GROUP BY t.cnt"
)
_SEMIJOINS = (
    "SELECT dm.label, count(*) AS n, sum(f.amt) AS s FROM fact f JOIN dim dm ON f.k = dm.k "
    "WHERE EXISTS (SELECT 1 FROM more m WHERE m.k = f.k AND m.v > 0) "
    "AND f.k IN (SELECT g.k FROM fact g GROUP BY g.k HAVING count(*) > 1) GROUP BY dm.label"
)
# A CTE over a stage read twice and self-joined (TPC-DS q39): both projections merged over
# their stages (the inner alias g renamed in the second).
_CTE_TWICE = (
    "WITH s AS (SELECT p, k, n FROM (SELECT f.p AS p, f.k AS k, count(*) AS n FROM fact f GROUP BY f.p, f.k) AS g "
    "WHERE n > 1) SELECT a.k, a.p, a.n, b.p AS p2, b.n AS n2 FROM s AS a JOIN s AS b ON a.k = b.k AND a.p < b.p"
)
_CTE_TWICE_DUCK = (
    "SELECT a.k, a.p, a.n, b.p AS p2, b.n AS n2 FROM (SELECT p, k, n FROM (SELECT f.p AS p, f.k AS k, count(*) AS n "
    "FROM fact f GROUP BY f.p, f.k) AS g WHERE n > 1) AS a JOIN (SELECT p, k, n FROM (SELECT f.p AS p, f.k AS k, "
    "count(*) AS n FROM fact f GROUP BY f.p, f.k) AS g WHERE n > 1) AS b ON a.k = b.k AND a.p < b.p"
)
# A UNION ALL of aggregates under an aggregate (TPC-DS q66): each branch a stage.
_UNION_OF_AGGREGATES = (
    "SELECT y.k, sum(y.n) AS n, max(y.m) AS m FROM (SELECT f.k AS k, count(*) AS n, max(f.v) AS m FROM fact f "
    "GROUP BY f.k UNION ALL SELECT d.k, count(*), count(DISTINCT d.label) FROM dim d GROUP BY d.k) AS y GROUP BY y.k"
)
# Grouping sets as the UNION ALL of one GROUP BY per set (TPC-DS q18, q22, q27): a DISTINCT
# aggregate, grouping() / grouping_id(), a HAVING, keys NULL in the data.
_ROLLUP = (
    "SELECT f.p, f.k, sum(f.v) AS sv, count(*) AS n, count(DISTINCT f.s) AS ns, grouping(f.k) AS gk, "
    "grouping_id(f.p, f.k) AS gid FROM fact f WHERE f.v IS NULL OR f.v > -2 GROUP BY ROLLUP (f.p, f.k)"
)
_CUBE = (
    "SELECT f.p, d.label, max(f.v) AS mx, count(*) AS n FROM fact f JOIN dim d ON f.k = d.k "
    "GROUP BY CUBE (f.p, d.label) HAVING count(*) > 1"
)
# Derived tables over a stage and a base table, unqualified stage columns among them, read
# twice and joined (TPC-DS q2, q59): qualified with the stage's columns, then merged.
_W = "(SELECT f.k AS k, f.p AS p, sum(f.v) AS sv FROM fact f GROUP BY f.k, f.p)"
_OVER_STAGE = (
    f"WITH w AS {_W}, y AS (SELECT w.k, w.p, sv AS sv1 FROM w, dim WHERE dim.k = w.k AND dim.label = 'x'), "
    "z AS (SELECT w.k, w.p, sv AS sv2 FROM w, dim WHERE dim.k = w.k AND label IS NULL) "
    "SELECT y.k, y.p, y.sv1, z.sv2 FROM y JOIN z ON y.k = z.k AND y.p = z.p"
)
_OVER_STAGE_DUCK = (
    f"SELECT y.k, y.p, y.sv1, z.sv2 FROM (SELECT w.k, w.p, sv AS sv1 FROM {_W} AS w, dim "
    f"WHERE dim.k = w.k AND dim.label = 'x') AS y JOIN (SELECT w.k, w.p, sv AS sv2 FROM {_W} AS w, dim "
    "WHERE dim.k = w.k AND label IS NULL) AS z ON y.k = z.k AND y.p = z.p"
)
# A window over the sets' rows (TPC-DS q36, q70, q86): recomputed over the union of the
# sets' stages, by the partitions of its output column lh.
_ROLLUP_RANKED = (
    "SELECT f.p, f.k, sum(f.v) AS sv, grouping(f.p) + grouping(f.k) AS lh, rank() OVER (PARTITION BY "
    "grouping(f.p) + grouping(f.k), CASE WHEN grouping(f.k) = 0 THEN f.p END ORDER BY sum(f.v) DESC NULLS LAST) AS r "
    "FROM fact f GROUP BY ROLLUP (f.p, f.k)"
)
# A UNION ALL of aggregates tagged by a literal, read twice, each reading filtered to one tag
# (TPC-DS q4, q11, q74): the other branches pruned, each reading a stage.
_YT = (
    "(SELECT f.k AS k, sum(f.v) AS total, 'f' AS src FROM fact f GROUP BY f.k UNION ALL "
    "SELECT m.k AS k, sum(m.v) AS total, 'm' AS src FROM more m GROUP BY m.k)"
)
_TAGGED = (
    f"WITH yt AS {_YT} SELECT a.k, a.total AS ft, b.total AS mt FROM yt a, yt b "
    "WHERE a.k = b.k AND a.src = 'f' AND b.src = 'm'"
)
_TAGGED_DUCK = (
    f"SELECT a.k, a.total AS ft, b.total AS mt FROM {_YT} a, {_YT} b WHERE a.k = b.k AND a.src = 'f' AND b.src = 'm'"
)
# Rankings over a whole grouped result, each an inner stage recomputed whole under a
# constant key, under a UNION (TPC-DS q44, q49).
_RANKED = (
    "SELECT 'f' AS src, r.k, r.n, r.rk FROM (SELECT g.k, g.n, rank() OVER (ORDER BY g.n DESC, g.k NULLS FIRST) AS rk "
    "FROM (SELECT f.k AS k, count(*) AS n FROM fact f GROUP BY f.k) AS g) AS r WHERE r.rk <= 3 "
    "UNION SELECT 'd' AS src, q.k, q.n, q.rk FROM (SELECT h.k, h.n, dense_rank() OVER (ORDER BY h.n) AS rk "
    "FROM (SELECT d.k AS k, count(DISTINCT d.label) AS n FROM dim d GROUP BY d.k) AS h) AS q WHERE q.rk <= 2"
)
# Uncorrelated scalar subqueries in the select list (a share of a total; TPC-DS q9): each a
# one-row stage cross joined.
_SHARE = (
    "SELECT f.id, f.k, f.v, f.v / (SELECT sum(g.v) FROM fact g WHERE g.v > 0) AS share, "
    "(SELECT count(*) FROM dim) AS dims FROM fact f WHERE f.v IS NOT NULL"
)
MVS = [
    (IvmMv("mv_stage_share", None, _SHARE, _SHARE), ["fact", "dim"]),
    (IvmMv("mv_stage_ranked_union", None, _RANKED, _RANKED), ["fact", "dim"]),
    (IvmMv("mv_stage_tagged_union", None, _TAGGED, _TAGGED_DUCK), ["fact", "more"]),
    (IvmMv("mv_stage_rollup_ranked", None, _ROLLUP_RANKED, _ROLLUP_RANKED), ["fact"]),
    (IvmMv("mv_stage_over_stage_joined", None, _OVER_STAGE, _OVER_STAGE_DUCK), ["fact", "dim"]),
    (IvmMv("mv_stage_rollup", None, _ROLLUP, _ROLLUP), ["fact"]),
    (IvmMv("mv_stage_cube", None, _CUBE, _CUBE), ["fact", "dim"]),
    (IvmMv("mv_stage_union_of_aggregates", None, _UNION_OF_AGGREGATES, _UNION_OF_AGGREGATES), ["fact", "dim"]),
    (IvmMv("mv_stage_cte_twice", None, _CTE_TWICE, _CTE_TWICE_DUCK), ["fact"]),
    (IvmMv("mv_stage_semijoins", None, _SEMIJOINS, _SEMIJOINS), ["fact", "dim", "more"]),
    (IvmMv("mv_stage_agg_of_agg", None, _AGG_OF_AGG, _AGG_OF_AGG), ["fact", "dim"]),
    (IvmMv("mv_stage_decorrelated", None, _DECORRELATED, _DECORRELATED), ["fact", "dim"]),
    (IvmMv("mv_stage_nested_in", None, _NESTED_IN, _NESTED_IN), ["fact", "dim", "more"]),
    (IvmMv("mv_stage_max_of_cte", None, _MAX_OF_CTE, _MAX_OF_CTE_DUCK), ["fact", "dim"]),
    (IvmMv("mv_stage_two_deep", None, _TWO_DEEP, _TWO_DEEP), ["fact"]),
]


def test_staged_mvs_follow_appends_deletes_and_updates(make_client: Any, tmp_path: Path) -> None:
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim", "more"):
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED + 240), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 16), ("fact", 12), ("dim", 6), ("more", 8)):
        world.append(table, n)
    for mv, tables in MVS:
        client.sql(mv.ddl("INCREMENTAL"))
        check(client, world, mv, tables, "FULL", "the first build")

    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_stage_decorrelated").message or ""
    assert "maintenance plan: delta rules" in text, text
    assert (
        "    SELECT g.k AS __smv_k0, AVG(g.v) AS __smv_v0 FROM fact AS g WHERE NOT g.x IS NULL GROUP BY g.k"
    ) in text.splitlines(), text

    # EXISTS and IN (grouped by the compared column) as joins with stages of distinct keys:
    # the delta rules count per label, not a recomputation of every touched label.
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_stage_semijoins").message or ""
    assert "maintenance plan: delta rules" in text, text
    lines = text.splitlines()
    assert "    SELECT DISTINCT m.k AS __smv_k0 FROM more AS m WHERE m.v > 0" in lines, text
    assert "    SELECT g.k AS __smv_k0 FROM fact AS g GROUP BY g.k HAVING COUNT(*) > 1" in lines, text

    steps = dict(_steps(world))
    first, second, third = steps.values()

    def changed() -> None:  # appends, deletes of both join sides and an update in one run
        world.append("fact", 6)
        world.append("dim", 2)
        world.append("more", 3)
        first()

    for step, change in [
        ("appends, deletes and an update", changed),
        ("groups emptied, MAX rows deleted, an append", second),
        ("fact emptied", third),
    ]:
        change()
        for mv, tables in MVS:
            check(client, world, mv, tables, "INCREMENTAL", step)
