"""Differential tests of affected-key recomputation: GROUP BY queries with HAVING,
DISTINCT aggregates and expressions over aggregates, a SELECT DISTINCT, and a query over a
CTE and a subquery in FROM joining three table references (``dim`` twice, as TPC-H Q7 reads
``nation``), kept by strict INCREMENTAL refreshes through
appends, copy-on-write deletes and updates (a row moving to another group and MV partition,
groups emptied, a table emptied) of Iceberg base tables written by an outside writer; after
every refresh each MV equals DuckDB's result of its query over what pyiceberg reads now.
Subquery predicates (EXISTS, NOT IN with NULLs, a correlated scalar subquery, IN over a
grouped subquery) are among them; so are a derived table merged for the delta rules (TPC-H
Q7's shape), a self-join kept by the delta rules, and a ``UNION`` (the DISTINCT of its
``UNION ALL``).

The writes are the seeded steps of :mod:`tests.differential.test_signed` (seed
``SPARKMV_SIGNED_SEED``) after an append step (``SPARKMV_DIFF_PROFILE=slow``; by default the
append is made in the same run as the first step, as :mod:`tests.differential.test_stages` does).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from tests.differential.harness import profile_name
from tests.differential.ivm_harness import IvmMv, arrow_schema
from tests.differential.test_signed import SEED, World, _steps, check

pytestmark = [pytest.mark.spark, pytest.mark.differential]

_HAVING = (
    "SELECT f.p, f.k, count(DISTINCT f.s) AS n_s, sum(f.amt) * 2 AS s2, max(f.v) - min(f.v) AS spread, "
    "count(*) AS n FROM fact f WHERE f.v IS NULL OR f.v > -1 GROUP BY f.p, f.k HAVING count(*) > 1"
)
_NESTED_FROM = (
    "WITH j AS (SELECT f.k, d.label, f.v, f.amt FROM fact f JOIN dim d ON f.k = d.k JOIN dim d2 ON d2.k = d.k "
    "WHERE f.v IS NOT NULL AND d2.r IS NOT NULL) "
    "SELECT s.label, count(DISTINCT s.k) AS nk, sum(s.v) AS sv, max(s.amt) AS mx "
    "FROM (SELECT j.label, j.k, j.v, j.amt FROM j WHERE j.amt IS NOT NULL) s GROUP BY s.label HAVING sum(s.v) > 0"
)
# DuckDB's oracle wraps the query in its own WITH: the same query with the CTE as a subquery.
_NESTED_DUCK = (
    "SELECT s.label, count(DISTINCT s.k) AS nk, sum(s.v) AS sv, max(s.amt) AS mx FROM (SELECT j.label, j.k, j.v, "
    "j.amt FROM (SELECT f.k, d.label, f.v, f.amt FROM fact f JOIN dim d ON f.k = d.k JOIN dim d2 ON d2.k = d.k "
    "WHERE f.v IS NOT NULL AND d2.r IS NOT NULL) j "
    "WHERE j.amt IS NOT NULL) s GROUP BY s.label HAVING sum(s.v) > 0"
)
_DISTINCT = "SELECT DISTINCT f.p, f.k, f.v > 0 AS positive FROM fact f"
# Subquery predicates (TPC-H Q21, Q16, Q17/Q2, Q18 shapes): EXISTS with a correlation other
# than an equality (not split into a stage of keys; with a MAX, so not maintained through its
# correlation key either: tests/differential/test_correlated.py), NOT IN with NULL keys on both sides (SQL's
# NULL semantics), a correlated scalar subquery over the same table, and IN over a subquery
# grouped by its column with HAVING (split into a stage of keys: the delta rules above it).
_EXISTS = (
    "SELECT f.p, f.k, count(*) AS n, max(f.v) AS mx FROM fact f WHERE f.x IS NOT NULL AND "
    "EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k AND d.r IS NOT NULL AND d.label <> f.s) GROUP BY f.p, f.k"
)
_NOT_IN = "SELECT f.id, f.k, f.v FROM fact f WHERE f.k NOT IN (SELECT d.k FROM dim d WHERE d.label <> 'x')"
_SCALAR = (
    "SELECT f.k, count(*) AS n, max(f.amt) AS mx FROM fact f "
    "WHERE f.v >= (SELECT avg(g.v) FROM fact g WHERE g.k = f.k) GROUP BY f.k"
)
_IN_GROUPED = (
    "SELECT d.label, count(*) AS n FROM dim d "
    "WHERE d.k IN (SELECT f.k FROM fact f GROUP BY f.k HAVING count(*) > 2) GROUP BY d.label"
)
# Expressions over SUM / COUNT kept by the delta rules (TPC-H Q14's shape), with a MAX beside
# them (its groups recomputed through the full query) and as a global aggregate.
_FORMULA = (
    "SELECT f.p, f.k, sum(f.v) * 2 + count(*) AS w, 100.0 * sum(f.x) / count(*) AS pct, max(f.v) AS mx "
    "FROM fact f GROUP BY f.p, f.k"
)
_FORMULA_GLOBAL = "SELECT 100.0 * sum(f.x) / count(*) AS pct, count(f.v) - 1 AS n1 FROM fact f WHERE f.v <> 3"
FORMULA_MVS = [
    (IvmMv("mv_formula", "p", _FORMULA, _FORMULA), ["fact"]),
    (IvmMv("mv_formula_global", None, _FORMULA_GLOBAL, _FORMULA_GLOBAL), ["fact"]),
]
# A select-project-join derived table grouped by its aliased expressions (TPC-H Q7's shape,
# ``dim`` read twice): merged into the outer query, the delta rules maintain it.
_MERGED = (
    "SELECT label, bucket, sum(w) AS sw, count(*) AS n FROM (SELECT d.label, f.v % 3 AS bucket, f.amt * 2 AS w "
    "FROM fact f JOIN dim d ON f.k = d.k JOIN dim d2 ON d2.k = d.k WHERE d2.r IS NOT NULL) AS b "
    "GROUP BY label, bucket"
)
# A projection reading ``dim`` twice: one delta term per reference (signed rows included).
_SELF_JOIN = (
    "SELECT f.id, d.label, d2.r FROM fact f JOIN dim d ON f.k = d.k JOIN dim d2 ON d2.k = d.k "
    "WHERE d2.label IS NOT NULL"
)
FORMULA_MVS.append((IvmMv("mv_merged", None, _MERGED, _MERGED), ["fact", "dim"]))
FORMULA_MVS.append((IvmMv("mv_self_join", None, _SELF_JOIN, _SELF_JOIN), ["fact", "dim"]))
# Split into stages of keys (with the base tables' columns) and kept by the delta rules above
# them: the IN of a grouped subquery, and the correlated scalar subquery decorrelated.
FORMULA_MVS.append((IvmMv("mv_keyed_in_grouped", None, _IN_GROUPED, _IN_GROUPED), ["fact", "dim"]))
FORMULA_MVS.append((IvmMv("mv_keyed_scalar", None, _SCALAR, _SCALAR), ["fact"]))
# GROUP BY keys outside the select list (hidden key columns; TPC-DS q46, q85), and global
# aggregates as inner stages (TPC-DS q61, q88: one-row stages cross joined).
_HIDDEN_KEYS = (
    "SELECT substring(f.s, 1, 1) AS s1, count(DISTINCT f.v) AS nv, max(f.amt) AS mx FROM fact f GROUP BY f.s, f.k"
)
_GLOBAL_STAGES = (
    "SELECT a.n, b.m, b.c FROM (SELECT count(DISTINCT f.k) AS n FROM fact f WHERE f.v > 0) a "
    "CROSS JOIN (SELECT max(d.label) AS m, count(*) AS c FROM dim d) b"
)
# INTERSECT / EXCEPT keyed by every column: under a global count (TPC-DS q38, q87) and at
# the top (EXCEPT ALL: multiplicities).
_INTERSECT = (
    "SELECT count(*) AS n FROM (SELECT DISTINCT f.k, f.p FROM fact f WHERE f.v > 0 "
    "INTERSECT SELECT DISTINCT d.k, d.label FROM dim d) AS x"
)
_EXCEPT_ALL = "SELECT f.k, f.s FROM fact f WHERE f.v IS NOT NULL EXCEPT ALL SELECT m.k, m.s FROM more m"
# A ranking stage over an unaliased grouped derived table (TPC-DS q49), and a star over a
# one-row stage in a scalar subquery of HAVING (q23b).
_RANK_UNALIASED = (
    "SELECT r.k, r.rk FROM (SELECT k, n, dense_rank() OVER (ORDER BY n) AS rk FROM "
    "(SELECT f.k AS k, count(*) AS n FROM fact f GROUP BY f.k)) AS r WHERE r.rk <= 2"
)
_STAR_SCALAR = (
    "WITH m AS (SELECT max(g.v) AS mx FROM fact g) SELECT f.k, count(*) AS n FROM fact f GROUP BY f.k "
    "HAVING max(f.v) > 0.5 * (SELECT * FROM m)"
)
_STAR_SCALAR_DUCK = (
    "SELECT f.k, count(*) AS n FROM fact f GROUP BY f.k "
    "HAVING max(f.v) > 0.5 * (SELECT * FROM (SELECT max(g.v) AS mx FROM fact g) AS m)"
)
# The delta rules above its stages (their reason names the stages, not the technique).
FORMULA_MVS.append((IvmMv("mv_keyed_rank_unaliased", None, _RANK_UNALIASED, _RANK_UNALIASED), ["fact"]))
FORMULA_MVS.append((IvmMv("mv_keyed_global_stages", None, _GLOBAL_STAGES, _GLOBAL_STAGES), ["fact", "dim"]))
FORMULA_MVS.append((IvmMv("mv_keyed_intersect", None, _INTERSECT, _INTERSECT), ["fact", "dim"]))
MVS = [
    (IvmMv("mv_keyed_having", "p", _HAVING, _HAVING), ["fact"]),
    (IvmMv("mv_keyed_nested", None, _NESTED_FROM, _NESTED_DUCK), ["fact", "dim"]),
    (IvmMv("mv_keyed_distinct", "p", _DISTINCT, _DISTINCT), ["fact"]),
    (IvmMv("mv_keyed_exists", "p", _EXISTS, _EXISTS), ["fact", "dim"]),
    (IvmMv("mv_keyed_not_in", None, _NOT_IN, _NOT_IN), ["fact", "dim"]),
    (IvmMv("mv_keyed_hidden", None, _HIDDEN_KEYS, _HIDDEN_KEYS), ["fact"]),
    (IvmMv("mv_keyed_except_all", None, _EXCEPT_ALL, _EXCEPT_ALL), ["fact", "more"]),
    (IvmMv("mv_keyed_star_scalar", None, _STAR_SCALAR, _STAR_SCALAR_DUCK), ["fact"]),
]


def test_keyed_mvs_follow_appends_deletes_and_updates(make_client: Any, tmp_path: Path) -> None:
    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim", "more"):  # the seeded steps also delete from "more"
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED + 24), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 14), ("fact", 12), ("dim", 6), ("more", 3)):
        world.append(table, n)
    for mv, _ in MVS + FORMULA_MVS:
        client.sql(mv.ddl("INCREMENTAL"))
        check(client, world, mv, _, "FULL", "the first build")

    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_keyed_exists").message or ""
    plan = text.splitlines()[text.splitlines().index("maintenance plan: affected-key recomputation") :]
    assert plan[1:4] == [
        "  columns: p (group key), k (group key), n (recomputed), mx (recomputed)",
        "  recomputes the groups of keys (p, k) touched by the change, read from:",
        "    the grouped relation: SELECT f.p AS p, f.k AS k FROM fact AS f WHERE NOT f.x IS NULL AND TRUE",
    ], text
    assert plan[4].startswith(
        "    subquery 1: SELECT f.p AS p, f.k AS k FROM fact AS f WHERE NOT f.x IS NULL AND EXISTS("
    ), text

    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_merged").message or ""
    assert "maintenance plan: delta rules" in text.splitlines(), text
    assert "  derived tables merged into the query maintained: SELECT d.label AS label, f.v % 3 AS bucket" in text

    def appended() -> None:
        world.append("fact", 6)
        world.append("dim", 2)

    steps = _steps(world)
    if profile_name() == "slow":
        steps = [("an append", appended), *steps]
    else:  # `make test`: the append in the same run as step 1's deletes and update (11 refreshes fewer)
        (first, change_1), *rest = steps
        steps = [(f"an append and {first}", lambda: (appended(), change_1())), *rest]
    for step, change in steps:
        change()
        for mv, tables in MVS + FORMULA_MVS:
            run = check(client, world, mv, tables, "INCREMENTAL", step)
            incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
            keyed = "affected-key recomputation" in incremental["reason"]
            assert keyed == ((mv, tables) in MVS), incremental


def test_untouched_keys_keep_their_files(make_client: Any, tmp_path: Path) -> None:
    """A change that reaches one MV partition rewrites that partition only; a change no
    group sees (filtered out) publishes nothing."""
    from pyiceberg.expressions import EqualTo, In

    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    store.create_table(ObjectName("default", "fact"), arrow_schema("fact"), "p")
    world = World(client, random.Random(SEED), lambda t: store.load(ObjectName("default", t)))
    world.append("fact", 20)
    mv, tables = MVS[0]
    client.sql(mv.ddl("INCREMENTAL"))
    check(client, world, mv, tables, "FULL", "the first build")
    table = store.load(ObjectName.parse(mv.name))
    before = {f.file.file_path: f.file.partition for f in table.scan().plan_files()}
    victim = next(r for r in world.now("fact").to_pylist() if r["p"] == "p1" and r["v"] is not None)
    world.delete("fact", EqualTo("id", victim["id"]))
    run = check(client, world, mv, tables, "INCREMENTAL", "a delete in p1")
    after = {f.file.file_path: f.file.partition for f in store.load(ObjectName.parse(mv.name)).scan().plan_files()}
    kept = {path for path, part in before.items() if part[0] != "p1"}
    assert kept <= set(after), "files of partitions without a touched key were rewritten"
    assert run.mode == "INCREMENTAL"
    unseen = [r["id"] for r in world.now("fact").to_pylist() if r["v"] == -2]  # filtered out by the MV
    assert unseen, world.log
    world.delete("fact", In("id", unseen))
    run = check(client, world, mv, tables, "INCREMENTAL", "a delete of rows the MV never saw")
    files = {f.file.file_path for f in store.load(ObjectName.parse(mv.name)).scan().plan_files()}
    assert files == set(after), "a change that touches no group rewrote MV files"


_UNION = "SELECT f.k, f.s AS label FROM fact f WHERE f.v IS NOT NULL UNION SELECT d.k, d.label FROM dim d"


def test_union_follows_deletes_in_one_branch_or_both(make_client: Any, tmp_path: Path) -> None:
    """A ``UNION`` keeps a row while a branch (or a duplicate in the same branch) still
    has it, and drops it when its last copy goes, NULLs equal to NULLs."""
    import pyarrow as pa
    from pyiceberg.expressions import EqualTo, IsNull

    from sparkmv.names import ObjectName

    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim"):
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED), lambda t: store.load(ObjectName("default", t)))

    def fact(*rows: tuple[int, str | None, str | None, int | None]) -> None:
        full = [{"id": i, "k": k, "v": v, "amt": None, "x": None, "s": s, "d": None, "p": "p0"} for i, k, s, v in rows]
        world.load("fact").append(pa.Table.from_pylist(full, schema=arrow_schema("fact")))

    def dim(*rows: tuple[str | None, str | None]) -> None:
        full = [{"k": k, "label": label, "r": None} for k, label in rows]
        world.load("dim").append(pa.Table.from_pylist(full, schema=arrow_schema("dim")))

    # ('a', 'x') twice in fact and in dim; ('b', 'y') in fact only; ('c', 'z') and the NULL
    # row in both; ('d', 'w') in dim only; ('e', 'v') filtered out of fact.
    fact(
        (1, "a", "x", 1), (2, "a", "x", 2), (3, "b", "y", 1), (4, "c", "z", 1), (5, None, None, 1), (6, "e", "v", None)
    )
    dim(("a", "x"), ("c", "z"), ("d", "w"), (None, None))
    mv = IvmMv("mv_union", None, _UNION, _UNION)
    client.sql(mv.ddl("INCREMENTAL"))
    check(client, world, mv, ["fact", "dim"], "FULL", "the first build")
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv_union").message or ""
    branch = "    union branch 2: SELECT k AS k, label AS label FROM (SELECT d.k, d.label FROM dim AS d) AS __smv_union"
    assert branch in text.splitlines(), text
    steps = [
        ("a duplicate within a branch deleted", lambda: world.delete("fact", EqualTo("id", 1))),
        ("a row of one branch only deleted", lambda: world.delete("fact", EqualTo("id", 3))),
        ("rows of both branches deleted from one", lambda: world.delete("dim", EqualTo("k", "c"))),
        ("a row of dim only deleted", lambda: world.delete("dim", EqualTo("k", "d"))),
        ("the NULL row deleted from one branch", lambda: world.delete("fact", IsNull("k"))),
        ("an update and re-inserts", lambda: (world.update("fact", 4, s="q"), dim(("b", "y"), ("a", "x")))),
        (
            "one branch's copies and the NULL row's last deleted",
            lambda: (world.delete("fact", EqualTo("k", "a")), world.delete("dim", IsNull("k"))),
        ),
    ]
    expected = [
        {("a", "x"), ("b", "y"), ("c", "z"), (None, None), ("d", "w")},
        {("a", "x"), ("c", "z"), (None, None), ("d", "w")},
        {("a", "x"), ("c", "z"), (None, None), ("d", "w")},
        {("a", "x"), ("c", "z"), (None, None)},
        {("a", "x"), ("c", "z"), (None, None)},
        {("a", "x"), ("c", "q"), (None, None), ("b", "y")},
        {("a", "x"), ("c", "q"), ("b", "y")},
    ]
    for (step, change), rows in zip(steps, expected, strict=True):
        change()
        check(client, world, mv, ["fact", "dim"], "INCREMENTAL", step)
        assert {tuple(r) for r in client.table(mv.name).collect()} == rows, step
