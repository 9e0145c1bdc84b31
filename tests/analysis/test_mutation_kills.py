"""Behaviours of the pure analysis modules that `make mutation` found unpinned: each test
asserts the value a surviving mutant changed (bench/RESULTS.md, "Mutation score")."""

from __future__ import annotations

import pytest
from sqlglot import exp, parse_one

from sparkmv.analysis.incremental import branches_reading
from sparkmv.analysis.lineage import TIME_SUFFIX, Transform, _compose, partition_lineage
from sparkmv.analysis.query import _readable_tokens, bind_tables, parse_query
from sparkmv.analysis.rewrite.implies import implies
from sparkmv.analysis.rewrite.normalize import canonical
from sparkmv.analysis.signed import signed_query
from sparkmv.analysis.transforms import covers
from sparkmv.errors import AnalysisError, ParseError
from sparkmv.names import ObjectName


def c(text: str) -> exp.Expr:
    return canonical(parse_one(text, read="spark"))


@pytest.mark.parametrize(
    ("query", "mv", "expected"),
    [
        # lower bounds: a strict bound at the same value implies the non-strict one only
        ("x > 5", "x > 5", True),
        ("x > 5", "x >= 5", True),
        ("x >= 5", "x > 5", False),
        ("x >= 5", "x >= 5", True),
        ("x > 6", "x > 5", True),
        ("x >= 4", "x >= 5", False),
        ("x = 5", "x >= 5", True),
        ("x = 5", "x > 5", False),
        ("x = 6", "x > 5", True),
        ("x < 9", "x > 5", False),
        ("x <= 9", "x >= 5", False),
        # upper bounds
        ("x < 5", "x <= 5", True),
        ("x <= 5", "x < 5", False),
        ("x <= 5", "x <= 5", True),
        ("x < 4", "x < 5", True),
        ("x < 6", "x < 5", False),
        ("x = 5", "x <= 5", True),
        ("x = 5", "x < 5", False),
        ("x = 4", "x < 5", True),
        ("x > 1", "x < 5", False),
        ("x >= 1", "x <= 5", False),
        # equalities
        ("x = 5", "x = 5.0", True),
        ("x = 5", "x = 6", False),
        ("x > 5", "x = 6", False),
        ("x >= 6", "x = 6", False),
        # the literal on either side, negative numbers
        ("5 < x", "x > 4", True),
        ("x > -3", "x > -5", True),
        ("x > -5", "x > -3", False),
        ("-3 > x", "x < -2", True),
        # strings compare as text; different kinds or expressions never imply
        ("x > 'b'", "x > 'a'", True),
        ("x > 'a'", "x > 'b'", False),
        ("d < CAST('1995-03-01' AS DATE)", "d < CAST('1996-01-01' AS DATE)", True),
        ("d < CAST('1997-03-01' AS DATE)", "d < CAST('1996-01-01' AS DATE)", False),
        ("d < CAST('1995-03-01' AS DATE)", "d < '1996-01-01'", False),
        ("d < CAST('1995-03-01' AS DATE)", "d < CAST('1996-01-01' AS TIMESTAMP)", False),
        ("x > 6", "y > 5", False),
        ("1 < 2", "x > 0", False),
        ("x < y", "x < y", True),
        ("x < y", "x < z", False),
        # IN lists
        ("x IN (1, 2)", "x IN (1, 2, 3)", True),
        ("x IN (1, 4)", "x IN (1, 2, 3)", False),
        ("x = 3", "x IN (1, 3)", True),
        ("y IN (1)", "x IN (1, 2)", False),
        ("x IN (-1)", "x IN (-1, 2)", True),
        ("x IN (1, y)", "x IN (1, 2, y)", False),
        ("x IN (1, 2)", "x = 1", False),
        ("x IN ('a')", "x IN ('a', 'b')", True),
        ("x IN (CAST('2024-01-01' AS DATE))", "x IN ('2024-01-01')", False),
    ],
)
def test_implies(query: str, mv: str, expected: bool) -> None:
    assert implies(c(query), c(mv)) is expected


def test_implies_never_reads_a_subquery_as_a_list() -> None:
    q = canonical(parse_one("SELECT 1 FROM t WHERE x IN (SELECT 1)", read="spark").args["where"].this)
    assert implies(q, c("x IN (1)")) is False


@pytest.mark.parametrize(
    ("transform", "value", "expected"),
    [
        (Transform("identity"), "2024-05-31", "2024-05-31"),
        (Transform("identity", suffix=TIME_SUFFIX), "2024-05-31", "2024-05-31 00:00:00"),
        (Transform("prefix", 7), "2024-05-31", "2024-05"),
        (Transform("prefix", 0), "2024-05-31", ""),
        (Transform("trunc_month"), "2024-05-31 10:00:00", "2024-05-01"),
        (Transform("trunc_year"), "2024-05-31", "2024-01-01"),
        (Transform("trunc_hour"), "2024-05-31 10:42:07", "2024-05-31 10:00:00"),
        (Transform("trunc_hour"), "2024-05-31", "2024-05-31 00:00:00"),
        # 2024-06-02 is a Sunday: Spark's week starts on the Monday before
        (Transform("trunc_week"), "2024-06-02", "2024-05-27"),
        (Transform("trunc_week"), "2024-05-27", "2024-05-27"),
        (Transform("trunc_quarter"), "2024-03-31", "2024-01-01"),
        (Transform("trunc_quarter"), "2024-04-01", "2024-04-01"),
        (Transform("trunc_quarter"), "2024-12-31", "2024-10-01"),
        (Transform("prefix", 4), None, None),
    ],
)
def test_transform_apply(transform: Transform, value: str | None, expected: str | None) -> None:
    assert transform.apply(value) == expected


@pytest.mark.parametrize(
    ("transform", "expected"),
    [
        (Transform("identity"), "d"),
        (Transform("prefix", 7), "substr(d, 1, 7)"),
        (Transform("trunc_month"), "date_trunc('month', d)"),
        (Transform("trunc_year"), "date_trunc('year', d)"),
        (Transform("trunc_week", suffix=TIME_SUFFIX), "cast(date_trunc('week', d) AS TIMESTAMP)"),
        (Transform("prefix", 10, TIME_SUFFIX), "cast(substr(d, 1, 10) AS TIMESTAMP)"),
    ],
)
def test_transform_describe(transform: Transform, expected: str) -> None:
    assert transform.describe("d") == expected


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        (Transform("identity"), Transform("prefix", 7), Transform("prefix", 7)),
        (Transform("prefix", 4), Transform("identity"), Transform("prefix", 4)),
        (Transform("identity", suffix=TIME_SUFFIX), Transform("identity"), Transform("identity", suffix=TIME_SUFFIX)),
        (Transform("trunc_month"), Transform("prefix", 7), None),
        (Transform("prefix", 4, TIME_SUFFIX), Transform("prefix", 7), None),
        (Transform("prefix", 7), Transform("prefix", 7), Transform("prefix", 7)),
        (Transform("prefix", 8), Transform("prefix", 7), Transform("prefix", 7)),
        # a prefix longer than the inner prefix and its suffix keeps the inner value whole
        (Transform("prefix", 19), Transform("prefix", 10, TIME_SUFFIX), Transform("prefix", 10, TIME_SUFFIX)),
        (Transform("prefix", 18), Transform("prefix", 10, TIME_SUFFIX), None),
        (Transform("prefix", 13), Transform("trunc_hour"), Transform("prefix", 13)),
        (Transform("prefix", 14), Transform("trunc_hour"), None),
        (Transform("prefix", 19), Transform("trunc_hour"), Transform("trunc_hour")),
        (Transform("prefix", 10), Transform("trunc_month", suffix=TIME_SUFFIX), Transform("trunc_month")),
        (Transform("prefix", 13), Transform("trunc_month", suffix=TIME_SUFFIX), Transform("trunc_month", suffix=" 00")),
        (Transform("prefix", 7), Transform("trunc_month"), Transform("prefix", 7)),
        (Transform("prefix", 8), Transform("trunc_month"), None),
        (Transform("prefix", 4), Transform("trunc_quarter"), Transform("prefix", 4)),
        (Transform("prefix", 5), Transform("trunc_year"), None),
        (Transform("prefix", 1), Transform("trunc_week"), None),
        (Transform("prefix", 4), Transform("conflict"), None),
    ],
)
def test_compose(outer: Transform, inner: Transform, expected: Transform | None) -> None:
    assert _compose(outer, inner) == expected


@pytest.mark.parametrize(
    ("iceberg", "transform", "expected"),
    [
        ("identity", Transform("prefix", 1), True),
        ("hour", Transform("trunc_hour"), True),
        ("hour", Transform("prefix", 13), True),
        ("hour", Transform("prefix", 14), False),
        ("day", Transform("prefix", 10), True),
        ("day", Transform("prefix", 11), False),
        ("day", Transform("prefix", 0), False),
        ("day", Transform("trunc_week"), True),
        ("month", Transform("trunc_quarter"), True),
        ("month", Transform("trunc_week"), False),
        ("month", Transform("prefix", 8), False),
        ("year", Transform("trunc_year"), True),
        ("year", Transform("prefix", 4), True),
        ("year", Transform("prefix", 5), False),
        ("year", Transform("trunc_month"), False),
        ("bucket", Transform("prefix", 1), False),
        ("bucket", Transform("trunc_year"), False),
    ],
)
def test_covers(iceberg: str, transform: Transform, expected: bool) -> None:
    assert covers(iceberg, transform) is expected


def test_readable_tokens_shows_a_token_by_its_text() -> None:
    desc = "Expected ) but got <Token token_type: TokenType.COMMA, text: ,, line: 1, col: 9, start: 8, end: 8>"
    assert _readable_tokens(desc) == "Expected ) but got ','"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT * FROM t t2 t3 t4",
            "cannot parse SQL at line 1, column 21: Invalid expression / Unexpected token near 't3'",
        ),
        ("SELECT 1; SELECT 2", "expected exactly one SELECT query"),
        ("INSERT INTO t VALUES (1)", "expected exactly one SELECT query"),
    ],
)
def test_parse_errors_name_line_column_and_token(sql: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_query(sql)
    assert str(info.value) == message


def test_bind_tables_binds_after_an_unbound_table_in_spark_sql() -> None:
    bound = bind_tables(parse_query("SELECT `my col` FROM a JOIN b"), {ObjectName("default", "b"): "v0"})
    assert bound == "SELECT `my col` FROM a JOIN v0 AS b ON TRUE"


T = ObjectName("default", "t")


@pytest.mark.parametrize(
    ("sql", "aggregate", "expected"),
    [
        # only the branch and the SELECT that read t carry its sign, by t's alias
        (
            "SELECT a FROM u UNION ALL SELECT a FROM t",
            False,
            "SELECT a FROM u UNION ALL SELECT a, t.__smv_sign AS __smv_sign FROM t",
        ),
        (
            "SELECT a FROM u JOIN t ON u.k = t.k",
            False,
            "SELECT a, t.__smv_sign AS __smv_sign FROM u JOIN t ON u.k = t.k",
        ),
        (
            "SELECT a FROM (SELECT a FROM t) AS s",
            False,
            "SELECT a FROM (SELECT a, t.__smv_sign AS __smv_sign FROM t) AS s",
        ),
        # COUNT(v) counts the signs of non-NULL v; without MIN / MAX no retraction flag
        (
            "SELECT k, COUNT(v) AS n, SUM(v) AS s FROM t GROUP BY k",
            True,
            "SELECT k, SUM(CASE WHEN v IS NULL THEN 0 ELSE t.__smv_sign END) AS n, "
            "SUM(CASE WHEN t.__smv_sign < 0 THEN -(v) ELSE v END) AS s FROM t GROUP BY k",
        ),
        (
            "SELECT k, MIN(v) AS lo FROM t AS x GROUP BY k",
            True,
            "SELECT k, MIN(CASE WHEN x.__smv_sign > 0 THEN v END) AS lo, "
            # per MIN/MAX the extreme of the retracted values (only a group whose retracted
            # value reaches the merged extreme is recomputed)
            "NAMED_STRUCT('r0', MIN(CASE WHEN x.__smv_sign < 0 THEN v END)) AS __smv_retracted "
            "FROM t AS x GROUP BY k",
        ),
    ],
)
def test_signed_query(sql: str, aggregate: bool, expected: str) -> None:
    assert signed_query(parse_query(sql), T, aggregate).sql() == expected


def test_branches_reading_refuses_a_distinct_union() -> None:
    with pytest.raises(AnalysisError, match=r"^UNION is not incrementally maintainable: only UNION ALL is maintained$"):
        branches_reading(parse_query("SELECT a FROM t UNION SELECT a FROM u"), T)


def test_substr_without_a_length_is_no_known_transform() -> None:
    lin = partition_lineage(
        parse_query("SELECT substr(d, 1) AS m FROM f"), "m", {"default.f": {"d": "string"}}, {"default.f": ["d"]}
    )
    assert (lin.mappings, lin.reason) == ({}, "unsupported transform of the partition column: SUBSTRING(f.d, 1) AS m")
