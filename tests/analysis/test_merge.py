"""Merging select-project-join derived tables for the delta rules (no Spark): the merged
query, the technique chosen, the state columns appended to the query as written, and each
shape that is not merged."""

from __future__ import annotations

import pytest

from sparkmv.analysis.incremental import analyze_for_table, analyze_incremental, occurrence_terms
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.merge import merge_derived
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.signed import signed_query
from sparkmv.demo.tpch_queries import TPCH_QUERIES
from sparkmv.names import ObjectName

SHIP = (
    "SELECT supp, l_year, sum(volume) AS revenue FROM (SELECT n1.n_name AS supp, extract(year FROM l_shipdate) "
    "AS l_year, l_price * (1 - l_disc) AS volume FROM lineitem, supplier, nation n1 WHERE l_suppkey = s_suppkey "
    "AND s_nationkey = n1.n_nationkey) AS shipping GROUP BY supp, l_year"
)


def test_aliased_group_key_is_merged_with_its_expression() -> None:
    merged = merge_derived(parse_query(SHIP))
    assert merged is not None
    assert merged.sql("spark") == (
        "SELECT n1.n_name AS supp, EXTRACT(YEAR FROM l_shipdate) AS l_year, SUM(l_price * (1 - l_disc)) AS revenue "
        "FROM lineitem CROSS JOIN supplier CROSS JOIN nation AS n1 WHERE l_suppkey = s_suppkey AND s_nationkey = "
        "n1.n_nationkey GROUP BY n1.n_name, EXTRACT(YEAR FROM l_shipdate)"
    )


def test_merged_query_is_maintained_by_delta_rules_and_the_written_query_keeps_the_state() -> None:
    a = analyze_incremental(parse_query(SHIP))
    assert (a.reason, a.technique, a.keyed) == (None, "delta rules", None)
    assert [(c.name, c.role) for c in a.columns] == [("supp", "group"), ("l_year", "group"), ("revenue", "sum")]
    assert a.state_columns == ("__smv_count", "__smv_nn_2")
    # The MV's full refresh runs the query as written, with the same state columns.
    assert a.augmented_sql == (
        "SELECT supp, l_year, SUM(volume) AS revenue, COUNT(*) AS __smv_count, COUNT(volume) AS __smv_nn_2 FROM "
        "(SELECT n1.n_name AS supp, EXTRACT(YEAR FROM l_shipdate) AS l_year, l_price * (1 - l_disc) AS volume FROM "
        "lineitem CROSS JOIN supplier CROSS JOIN nation AS n1 WHERE l_suppkey = s_suppkey AND s_nationkey = "
        "n1.n_nationkey) AS shipping GROUP BY supp, l_year"
    )
    assert a.merged_sql == (
        "SELECT n1.n_name AS supp, EXTRACT(YEAR FROM l_shipdate) AS l_year, SUM(l_price * (1 - l_disc)) AS revenue, "
        "COUNT(*) AS __smv_count, COUNT(l_price * (1 - l_disc)) AS __smv_nn_2 FROM lineitem CROSS JOIN supplier "
        "CROSS JOIN nation AS n1 WHERE l_suppkey = s_suppkey AND s_nationkey = n1.n_nationkey "
        "GROUP BY n1.n_name, EXTRACT(YEAR FROM l_shipdate)"
    )
    assert maintenance_plan(a)[2] == f"  derived tables merged into the query maintained: {a.merged_sql}"


@pytest.mark.parametrize("name", ["q7", "q8", "q9"])
def test_tpch_derived_table_queries_use_the_delta_rules(name: str) -> None:
    a = analyze_incremental(parse_query(TPCH_QUERIES[name]))
    assert (a.reason, a.technique, a.keyed) == (None, "delta rules", None)
    assert a.merged_sql and "shipping" not in a.merged_sql and " AS all_nations" not in a.merged_sql
    assert a.augmented_sql.startswith(parse_query(TPCH_QUERIES[name]).sql("spark").split(" FROM ")[0])


@pytest.mark.parametrize(
    ("sql", "merged"),
    [
        # Operators around a merged expression keep its precedence.
        ("SELECT v * 2 AS w FROM (SELECT a + b AS v FROM t) AS d", "SELECT (a + b) * 2 AS w FROM t"),
        # An outer WHERE, a CTE, the derived table's WHERE and a qualified reference.
        (
            "WITH d AS (SELECT a AS k, b FROM t WHERE b > 0 OR b IS NULL) SELECT d.k, b FROM d WHERE k < 3",
            "SELECT a AS k, b AS b FROM t WHERE a < 3 AND (b > 0 OR b IS NULL)",
        ),
        # Nested derived tables merge from the outside in.
        ("SELECT y FROM (SELECT x + 1 AS y FROM (SELECT a AS x FROM t) AS i) AS o", "SELECT a + 1 AS y FROM t"),
        # Beside another source, qualified: the ON of its join moves to WHERE.
        (
            "SELECT u.c, d.v FROM u JOIN (SELECT t.k AS k, t.a - 1 AS v FROM t) AS d ON u.k = d.k",
            "SELECT u.c, t.a - 1 AS v FROM u CROSS JOIN t WHERE u.k = t.k",
        ),
        # A select alias shadowing a derived column: the GROUP BY name is the derived column.
        (
            "SELECT b AS a, count(*) AS n FROM (SELECT x AS a, y AS b FROM t) AS d GROUP BY a, b",
            "SELECT y AS a, COUNT(*) AS n FROM t GROUP BY x, y",
        ),
        # Its table alias is the outer query's other source's: renamed.
        (
            "SELECT t.c, d.v FROM t JOIN (SELECT t.k AS k, t.a AS v FROM t) AS d ON t.k = d.k",
            "SELECT t.c, t_2.a AS v FROM t CROSS JOIN t AS t_2 WHERE t.k = t_2.k",
        ),
        # A CTE read twice (TPC-DS q39): one source each, unqualified, the same inner alias.
        (
            "WITH s AS (SELECT k, v FROM g AS foo WHERE v > 1) "
            "SELECT a.k, a.v, b.v AS v2 FROM s AS a JOIN s AS b ON a.k = b.k",
            "SELECT foo.k AS k, foo.v AS v, foo_2.v AS v2 FROM g AS foo CROSS JOIN g AS foo_2 "
            "WHERE (foo.v > 1 AND foo_2.v > 1) AND foo.k = foo_2.k",
        ),
    ],
)
def test_merged_shapes(sql: str, merged: str) -> None:
    out = merge_derived(parse_query(sql))
    assert out is not None and out.sql("spark") == merged


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT k, n FROM (SELECT k, count(*) AS n FROM t GROUP BY k) AS g",
        "SELECT a FROM (SELECT DISTINCT a FROM t) AS d",
        "SELECT a FROM (SELECT a FROM t LIMIT 3) AS d",
        "SELECT a FROM (SELECT a, row_number() OVER (PARTITION BY a ORDER BY b) AS r FROM t) AS d",
        "SELECT a FROM (SELECT a FROM t UNION ALL SELECT a FROM u) AS d",
        "SELECT a FROM (SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k)) AS d",
        "SELECT a FROM (SELECT * FROM t) AS d",
        "SELECT a FROM (SELECT x AS a FROM t) AS d(b)",
        "SELECT a FROM (SELECT a FROM t LEFT JOIN u ON t.k = u.k) AS d",
        # The derived table on the NULL-extended side of an outer join.
        "SELECT u.c, d.v FROM u LEFT JOIN (SELECT t.k AS k, 1 AS v FROM t) AS d ON u.k = d.k",
        # Unqualified columns beside another source.
        "SELECT c, v FROM u JOIN (SELECT k, a AS v FROM t) AS d ON u.k = d.k",
        # An unaliased outer expression of a derived column would change its output name.
        "SELECT v + 1 FROM (SELECT a AS v FROM t) AS d",
        # NATURAL joins match columns by name: moved, they would match others.
        "SELECT u.c, d.v FROM u NATURAL JOIN (SELECT t.k AS k, t.a AS v FROM t) AS d",
        "SELECT v FROM (SELECT t.a AS v FROM t NATURAL JOIN w) AS d",
        # A subquery in the outer query.
        "SELECT v FROM (SELECT a AS v FROM t) AS d WHERE v IN (SELECT b FROM u)",
    ],
)
def test_not_merged(sql: str) -> None:
    assert merge_derived(parse_query(sql)) is None


def test_a_table_read_twice_has_one_delta_term_per_reference() -> None:
    q = parse_query("SELECT a.x, b.x AS y FROM t AS a JOIN t AS b ON a.k = b.p")
    terms = occurrence_terms(q, ObjectName("default", "t"))
    assert [r for _, r in terms] == [0, 1]
    signed = [signed_query(term, ObjectName("default", "t"), False, r).sql() for term, r in terms]
    assert signed == [
        "SELECT a.x, b.x AS y, a.__smv_sign AS __smv_sign FROM t AS a JOIN t AS b ON a.k = b.p",
        "SELECT a.x, b.x AS y, b.__smv_sign AS __smv_sign FROM t AS a JOIN t AS b ON a.k = b.p",
    ]
    assert analyze_incremental(q).technique == "delta rules"


def test_an_mv_built_without_the_state_columns_keeps_affected_key_recomputation() -> None:
    """An MV of TPC-H Q7 built while it was maintained by affected-key recomputation has no
    state columns: it stays maintained so; one with them uses the delta rules."""
    q7 = parse_query(TPCH_QUERIES["q7"])
    outputs = ["supp_nation", "cust_nation", "l_year", "revenue"]
    old = analyze_for_table(q7, outputs)
    assert (old.reason, old.technique, old.state_columns) == (None, "affected-key recomputation", ())
    assert old.keyed is not None and old.keyed.keys == ("supp_nation", "cust_nation", "l_year")
    new = analyze_for_table(q7, [*outputs, "__smv_count", "__SMV_NN_3"])
    assert (new.technique, new.state_columns) == ("delta rules", ("__smv_count", "__smv_nn_3"))
