"""Incremental refresh eligibility (no Spark): maintainable queries with their output
columns, state columns and augmented query; every construct that is not maintainable with
its exact reason."""

from __future__ import annotations

import pytest

from sparkmv.analysis.constructs import spark_functions
from sparkmv.analysis.incremental import (
    ROW_COUNT,
    STATE_PREFIX,
    IvmAnalysis,
    OutputColumn,
    analyze_incremental,
)
from sparkmv.analysis.query import parse_query


def analyze(sql: str) -> IvmAnalysis:
    return analyze_incremental(parse_query(sql))


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT o_orderkey, o_totalprice * 2 AS p FROM orders WHERE o_orderdate > '1995-01-01'", ["o_orderkey", "p"]),
        ("SELECT a FROM t UNION ALL SELECT b FROM u UNION ALL SELECT c FROM v", ["a"]),
        ("(SELECT a FROM t) UNION ALL (SELECT a FROM t WHERE a > 1)", ["a"]),
        ("SELECT t.a, u.b, v.c AS cc FROM t JOIN u ON t.k = u.k INNER JOIN sales.v USING (k)", ["a", "b", "cc"]),
        ("SELECT t.a FROM t, u CROSS JOIN v NATURAL JOIN w WHERE t.k = u.k", ["a"]),
        ("SELECT upper(s), date_format(d, 'yyyy-MM'), try_add(a, 1), unix_timestamp(d) FROM t", None),
        ("SELECT * FROM t", ["*"]),
    ],
)
def test_non_aggregate_queries_are_maintainable(sql: str, names: list[str] | None) -> None:
    a = analyze(sql)
    assert (a.reason, a.maintainable, a.aggregate, a.state_columns) == (None, True, False, ())
    assert a.augmented_sql == parse_query(sql).sql("spark")
    assert all(c.role == "plain" and c.state == () for c in a.columns)
    if names is not None:
        assert [c.name for c in a.columns] == names


def test_group_by_with_all_five_aggregates() -> None:
    a = analyze(
        "SELECT l_returnflag AS flag, sum(l_quantity) AS q, count(*) AS n, count(l_tax), "
        "avg(l_discount) AS d, min(l_shipdate) AS first, MAX(l_shipdate) FROM lineitem "
        "WHERE l_quantity > 0 GROUP BY l_returnflag"
    )
    assert a.maintainable and a.aggregate
    assert a.columns == (
        OutputColumn("flag", "group"),
        OutputColumn("q", "sum", ("__smv_nn_1",)),
        OutputColumn("n", "count"),
        OutputColumn("count(l_tax)", "count"),
        OutputColumn("d", "avg", ("__smv_sum_4", "__smv_nn_4")),
        OutputColumn("first", "min"),
        OutputColumn("max(l_shipdate)", "max"),
    )
    assert a.state_columns == (ROW_COUNT, "__smv_nn_1", "__smv_sum_4", "__smv_nn_4")
    assert all(s.startswith(STATE_PREFIX) for s in a.state_columns)


def test_augmented_sql_of_sum_and_avg() -> None:
    a = analyze("SELECT o.k, sum(o.x + 1) AS s, avg(y) AS m FROM sales.orders o WHERE o.z > 0 GROUP BY o.k")
    assert a.state_columns == ("__smv_count", "__smv_nn_1", "__smv_sum_2", "__smv_nn_2")
    assert a.augmented_sql == (
        "SELECT o.k, SUM(o.x + 1) AS s, AVG(y) AS m, COUNT(*) AS __smv_count, COUNT(o.x + 1) AS __smv_nn_1, "
        "SUM(y) AS __smv_sum_2, COUNT(y) AS __smv_nn_2 FROM sales.orders AS o WHERE o.z > 0 GROUP BY o.k"
    )
    # The lead re-parses the augmented query to bind its tables.
    assert parse_query(a.augmented_sql).sql("spark") == a.augmented_sql


@pytest.mark.parametrize(
    ("sql", "roles"),
    [
        ("SELECT upper(a) AS ua, sum(x) FROM t GROUP BY ua", ["group", "sum"]),
        ("SELECT upper(a) AS ua, sum(x) FROM t GROUP BY 1", ["group", "sum"]),
        ("SELECT sum(x), upper(A) FROM t GROUP BY UPPER(a)", ["sum", "group"]),
        ("SELECT t.k, count(*) FROM t JOIN u ON t.k = u.k GROUP BY k", ["group", "count"]),
        ("SELECT a, b, mean(x) FROM t GROUP BY ALL", ["group", "group", "avg"]),
        ("SELECT count(*) AS n, sum(x) AS s, min(x) AS lo FROM t", ["count", "sum", "min"]),
    ],
)
def test_aggregate_shapes_are_maintainable(sql: str, roles: list[str]) -> None:
    a = analyze(sql)
    assert a.reason is None and a.aggregate
    assert [c.role for c in a.columns] == roles


def test_global_aggregate_augmented_sql() -> None:
    a = analyze("SELECT count(*) AS n, sum(x) FROM t")
    assert [c.name for c in a.columns] == ["n", "sum(x)"]
    assert a.augmented_sql == "SELECT COUNT(*) AS n, SUM(x), COUNT(*) AS __smv_count, COUNT(x) AS __smv_nn_1 FROM t"


def not_maintainable(construct: str, why: str) -> str:
    return f"{construct} is not incrementally maintainable: {why}"


OUTER = "outer joins are not maintained"
SUBQUERY = "subqueries are not maintained"
NONDET = "non-deterministic function"
UDF = "user-defined functions are not maintained"
KIND = "only SUM, COUNT, AVG, MIN and MAX are maintained"
PLAIN = "only plain aggregate calls are maintained"
ORDER = "ordering and distribution clauses are not maintained"
LIMIT = "the rows kept depend on the whole result"
SETS = "grouping sets, ROLLUP and CUBE are not maintained"
UNION = "only UNION ALL is maintained"
UNPARTITIONED = "a window function without PARTITION BY reads every row"
QUALIFY = "a column beside an outer join must be qualified by its table"


@pytest.mark.parametrize(
    ("sql", "construct", "why"),
    [
        ("SELECT sum(DISTINCT x) FROM t", "sum(DISTINCT x)", "a DISTINCT aggregate needs every earlier value"),
        (
            "SELECT a, row_number() OVER (PARTITION BY b ORDER BY a) AS r FROM t",
            "b",
            "a PARTITION BY column must be an output column",
        ),
        ("SELECT a, sum(x) OVER () FROM t", "sum(x) OVER ()", UNPARTITIONED),
        (
            "SELECT a FROM t QUALIFY row_number() OVER (ORDER BY a) = 1",
            "row_number() OVER (ORDER BY a)",
            UNPARTITIONED,
        ),
        (
            "SELECT a, b, rank() OVER (PARTITION BY a ORDER BY b) AS r, sum(b) OVER (PARTITION BY b) AS s FROM t",
            "sum(b) OVER (PARTITION BY b)",
            "windows whose PARTITION BY lists share no expression read every row",
        ),
        ("SELECT a FROM t LEFT JOIN default.dim ON t.k = dim.k", "a", QUALIFY),
        (
            "SELECT dd.a FROM t RIGHT OUTER JOIN d AS dd USING (k)",
            "RIGHT OUTER JOIN d AS dd",
            "an outer join is maintained with an ON condition only",
        ),
        ("SELECT a FROM t FULL OUTER JOIN d ON t.k = d.k", "a", QUALIFY),
        ("SELECT a FROM t LEFT SEMI JOIN d ON t.k = d.k", "LEFT SEMI JOIN d", OUTER),
        ("SELECT a FROM t LEFT ANTI JOIN d ON t.k = d.k", "LEFT ANTI JOIN d", OUTER),
        ("SELECT a FROM t LIMIT 10", "LIMIT 10", LIMIT),
        ("SELECT a FROM t ORDER BY a", "ORDER BY a", ORDER),
        ("SELECT a FROM t SORT BY a", "SORT BY a", ORDER),
        ("SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a", "ORDER BY a", ORDER),
        ("SELECT a FROM t UNION ALL (SELECT a FROM u ORDER BY a LIMIT 3)", "LIMIT 3", LIMIT),
        ("SELECT a, b, sum(x) FROM t GROUP BY ROLLUP (a, b)", "GROUP BY ROLLUP (a, b)", SETS),
        ("SELECT a, b, sum(x) FROM t GROUP BY CUBE (a, b)", "GROUP BY CUBE (a, b)", SETS),
        ("SELECT a, b, sum(x) FROM t GROUP BY a, b WITH CUBE", "GROUP BY a, b WITH CUBE", SETS),
        (
            "SELECT a, b, sum(x) FROM t GROUP BY GROUPING SETS ((a), (b))",
            "GROUP BY GROUPING SETS ((a), (b))",
            SETS,
        ),
        ("SELECT * FROM t UNION SELECT * FROM u", "UNION", UNION),  # a UNION of named columns: test_unions.py
        ("SELECT a FROM t UNION SELECT a FROM u UNION ALL SELECT a FROM v", "UNION", UNION),
        (
            "SELECT a FROM t INTERSECT SELECT a FROM u GROUP BY a",
            "GROUP BY a",
            "a grouped branch of INTERSECT or EXCEPT is not maintained",
        ),
        (  # the first branch names the union's columns: an aggregate branch is staged only under names
            "SELECT sum(x) FROM u UNION ALL SELECT a FROM t",
            "sum(x)",
            "aggregates in a UNION ALL branch are not maintained",
        ),
        ("SELECT a FROM (SELECT a FROM t LIMIT 3) AS s", "(SELECT a FROM t LIMIT 3) AS s", SUBQUERY),
        ("SELECT a FROM t JOIN (SELECT k FROM u) s ON t.k = s.k", "(SELECT k FROM u) AS s", SUBQUERY),
        ("SELECT a, (SELECT max(b) FROM u) AS m FROM t", "(SELECT max(b) FROM u)", SUBQUERY),
        ("SELECT a, (SELECT max(b) FROM u) AS m FROM t", "(SELECT max(b) FROM u)", SUBQUERY),
        (
            "WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c",
            "WITH c AS (SELECT a FROM t ORDER BY a)",
            "common table expressions (WITH) are not maintained",
        ),
        ("SELECT approx_count_distinct(x) FROM t", "approx_count_distinct(x)", KIND),
        (
            "SELECT a, b, sum(x) FROM t GROUP BY a",
            "b",
            "a select item of an aggregate query must be a GROUP BY key",
        ),
        ("SELECT a, sum(x) FROM t", "a", "a select item of an aggregate query must be a GROUP BY key"),
        (
            "SELECT t.k, sum(x) FROM t JOIN u ON t.k = u.k GROUP BY u.k",
            "t.k",
            "a select item of an aggregate query must be a GROUP BY key",
        ),
        ("SELECT a, rand() AS r FROM t", "rand()", NONDET),
        ("SELECT a FROM t WHERE x < random()", "rand()", NONDET),
        ("SELECT randn(1) FROM t", "randn(1)", NONDET),
        ("SELECT uuid() FROM t", "uuid()", NONDET),
        ("SELECT current_timestamp FROM t", "current_timestamp()", NONDET),
        ("SELECT now() FROM t", "now()", NONDET),
        ("SELECT current_date() FROM t", "CURRENT_DATE", NONDET),
        ("SELECT localtimestamp() FROM t", "LOCALTIMESTAMP", NONDET),
        ("SELECT current_timezone() FROM t", "current_timezone()", NONDET),
        ("SELECT unix_timestamp() FROM t", "unix_timestamp()", NONDET),
        ("SELECT monotonically_increasing_id() FROM t", "monotonically_increasing_id()", NONDET),
        ("SELECT spark_partition_id() FROM t", "spark_partition_id()", NONDET),
        ("SELECT input_file_name() FROM t", "input_file_name()", NONDET),
        ("SELECT shuffle(arr) FROM t", "shuffle(arr)", NONDET),
        ("SELECT a FROM t JOIN u ON t.k = u.k AND rand() < 0.5", "rand()", NONDET),
        ("SELECT my_udf(a) FROM t", "my_udf(a)", UDF),
        ("SELECT a FROM t WHERE db.is_valid(a)", "db.is_valid(a)", UDF),
        ("SELECT a, my_agg(x) FROM t GROUP BY a", "my_agg(x)", UDF),
        ("SELECT a AS __smv_x FROM t", "__smv_x", "column names starting with __smv_ are reserved"),
        (
            "SELECT a, x FROM t LATERAL VIEW explode(arr) e AS x",
            "LATERAL VIEW explode(arr) e AS x",
            "LATERAL VIEW is not maintained",
        ),
        ("SELECT a FROM t TABLESAMPLE (10 PERCENT)", "t TABLESAMPLE (10 PERCENT)", "sampling is non-deterministic"),
        ("SELECT * FROM range(10)", "range(10)", "only base tables are maintained"),
        (
            "SELECT * FROM t PIVOT (sum(x) FOR a IN (1, 2))",
            "PIVOT(sum(x) FOR a IN (1, 2))",
            "PIVOT and UNPIVOT are not maintained",
        ),
    ],
)
def test_not_maintainable(sql: str, construct: str, why: str) -> None:
    a = analyze(sql)
    assert a.reason == not_maintainable(construct, why)
    assert not a.maintainable
    assert (a.columns, a.state_columns, a.augmented_sql) == ((), (), parse_query(sql).sql("spark"))


@pytest.mark.parametrize(
    ("sql", "construct", "why"),
    [
        # The query's clauses come before FROM, FROM before the expressions.
        ("SELECT DISTINCT rand() FROM t LEFT JOIN u ON TRUE", "rand()", "non-deterministic"),
        ("SELECT DISTINCT a FROM t LEFT JOIN u ON rand() > 0", "rand()", "non-deterministic"),
        ("SELECT rand() FROM t LEFT JOIN u ON TRUE", "rand()", "non-deterministic"),
        ("SELECT t.a FROM t LEFT ANTI JOIN u ON TRUE", "LEFT ANTI JOIN u", "outer"),
        # Expressions in text order: select list, join conditions, WHERE.
        ("SELECT my_udf(a) FROM t JOIN u ON rand() > 0 WHERE uuid() = ''", "my_udf(a)", "user-defined"),
        ("SELECT a FROM t JOIN u ON rand() > 0 WHERE uuid() = ''", "rand()", "non-deterministic"),
        # Outer constructs before inner ones.
        ("SELECT count(DISTINCT x) OVER () FROM t", "count(DISTINCT x) OVER ()", "a window function without"),
    ],
)
def test_first_problem_is_reported(sql: str, construct: str, why: str) -> None:
    reason = analyze(sql).reason
    assert reason is not None and reason.startswith(f"{construct} is not incrementally maintainable: {why}")


def test_aggregate_flag_is_set_when_not_maintainable() -> None:
    assert analyze("SELECT k, stddev(x) FROM t LEFT JOIN u ON t.a = u.a GROUP BY k").aggregate
    assert not analyze("SELECT a FROM t LIMIT 1").aggregate


def test_spark_function_names() -> None:
    names = spark_functions()
    assert len(names) > 400
    assert {"count", "date_format", "try_sum", "mean", "monotonically_increasing_id"} <= names
    assert all(n == n.lower() and n.isidentifier() for n in names)
