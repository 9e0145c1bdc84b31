"""Affected-key recomputation: which keyed queries it maintains, their key queries, and the
exact reasons of those it refuses."""

from __future__ import annotations

import pytest

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.keyed import KeyedPlan, inline_ctes, keyed_plan
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.query import parse_query

# TPC-H Q7's shape: an aggregate over a subquery in FROM joining six tables.
Q7 = (
    "SELECT supp_nation, cust_nation, l_year, sum(volume) AS revenue FROM (SELECT n1.n_name AS supp_nation, "
    "n2.n_name AS cust_nation, year(l_shipdate) AS l_year, l_extendedprice * (1 - l_discount) AS volume "
    "FROM supplier, lineitem, orders, customer, nation n1, nation n2 WHERE s_suppkey = l_suppkey) AS shipping "
    "GROUP BY supp_nation, cust_nation, l_year"
)


@pytest.mark.parametrize(
    ("sql", "keys", "key_sql", "augmented"),
    [
        (  # a GROUP BY key not in the select list is kept as a hidden key column
            "SELECT k, count(DISTINCT x) AS n FROM t GROUP BY k, y",
            ("k", "__smv_key_0"),
            "SELECT k AS k, y AS __smv_key_0 FROM t",
            "SELECT k, COUNT(DISTINCT x) AS n, y AS __smv_key_0 FROM t GROUP BY k, y",
        ),
        (  # TPC-DS q85: an expression of a key shown, the key itself hidden
            "SELECT substring(r, 1, 2) AS r2, max(x) AS m FROM t GROUP BY r",
            ("__smv_key_0",),
            "SELECT r AS __smv_key_0 FROM t",
            "SELECT SUBSTRING(r, 1, 2) AS r2, MAX(x) AS m, r AS __smv_key_0 FROM t GROUP BY r",
        ),
    ],
)
def test_hidden_keys(sql: str, keys: tuple[str, ...], key_sql: str, augmented: str) -> None:
    plan = keyed_plan(parse_query(sql))
    assert isinstance(plan, KeyedPlan), plan
    assert (plan.keys, plan.key_sql, plan.augmented_sql) == (keys, key_sql, augmented)
    analysis = analyze_incremental(parse_query(sql))
    assert (analysis.state_columns, analysis.augmented_sql) == (tuple(k for k in keys if k.startswith("__")), augmented)


def test_a_global_aggregate_is_keyed_only_as_an_inner_stage() -> None:
    query = parse_query("SELECT count(DISTINCT x) AS n FROM t WHERE y > 0")
    assert keyed_plan(query) == (
        f"SELECT count(DISTINCT x) AS n FROM t WHERE y > 0 {WHY}: affected-key recomputation needs GROUP BY or DISTINCT"
    )
    plan = keyed_plan(query, inner=True)
    assert isinstance(plan, KeyedPlan), plan
    assert (plan.keys, plan.key_sql) == (("__smv_key_0",), "SELECT 0 AS __smv_key_0 FROM t WHERE y > 0")


@pytest.mark.parametrize(
    ("sql", "keys", "key_sql"),
    [
        (
            "SELECT k, sum(x) / count(*) AS r FROM t WHERE y > 1 GROUP BY k HAVING count(*) > 2",
            ("k",),
            "SELECT k AS k FROM t WHERE y > 1",
        ),
        (
            "SELECT t.a, u.b AS bb, count(DISTINCT t.c) AS n FROM t JOIN u ON t.id = u.id GROUP BY t.a, u.b",
            ("a", "bb"),
            "SELECT t.a AS a, u.b AS bb FROM t JOIN u ON t.id = u.id",
        ),
        ("SELECT DISTINCT a, b + 1 AS c FROM t", ("a", "c"), "SELECT a AS a, b + 1 AS c FROM t"),
        (
            "SELECT year(d) AS y, stddev(x) AS sd FROM t GROUP BY year(d)",
            ("y",),
            "SELECT YEAR(d) AS y FROM t",
        ),
        (
            "WITH s AS (SELECT a, x FROM t WHERE x > 0) SELECT a, max(x) - min(x) AS spread FROM s GROUP BY 1",
            ("a",),
            "SELECT a AS a FROM (SELECT a, x FROM t WHERE x > 0) AS s",
        ),
    ],
)
def test_keyed_plan(sql: str, keys: tuple[str, ...], key_sql: str) -> None:
    plan = keyed_plan(parse_query(sql))
    assert isinstance(plan, KeyedPlan), plan
    assert (plan.keys, plan.key_sql) == (keys, key_sql)


def test_tpch_q7_shape_has_a_keyed_plan_but_is_maintained_by_delta_rules_merged() -> None:
    plan = keyed_plan(parse_query(Q7))
    assert isinstance(plan, KeyedPlan) and plan.key_sql.startswith(
        "SELECT supp_nation AS supp_nation, cust_nation AS cust_nation, l_year AS l_year FROM (SELECT n1.n_name"
    )
    a = analyze_incremental(parse_query(Q7))  # its derived table merged (tests/analysis/test_merge.py)
    assert (a.technique, a.keyed, a.state_columns) == ("delta rules", None, ("__smv_count", "__smv_nn_3"))


def test_linear_aggregates_keep_the_delta_rules() -> None:
    a = analyze_incremental(parse_query("SELECT k, sum(x) AS s FROM t GROUP BY k"))
    assert (a.technique, a.keyed) == ("delta rules", None)


WHY = "is not incrementally maintainable"
IN_FROM_ONLY = "an outer join is maintained in the query's own FROM only, not inside a derived table or subquery"


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "SELECT k, count(*) AS n FROM t LEFT JOIN u ON t.a = u.a GROUP BY k",
            f"k {WHY}: a column beside an outer join must be qualified by its table",
        ),
        (
            "SELECT k, count(*) AS n FROM (SELECT k, sum(x) AS s FROM t GROUP BY k LIMIT 3) g GROUP BY k",
            f"inner stage __smv_stage_1: LIMIT 3 {WHY}: the rows kept depend on the whole result",
        ),
        (
            "SELECT k, count(*) AS n FROM t WHERE EXISTS (SELECT b FROM u WHERE EXISTS (SELECT 1 FROM v)) GROUP BY k",
            f"EXISTS(SELECT 1 FROM v) {WHY}: a subquery inside a subquery is not maintained",
        ),
        (
            "SELECT k, count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u LEFT JOIN v ON u.a = v.a) GROUP BY k",
            f"LEFT JOIN v {WHY}: " + IN_FROM_ONLY,
        ),
        (
            "SELECT k, count(*) AS n FROM t WHERE t.a = 1 OR t.b IN (SELECT b FROM u LIMIT 1) GROUP BY k",
            f"LIMIT 1 {WHY}: the rows kept depend on the whole result",
        ),
        (
            "SELECT k, rank() OVER (ORDER BY k) AS r FROM t GROUP BY k",
            f"rank() OVER (ORDER BY k) {WHY}: a window function without PARTITION BY reads every row",
        ),
        ("SELECT DISTINCT k, rand() AS r FROM t", f"rand() {WHY}: non-deterministic function"),
        (
            "SELECT k, sum(x) AS s FROM t GROUP BY k ORDER BY s LIMIT 3",
            f"LIMIT 3 {WHY}: the rows kept depend on the whole result",
        ),
        (
            "WITH RECURSIVE r AS (SELECT 1 AS n) SELECT DISTINCT n FROM r",
            f"WITH RECURSIVE r AS (SELECT 1 AS n) {WHY}: recursive CTEs are not maintained",
        ),
    ],
)
def test_refused_with_the_exact_reason(sql: str, reason: str) -> None:
    assert analyze_incremental(parse_query(sql)).reason == reason


def test_a_cte_read_twice_is_inlined_at_both_places() -> None:
    q = inline_ctes(parse_query("WITH s AS (SELECT a FROM t) SELECT x.a FROM s x JOIN s y ON x.a = y.a"))
    assert not isinstance(q, str)
    assert q.sql() == "SELECT x.a FROM (SELECT a FROM t) AS x JOIN (SELECT a FROM t) AS y ON x.a = y.a"


@pytest.mark.parametrize(
    ("sql", "key_sql", "terms"),
    [
        (  # TPC-H Q4's shape: EXISTS, correlated
            "SELECT o_orderpriority, count(*) AS n FROM orders WHERE o_orderdate >= '1993-07-01' AND EXISTS "
            "(SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate) "
            "GROUP BY o_orderpriority",
            "SELECT o_orderpriority AS o_orderpriority FROM orders WHERE o_orderdate >= '1993-07-01' AND TRUE",
            [
                (
                    "SELECT o_orderpriority AS o_orderpriority FROM orders WHERE o_orderdate >= '1993-07-01' AND "
                    "EXISTS(SELECT 1 FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)",
                    (False, True),
                )
            ],
        ),
        (  # NOT IN with SQL's NULLs: a match, a NULL x, or a NULL in the delta touch a row
            "SELECT a, b FROM t WHERE t.a NOT IN (SELECT u.a FROM u WHERE u.c > 0)",
            "SELECT a AS a, b AS b FROM t WHERE TRUE",
            [
                (
                    "SELECT a AS a, b AS b FROM t WHERE COALESCE(t.a IN (SELECT u.a FROM u WHERE u.c > 0), TRUE)",
                    (False, True),
                )
            ],
        ),
        (  # TPC-H Q18's shape: IN over a subquery grouped by the selected column
            "SELECT o.k, sum(o.x) AS s FROM o WHERE o.k IN (SELECT l.k FROM l GROUP BY l.k HAVING sum(l.q) > 3) "
            "GROUP BY o.k",
            "SELECT o.k AS k FROM o WHERE TRUE",
            [("SELECT o.k AS k FROM o WHERE COALESCE(o.k IN (SELECT l.k FROM l), TRUE)", (False, True))],
        ),
        (  # TPC-H Q11's shape: an uncorrelated scalar subquery in HAVING touches every group
            "SELECT k, sum(x) AS s FROM t GROUP BY k HAVING sum(x) > (SELECT sum(x) * 0.1 FROM t)",
            "SELECT k AS k FROM t WHERE TRUE",
            [("SELECT k AS k FROM t WHERE EXISTS(SELECT 1 FROM t)", (False, True))],
        ),
    ],
)
def test_subquery_predicates(sql: str, key_sql: str, terms: list[tuple[str, tuple[bool, ...]]]) -> None:
    a = analyze_incremental(parse_query(sql))
    assert a.keyed is not None, a.reason
    assert (a.keyed.key_sql, list(a.keyed.subquery_terms)) == (key_sql, terms)


# Outer joins (analysis/outer.py): per table reference, the delta side's join made one-sided
# and the other side's NULL-padded rows.
# The masks: which table reference of the key query each term reads as its delta.
L1, L2 = (True, False), (False, True)
C1, C2, C3 = (True, False, False), (False, True, False), (False, False, True)
Q13_INNER = "SELECT c.k, count(o.id) AS n FROM c LEFT JOIN o ON c.k = o.k AND o.x > 0 GROUP BY c.k"


@pytest.mark.parametrize(
    ("sql", "terms"),
    [
        (  # TPC-H Q13's inner query: the padded row of a c row has the same key as its matches
            Q13_INNER,
            [
                (L1, "SELECT c.k AS k FROM c LEFT JOIN o ON c.k = o.k AND o.x > 0"),
                (L2, "SELECT c.k AS k FROM c JOIN o ON c.k = o.k AND o.x > 0"),
            ],
        ),
        (  # a key from the null-supplying side: its padded row's key is coalesce(NULL, 0)
            "SELECT coalesce(o.x, 0) AS x, count(*) AS n FROM c LEFT JOIN o ON c.k = o.k GROUP BY coalesce(o.x, 0)",
            [
                (L1, "SELECT COALESCE(o.x, 0) AS x FROM c LEFT JOIN o ON c.k = o.k"),
                (L2, "SELECT COALESCE(o.x, 0) AS x FROM c JOIN o ON c.k = o.k"),
                (L2, "SELECT COALESCE(NULL, 0) AS x FROM c JOIN o ON c.k = o.k"),
            ],
        ),
        (  # RIGHT: the mirror image
            "SELECT DISTINCT c.k, o.x FROM c RIGHT JOIN o ON c.k = o.k",
            [
                (L1, "SELECT c.k AS k, o.x AS x FROM c JOIN o ON c.k = o.k"),
                (L1, "SELECT NULL AS k, o.x AS x FROM c JOIN o ON c.k = o.k"),
                (L2, "SELECT c.k AS k, o.x AS x FROM c RIGHT JOIN o ON c.k = o.k"),
            ],
        ),
        (  # FULL: both sides are both; the padding reaches the WHERE but not the ON
            "SELECT c.k, o.x FROM c FULL JOIN o ON c.k = o.k AND c.y > 0 WHERE o.z IS NULL",
            [
                (L1, "SELECT c.k AS k, o.x AS x FROM c LEFT JOIN o ON c.k = o.k AND c.y > 0 WHERE o.z IS NULL"),
                (L1, "SELECT NULL AS k, o.x AS x FROM c JOIN o ON c.k = o.k AND c.y > 0 WHERE o.z IS NULL"),
                (L2, "SELECT c.k AS k, o.x AS x FROM c RIGHT JOIN o ON c.k = o.k AND c.y > 0 WHERE o.z IS NULL"),
                (L2, "SELECT c.k AS k, NULL AS x FROM c JOIN o ON c.k = o.k AND c.y > 0 WHERE NULL IS NULL"),
            ],
        ),
        (  # a chain: a padded o row reaches the next join's ON; d's delta leaves the first join as is
            "SELECT DISTINCT c.k, d.y FROM c LEFT JOIN o ON c.k = o.k LEFT JOIN d ON d.z = o.x",
            [
                (C1, "SELECT c.k AS k, d.y AS y FROM c LEFT JOIN o ON c.k = o.k LEFT JOIN d ON d.z = o.x"),
                (C2, "SELECT c.k AS k, d.y AS y FROM c JOIN o ON c.k = o.k LEFT JOIN d ON d.z = o.x"),
                (C2, "SELECT c.k AS k, d.y AS y FROM c JOIN o ON c.k = o.k LEFT JOIN d ON d.z = NULL"),
                (C3, "SELECT c.k AS k, d.y AS y FROM c LEFT JOIN o ON c.k = o.k JOIN d ON d.z = o.x"),
                (C3, "SELECT c.k AS k, NULL AS y FROM c LEFT JOIN o ON c.k = o.k JOIN d ON d.z = o.x"),
            ],
        ),
    ],
)
def test_outer_join_key_queries(sql: str, terms: list[tuple[tuple[bool, ...], str]]) -> None:
    plan = keyed_plan(parse_query(sql))
    assert isinstance(plan, KeyedPlan), plan
    assert [(mask, term) for term, mask in plan.outer_terms] == terms


def test_outer_join_plan_is_explained() -> None:
    lines = maintenance_plan(analyze_incremental(parse_query(Q13_INNER)))
    assert lines == [
        "maintenance plan: affected-key recomputation",
        "  columns: k (group key), n (recomputed)",
        "  recomputes the groups of keys (k) touched by the change, read from:",
        "    outer join, delta of c: SELECT c.k AS k FROM c LEFT JOIN o ON c.k = o.k AND o.x > 0",
        "    outer join, delta of o: SELECT c.k AS k FROM c JOIN o ON c.k = o.k AND o.x > 0",
    ]


@pytest.mark.parametrize(
    ("sql", "keys", "key_sql"),
    [
        (  # latest row per key
            "SELECT id, k, v FROM (SELECT id, k, v, row_number() OVER (PARTITION BY k ORDER BY ts DESC, id) AS rn "
            "FROM t WHERE v > 0) WHERE rn = 1",
            ("k",),
            "SELECT k AS k FROM t WHERE v > 0",
        ),
        (
            "SELECT t.k, t.j, v, sum(v) OVER (PARTITION BY t.k, j) AS total, rank() OVER (PARTITION BY j, t.k "
            "ORDER BY v) AS r FROM t JOIN u ON t.id = u.id",
            ("k", "j"),
            "SELECT t.k AS k, j AS j FROM t JOIN u ON t.id = u.id",
        ),
        ("SELECT k, v FROM t QUALIFY rank() OVER (PARTITION BY k ORDER BY v) = 1", ("k",), "SELECT k AS k FROM t"),
        (
            "WITH r AS (SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v) AS n FROM t) "
            "SELECT k, v FROM r WHERE n = 1",
            ("k",),
            "SELECT k AS k FROM t",
        ),
        ("SELECT k AS key, sum(v) OVER (PARTITION BY k) AS s FROM t", ("key",), "SELECT k AS key FROM t"),
        (  # b is not an output column: the partitions of a alone, coarser, are recomputed
            "SELECT a, v, rank() OVER (PARTITION BY a, b ORDER BY v) AS r FROM t",
            ("a",),
            "SELECT a AS a FROM t",
        ),
        (  # windows over an aggregate: the partitions are groups of the grouped relation
            "SELECT c, i, sum(v) AS s, sum(v) * 100 / sum(sum(v)) OVER (PARTITION BY c) AS ratio FROM t "
            "WHERE v > 0 GROUP BY c, i",
            ("c",),
            "SELECT c AS c FROM t WHERE v > 0",
        ),
        (  # the partitions common to both windows: a, b
            "SELECT a, b, y, avg(sum(v)) OVER (PARTITION BY a, b, y) AS m, rank() OVER (PARTITION BY a, b "
            "ORDER BY y) AS rn FROM t GROUP BY a, b, y HAVING count(*) > 1",
            ("a", "b"),
            "SELECT a AS a, b AS b FROM t",
        ),
    ],
)
def test_window_plan(sql: str, keys: tuple[str, ...], key_sql: str) -> None:
    assert analyze_incremental(parse_query(sql)).technique == "affected-key recomputation"
    plan = keyed_plan(parse_query(sql))
    assert isinstance(plan, KeyedPlan), plan
    assert (plan.keys, plan.key_sql) == (keys, key_sql)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "SELECT k, sum(v) OVER (ORDER BY ts) AS running FROM t",
            f"sum(v) OVER (ORDER BY ts) {WHY}: a window function without PARTITION BY reads every row",
        ),
        (
            "SELECT k, j, sum(v) OVER (PARTITION BY k) AS a, sum(v) OVER (PARTITION BY j) AS b FROM t",
            f"sum(v) OVER (PARTITION BY j) {WHY}: windows whose PARTITION BY lists share no expression read every row",
        ),
        (
            "SELECT k, v, rank() OVER (PARTITION BY j ORDER BY v) AS r FROM t",
            f"j {WHY}: a PARTITION BY column must be an output column",
        ),
        (
            "SELECT i, sum(sum(v)) OVER (PARTITION BY c) AS s FROM t GROUP BY c, i",
            f"c {WHY}: a PARTITION BY column must be an output column",
        ),
        (
            "SELECT i, sum(sum(v)) OVER (PARTITION BY length(i)) AS s FROM t GROUP BY i",
            f"length(i) {WHY}: a window over an aggregate is maintained when each PARTITION BY expression is a "
            "GROUP BY key",
        ),
        (
            "SELECT k, sum(v) OVER (PARTITION BY k) AS s FROM t WHERE rand() > 0.5",
            f"rand() {WHY}: non-deterministic function",
        ),
        (
            "SELECT c.k, count(*) AS n FROM c LEFT JOIN o ON c.k = o.k WHERE x > 0 GROUP BY c.k",
            f"x {WHY}: a column beside an outer join must be qualified by its table",
        ),
        (
            "SELECT c.k, count(*) AS n FROM c LEFT JOIN o USING (k) GROUP BY c.k",
            f"LEFT JOIN o {WHY}: an outer join is maintained with an ON condition only",
        ),
        (
            "SELECT * FROM c LEFT JOIN o ON c.k = o.k",
            f"* {WHY}: a star select item is not maintained by affected-key recomputation",
        ),
    ],
)
def test_outer_and_window_refusals(sql: str, reason: str) -> None:
    assert analyze_incremental(parse_query(sql)).reason == reason


def test_an_outer_join_inside_a_derived_table_is_a_stage_keyed_by_every_column() -> None:
    analysis = analyze_incremental(
        parse_query("SELECT s.k, count(*) AS n FROM (SELECT t.k FROM t LEFT JOIN u ON t.k = u.k) s GROUP BY s.k")
    )
    assert analysis.reason is None
    assert [(s.name, s.analysis.technique) for s in analysis.stages] == [
        ("__smv_stage_1", "affected-key recomputation")
    ]
    assert analysis.stages[0].analysis.keyed is not None
    assert analysis.stages[0].analysis.keyed.keys == ("k",) and analysis.stages[0].analysis.keyed.outer_terms
