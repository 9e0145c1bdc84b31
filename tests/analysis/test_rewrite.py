"""Query rewrite matching (pure): exact match, predicate compensation, aggregate rollup,
and the queries that must not be rewritten, with their reasons."""

from __future__ import annotations

import time

import pytest

from sparkmv.analysis.rewrite import COMPENSATION, EXACT, ROLLUP, MvCandidate, rewrite_query
from sparkmv.analysis.rewrite.implies import implies
from sparkmv.analysis.rewrite.normalize import canonical
from sparkmv.errors import ParseError
from sparkmv.names import ObjectName

LI, ORD, CUST = ObjectName("default", "lineitem"), ObjectName("default", "orders"), ObjectName("default", "customer")
SCHEMA = {
    LI: {
        "l_orderkey": "bigint",
        "l_partkey": "bigint",
        "l_quantity": "decimal(15,2)",
        "l_extendedprice": "decimal(15,2)",
        "l_discount": "decimal(15,2)",
        "l_tax": "double",
        "l_returnflag": "string",
        "l_linestatus": "string",
        "l_shipdate": "date",
        "l_shipmode": "string",
        "l_shipmonth": "string",
        "l_comment": "string",
    },
    ORD: {"o_orderkey": "bigint", "o_custkey": "bigint", "o_orderdate": "date", "o_totalprice": "decimal(15,2)"},
    CUST: {"c_custkey": "bigint", "c_mktsegment": "string", "c_name": "string"},
}
Q1 = MvCandidate(
    ObjectName("default", "q1_month"),
    "SELECT l_shipmonth, l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, "
    "sum(l_extendedprice * (1 - l_discount)) AS revenue, avg(l_discount) AS avg_disc, count(*) AS count_order, "
    "min(l_shipdate) AS first_ship, max(l_quantity) AS max_qty, avg(l_tax) AS avg_tax "
    "FROM lineitem WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_shipmonth, l_returnflag, l_linestatus",
    (
        ("l_shipmonth", "string"),
        ("l_returnflag", "string"),
        ("l_linestatus", "string"),
        ("sum_qty", "decimal(25,2)"),
        ("revenue", "decimal(38,4)"),
        ("avg_disc", "decimal(19,6)"),
        ("count_order", "bigint"),
        ("first_ship", "date"),
        ("max_qty", "decimal(15,2)"),
        ("avg_tax", "double"),
        ("__smv_count", "bigint"),
        ("__smv_nn_3", "bigint"),
        ("__smv_nn_4", "bigint"),
        ("__smv_sum_5", "decimal(25,2)"),
        ("__smv_nn_5", "bigint"),
        ("__smv_sum_9", "double"),
        ("__smv_nn_9", "bigint"),
    ),
    rows=500,
)
SEGMENT = MvCandidate(
    ObjectName("default", "segment_revenue"),
    "SELECT c_mktsegment, year(o_orderdate) AS o_year, sum(l_extendedprice) AS revenue, count(*) AS n "
    "FROM customer JOIN orders ON c_custkey = o_custkey JOIN lineitem ON l_orderkey = o_orderkey "
    "GROUP BY c_mktsegment, year(o_orderdate)",
    (
        ("c_mktsegment", "string"),
        ("o_year", "int"),
        ("revenue", "decimal(25,2)"),
        ("n", "bigint"),
        ("__smv_count", "bigint"),
        ("__smv_nn_2", "bigint"),
    ),
    rows=40,
)
BIG = MvCandidate(
    ObjectName("default", "big_items"),
    "SELECT l_orderkey, l_partkey, l_quantity, l_shipdate, l_shipmode FROM lineitem WHERE l_quantity > 10",
    (
        ("l_orderkey", "bigint"),
        ("l_partkey", "bigint"),
        ("l_quantity", "decimal(15,2)"),
        ("l_shipdate", "date"),
        ("l_shipmode", "string"),
    ),
    rows=10_000,
)
ALL = [Q1, SEGMENT, BIG]
Q1_WHERE = "WHERE l_shipdate <= DATE '1998-09-02'"
JOIN3 = "FROM lineitem l JOIN orders o ON o.o_orderkey = l.l_orderkey JOIN customer c ON o.o_custkey = c.c_custkey"


def rewrite(sql: str, candidates: list[MvCandidate] | None = None):  # type: ignore[no-untyped-def]
    return rewrite_query(sql, ALL if candidates is None else candidates, SCHEMA)


# (query, MV used, kind)
REWRITTEN = [
    (f"SELECT l_returnflag, sum(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY l_returnflag", "q1_month", ROLLUP),
    (
        "SELECT l_linestatus, l_returnflag, l_shipmonth, count(*), sum(l_quantity) AS q FROM lineitem "
        "WHERE DATE '1998-09-02' >= l_shipdate GROUP BY l_shipmonth, l_returnflag, l_linestatus",
        "q1_month",
        EXACT,
    ),
    (
        f"SELECT l_shipmonth, avg(l_discount), avg(l_tax) FROM lineitem {Q1_WHERE} AND l_shipmonth >= '1995-01' "
        "GROUP BY l_shipmonth",
        "q1_month",
        ROLLUP,
    ),
    (
        f"SELECT count(*), count(l_quantity), max(l_quantity), min(l_shipdate) FROM lineitem {Q1_WHERE}",
        "q1_month",
        ROLLUP,
    ),
    (f"SELECT l_linestatus, sum(l_tax), count(l_discount) FROM lineitem {Q1_WHERE} GROUP BY 1", "q1_month", ROLLUP),
    (f"SELECT count(DISTINCT l_returnflag) FROM lineitem {Q1_WHERE}", "q1_month", ROLLUP),
    (
        f"SELECT substr(l_shipmonth, 1, 4) AS y, sum(l_extendedprice * (1 - l_discount)) AS rev FROM lineitem "
        f"{Q1_WHERE} GROUP BY substr(l_shipmonth, 1, 4) HAVING sum(l_extendedprice * (1 - l_discount)) > 0 "
        "ORDER BY y LIMIT 3",
        "q1_month",
        ROLLUP,
    ),
    (
        "SELECT l_shipmonth, l_returnflag, l_linestatus, sum(l_quantity) FROM lineitem "
        f"{Q1_WHERE} AND l_returnflag = 'R' GROUP BY l_shipmonth, l_returnflag, l_linestatus "
        "HAVING count(*) > 1",
        "q1_month",
        COMPENSATION,
    ),
    (f"SELECT c_mktsegment, sum(l_extendedprice) AS rev {JOIN3} GROUP BY c_mktsegment", "segment_revenue", ROLLUP),
    (
        "SELECT year(o_orderdate), c_mktsegment, sum(l_extendedprice), count(*) FROM orders, customer, lineitem "
        "WHERE l_orderkey = o_orderkey AND o_custkey = c_custkey GROUP BY c_mktsegment, year(o_orderdate)",
        "segment_revenue",
        EXACT,
    ),
    (
        "SELECT l_orderkey, l_quantity FROM lineitem WHERE l_quantity > 20 AND l_shipmode = 'AIR'",
        "big_items",
        COMPENSATION,
    ),
    ("SELECT l_shipmode, l_quantity, l_orderkey FROM lineitem WHERE 10 < l_quantity", "big_items", EXACT),
    (
        "SELECT l_shipmode, count(DISTINCT l_partkey) FROM lineitem WHERE l_quantity >= 11 GROUP BY l_shipmode",
        "big_items",
        COMPENSATION,
    ),
    (
        "SELECT l_shipmode FROM lineitem WHERE l_quantity BETWEEN 20 AND 30 AND l_shipdate >= DATE '1995-01-01'",
        "big_items",
        COMPENSATION,
    ),
]


@pytest.mark.parametrize(("sql", "mv", "kind"), REWRITTEN)
def test_rewritten(sql: str, mv: str, kind: str) -> None:
    result = rewrite(sql)
    assert [(u.name.name, u.kind) for u in result.used] == [(mv, kind)]
    assert "lineitem" not in result.sql.replace(f"default.{mv}", "")


# (query, reason given for q1_month or the MV named)
NOT_REWRITTEN = [
    (
        f"SELECT l_shipmode, sum(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY l_shipmode",
        "q1_month: group-by column l_shipmode not in the MV",
    ),
    (
        f"SELECT count(DISTINCT l_partkey) FROM lineitem {Q1_WHERE}",
        "q1_month: count(DISTINCT l_partkey) cannot be derived from the MV's aggregates",
    ),
    (
        f"SELECT l_returnflag, sum(l_extendedprice) FROM lineitem {Q1_WHERE} GROUP BY l_returnflag",
        "q1_month: sum(l_extendedprice) cannot be derived from the MV's aggregates",
    ),
    (
        f"SELECT l_returnflag, stddev(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY l_returnflag",
        "q1_month: stddev(l_quantity) cannot be derived from the MV's aggregates",
    ),
    (
        f"SELECT l_returnflag, sum(l_quantity) FROM lineitem {Q1_WHERE} AND l_comment LIKE '%x%' GROUP BY 1",
        "q1_month: predicate on column l_comment not in the MV",
    ),
    (
        "SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY l_returnflag",
        "q1_month: its predicate l_shipdate <= CAST('1998-09-02' AS DATE) is not implied by the query",
    ),
    (
        "SELECT l_returnflag, sum(l_quantity) FROM lineitem WHERE l_shipdate <= DATE '1999-01-01' GROUP BY 1",
        "q1_month: its predicate l_shipdate <= CAST('1998-09-02' AS DATE) is not implied by the query",
    ),
    (
        f"SELECT l_returnflag, sum(l_quantity) FROM lineitem {Q1_WHERE} AND l_quantity > 3 GROUP BY 1",
        "q1_month: predicate on column l_quantity not in the MV",
    ),
    (f"SELECT l_returnflag, l_quantity FROM lineitem {Q1_WHERE}", "q1_month: it aggregates, the query does not"),
    (
        "SELECT c_mktsegment, sum(l_extendedprice) FROM lineitem l LEFT JOIN orders o ON o.o_orderkey = l.l_orderkey "
        "JOIN customer c ON o.o_custkey = c.c_custkey GROUP BY c_mktsegment",
        "segment_revenue: outer joins differ from the query's",
    ),
    (
        "SELECT c_mktsegment, sum(l_extendedprice) FROM lineitem l JOIN orders o ON o.o_orderkey = l.l_orderkey "
        "JOIN customer c ON o.o_custkey = c.c_custkey AND c_name > 'a' GROUP BY c_mktsegment",
        "segment_revenue: predicate on column c_name not in the MV",
    ),
    (
        "SELECT c_mktsegment, sum(l_extendedprice) FROM lineitem l JOIN orders o ON o.o_orderkey = l.l_orderkey "
        "GROUP BY 1",
        "segment_revenue: it reads customer, lineitem, orders, the query reads lineitem, orders",
    ),
    ("SELECT l_orderkey, l_comment FROM lineitem WHERE l_quantity > 20", "big_items: column l_comment not in the MV"),
    (
        "SELECT l_orderkey FROM lineitem WHERE l_quantity > 5",
        "big_items: its predicate l_quantity > 10 is not implied by the query",
    ),
    (
        "SELECT l_orderkey FROM lineitem WHERE l_quantity > 10 OR l_shipmode = 'AIR'",
        "big_items: its predicate l_quantity > 10 is not implied by the query",
    ),
    (
        f"SELECT l_returnflag, sum(l_quantity) OVER (PARTITION BY l_linestatus) FROM lineitem {Q1_WHERE}",
        "q1_month: it aggregates, the query does not",
    ),
    (
        f"SELECT l_returnflag, sum(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY ROLLUP(l_returnflag)",
        "q1_month: the query cannot be matched: LATERAL VIEW, ROLLUP, CUBE and grouping sets are not matched",
    ),
    (
        f"SELECT l_returnflag, sum(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY l_returnflag WITH CUBE",
        "q1_month: the query cannot be matched: LATERAL VIEW, ROLLUP, CUBE and grouping sets are not matched",
    ),
    (
        "SELECT a.l_orderkey FROM lineitem a JOIN lineitem b ON a.l_orderkey = b.l_partkey WHERE a.l_quantity > 10",
        "big_items: the query cannot be matched: it reads lineitem twice",
    ),
]


@pytest.mark.parametrize(("sql", "reason"), NOT_REWRITTEN)
def test_not_rewritten(sql: str, reason: str) -> None:
    result = rewrite(sql)
    assert not result.rewritten
    assert result.sql == sql
    assert reason in result.reasons


def test_rollup_sql_keeps_spark_types_and_avg_rule() -> None:
    result = rewrite(
        f"SELECT l_returnflag, sum(l_quantity), avg(l_discount), avg(l_tax) AS t FROM lineitem {Q1_WHERE} GROUP BY 1"
    )
    assert result.sql == (
        "SELECT default__q1_month.l_returnflag AS l_returnflag, "
        "CAST(SUM(default__q1_month.sum_qty) AS DECIMAL(25, 2)) AS `sum(l_quantity)`, "
        "CAST(CAST(SUM(default__q1_month.__smv_sum_5) AS DECIMAL(25, 2)) / "
        "CAST(NULLIF(SUM(default__q1_month.__smv_nn_5), 0) AS DECIMAL(20, 0)) AS DECIMAL(19, 6)) AS `avg(l_discount)`, "
        "SUM(CAST(default__q1_month.__smv_sum_9 AS DOUBLE)) / NULLIF(SUM(default__q1_month.__smv_nn_9), 0) AS t "
        "FROM default.q1_month AS default__q1_month GROUP BY default__q1_month.l_returnflag"
    )
    assert [str(u) for u in result.used] == ["q1_month: aggregate rollup (grouping by l_returnflag)"]


def test_count_rollup_is_never_null_and_having_becomes_where_without_rollup() -> None:
    rolled = rewrite(f"SELECT count(*) AS n FROM lineitem {Q1_WHERE}")
    assert rolled.sql == (
        "SELECT COALESCE(SUM(default__q1_month.count_order), 0) AS n FROM default.q1_month AS default__q1_month"
    )
    same = rewrite(
        f"SELECT l_shipmonth, l_returnflag, l_linestatus FROM lineitem {Q1_WHERE} "
        "GROUP BY l_shipmonth, l_returnflag, l_linestatus HAVING avg(l_discount) > 0.05"
    )
    assert same.sql.endswith("FROM default.q1_month AS default__q1_month WHERE default__q1_month.avg_disc > 0.05")


def test_subquery_and_cte_blocks_are_rewritten_in_place() -> None:
    result = rewrite(
        f"WITH t AS (SELECT l_returnflag, sum(l_quantity) s FROM lineitem {Q1_WHERE} GROUP BY l_returnflag) "
        "SELECT * FROM t WHERE s > 0"
    )
    assert result.sql.startswith("WITH t AS (SELECT default__q1_month.l_returnflag AS l_returnflag, CAST(SUM(")
    assert result.sql.endswith("SELECT t.l_returnflag AS l_returnflag, t.s AS s FROM t AS t WHERE t.s > 0")
    nested = rewrite("SELECT count(*) FROM (SELECT l_orderkey FROM lineitem WHERE l_quantity > 30) AS x")
    assert nested.mvs == [BIG.name]
    assert nested.sql == (
        "SELECT COUNT(*) FROM (SELECT default__big_items.l_orderkey AS l_orderkey FROM default.big_items AS "
        "default__big_items WHERE default__big_items.l_quantity > 30) AS x"
    )


def test_the_mv_with_fewest_rows_wins() -> None:
    small = MvCandidate(ObjectName("default", "small"), Q1.definition, Q1.columns, rows=5)
    result = rewrite(f"SELECT l_returnflag, max(l_quantity) FROM lineitem {Q1_WHERE} GROUP BY 1", [Q1, small])
    assert result.mvs == [small.name]
    assert result.reasons == ["q1_month: usable (aggregate rollup), but small has fewer rows"]


def test_mvs_never_used_and_caller_rejections() -> None:
    having = MvCandidate(
        ObjectName("default", "h"),
        "SELECT l_returnflag, count(*) AS n FROM lineitem GROUP BY 1 HAVING count(*) > 2",
        (("l_returnflag", "string"), ("n", "bigint")),
    )
    stale = (ObjectName("default", "old"), "3 stale base partitions and consistency CHECKED")
    result = rewrite_query("SELECT l_returnflag, count(*) FROM lineitem GROUP BY 1", [having], SCHEMA, [stale])
    assert result.reasons == [
        "old: 3 stale base partitions and consistency CHECKED",
        "h: its query has a HAVING clause",
    ]


def test_unknown_tables_and_bad_sql() -> None:
    result = rewrite("SELECT x FROM nowhere")
    assert not result.rewritten and result.reasons == [
        "q1_month: it reads lineitem, the query reads nowhere",
        "segment_revenue: it reads customer, lineitem, orders, the query reads nowhere",
        "big_items: it reads lineitem, the query reads nowhere",
    ]
    with pytest.raises(ParseError):
        rewrite("DROP TABLE x")


def test_analysis_is_fast() -> None:
    rewrite(REWRITTEN[0][0])  # warm the MV cache, as a long-lived client does
    start = time.perf_counter()
    for sql, _mv, _kind in REWRITTEN:
        rewrite(sql)
    assert (time.perf_counter() - start) / len(REWRITTEN) < 0.05


def test_implication() -> None:
    def c(text: str):  # type: ignore[no-untyped-def]
        from sqlglot import parse_one

        return canonical(parse_one(text, read="spark"))

    assert implies(c("x >= 1"), c("x > 0"))
    assert implies(c("x = 'b'"), c("x IN ('a', 'b')"))
    assert not implies(c("x = 'c'"), c("x IN ('a', 'b')"))
    assert not implies(c("x < 5"), c("x > 1"))
    assert not implies(c("x > '5'"), c("x > 1"))  # a string and a number do not compare
    assert implies(c("x <= 4"), c("x < 5")) and not implies(c("x <= 5"), c("x < 5"))
