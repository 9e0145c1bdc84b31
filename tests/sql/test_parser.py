"""Parser unit tests: every statement form of the foundation, and errors with positions."""

from __future__ import annotations

import pytest

from sparkmv.errors import InvalidNameError, ParseError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.sql.cursor import split_statements
from sparkmv.sql.parser import parse_statement
from sparkmv.sql.statements import (
    CreateExternalTable,
    CreateMaterializedView,
    Describe,
    DropObject,
    ExplainRefresh,
    Query,
    RefreshMaterializedView,
    RefreshScheme,
    Show,
)


def n(name: str, ns: str = "default") -> ObjectName:
    return ObjectName(ns, name)


# -- CREATE EXTERNAL TABLE ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "CREATE EXTERNAL TABLE li USING parquet LOCATION '/data/li'",
            CreateExternalTable(n("li"), "/data/li", "parquet", False),
        ),
        (
            "create external table if not exists Sales.LI using PARQUET location '/data/x y/li';",
            CreateExternalTable(n("li", "sales"), "/data/x y/li", "parquet", True),
        ),
        (
            'CREATE EXTERNAL TABLE `li`\n  USING parquet\n  LOCATION "/d"',
            CreateExternalTable(n("li"), "/d", "parquet", False),
        ),
        (
            "CREATE EXTERNAL TABLE li USING csv LOCATION '/d'",
            CreateExternalTable(n("li"), "/d", "csv", False),
        ),
        (
            "CREATE EXTERNAL TABLE li USING csv OPTIONS (header = 'true', 'delimiter' = ';') LOCATION '/d'",
            CreateExternalTable(n("li"), "/d", "csv", False, {"header": "true", "delimiter": ";"}),
        ),
        (
            "CREATE EXTERNAL TABLE li USING json LOCATION '/d' OPTIONS ('multiLine' = 'true')",
            CreateExternalTable(n("li"), "/d", "json", False, {"multiLine": "true"}),
        ),
        (
            "CREATE EXTERNAL TABLE li USING delta LOCATION '/lake/li'",
            CreateExternalTable(n("li"), "/lake/li", "delta", False),
        ),
    ],
)
def test_create_external_table(sql: str, expected: CreateExternalTable) -> None:
    assert parse_statement(sql) == expected


# -- CREATE MATERIALIZED VIEW ---------------------------------------------------------------------------
def test_create_mv_minimal_defaults_to_immediate_manual() -> None:
    stmt = parse_statement("CREATE MATERIALIZED VIEW mv AS SELECT a, count(*) AS n FROM t GROUP BY a")
    assert stmt == CreateMaterializedView(
        name=n("mv"),
        query="SELECT a, count(*) AS n FROM t GROUP BY a",
        partition_by=None,
        refresh=RefreshScheme("MANUAL", None, None, "MANUAL"),
        properties={},
        if_not_exists=False,
        deferred=False,
    )


def test_create_mv_every_clause() -> None:
    sql = """CREATE MATERIALIZED VIEW IF NOT EXISTS db.Rev
        PARTITION BY Ship_Month
        REFRESH MANUAL
        PROPERTIES ("partition_refresh_number" = "3", 'mv_max_rows_per_refresh' = '1000')
        AS
        SELECT ship_month, sum(price) AS revenue FROM li GROUP BY ship_month;"""
    stmt = parse_statement(sql)
    assert isinstance(stmt, CreateMaterializedView)
    assert stmt.name == n("rev", "db")
    assert stmt.partition_by == "ship_month"
    assert stmt.refresh == RefreshScheme()
    assert stmt.properties == {"partition_refresh_number": "3", "mv_max_rows_per_refresh": "1000"}
    assert stmt.if_not_exists is True
    assert stmt.deferred is False
    assert stmt.query == "SELECT ship_month, sum(price) AS revenue FROM li GROUP BY ship_month"


@pytest.mark.parametrize(
    ("clause", "deferred"),
    [
        ("REFRESH DEFERRED", True),
        ("REFRESH DEFERRED MANUAL", True),
        ("REFRESH IMMEDIATE MANUAL", False),
        ("REFRESH IMMEDIATE", False),
        ("REFRESH MANUAL REFRESH DEFERRED", True),
    ],
)
def test_create_mv_refresh_timing(clause: str, deferred: bool) -> None:
    stmt = parse_statement(f"CREATE MATERIALIZED VIEW mv {clause} AS SELECT 1 AS a")
    assert isinstance(stmt, CreateMaterializedView)
    assert (stmt.deferred, stmt.refresh.kind, stmt.query) == (deferred, "MANUAL", "SELECT 1 AS a")


def test_create_mv_query_keeps_strings_and_semicolons() -> None:
    stmt = parse_statement("CREATE MATERIALIZED VIEW mv AS SELECT 'a;b' AS s, `weird col` FROM t WHERE x = 'AS'")
    assert isinstance(stmt, CreateMaterializedView)
    assert stmt.query == "SELECT 'a;b' AS s, `weird col` FROM t WHERE x = 'AS'"


# -- REFRESH / DROP / SHOW / DESCRIBE / SELECT -----------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("REFRESH MATERIALIZED VIEW mv", RefreshMaterializedView(n("mv"))),
        ("refresh materialized view db.mv with sync mode;", RefreshMaterializedView(n("mv", "db"))),
        ("REFRESH MATERIALIZED VIEW mv WITH ASYNC MODE", RefreshMaterializedView(n("mv"), asynchronous=True)),
        (
            "REFRESH MATERIALIZED VIEW mv PARTITION START ('1995-01') END ('1995-03') FORCE",
            RefreshMaterializedView(n("mv"), "1995-01", "1995-03", True),
        ),
        ("DROP MATERIALIZED VIEW mv", DropObject(n("mv"), True, False)),
        ("DROP MATERIALIZED VIEW IF EXISTS db.mv", DropObject(n("mv", "db"), True, True)),
        ("DROP TABLE li", DropObject(n("li"), False, False)),
        ("drop table if exists `li`", DropObject(n("li"), False, True)),
        ("SHOW MATERIALIZED VIEWS", Show("MATERIALIZED VIEWS")),
        ("show tables;", Show("TABLES")),
        ("DESCRIBE li", Describe(n("li"))),
        ("DESC TABLE db.li", Describe(n("li", "db"))),
        ("DESCRIBE MATERIALIZED VIEW mv", Describe(n("mv"))),
        ("DESCRIBE sparkmv.task_runs", Describe(n("task_runs", "sparkmv"))),
        ("DESCRIBE EXTENDED li", Describe(n("li"), extended=True)),
        ("DESC TABLE EXTENDED li", Describe(n("li"), extended=True)),
        ("EXPLAIN REFRESH MATERIALIZED VIEW mv FORCE", ExplainRefresh(RefreshMaterializedView(n("mv"), force=True))),
        ("SELECT * FROM li WHERE a = ';'", Query("SELECT * FROM li WHERE a = ';'")),
        ("  WITH x AS (SELECT 1 AS a) SELECT * FROM x ;", Query("WITH x AS (SELECT 1 AS a) SELECT * FROM x")),
        ("SELECT * FROM sparkmv.materialized_views", Query("SELECT * FROM sparkmv.materialized_views")),
    ],
)
def test_other_statements(sql: str, expected: object) -> None:
    assert parse_statement(sql) == expected


def test_split_statements() -> None:
    script = "CREATE EXTERNAL TABLE li USING parquet LOCATION '/a;b';\n-- c; d\nSHOW TABLES;;\nSELECT ';' ;  "
    assert split_statements(script) == [
        "CREATE EXTERNAL TABLE li USING parquet LOCATION '/a;b'",
        "-- c; d\nSHOW TABLES",
        "SELECT ';'",
    ]
    assert split_statements("  ;  ") == []


# -- errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("", "empty statement"),
        ("DROP TABLE", "cannot parse SQL at line 1, column 11: expected a name, found end of statement"),
        ("DROP VIEW x", "cannot parse SQL at line 1, column 6: expected TABLE, found 'VIEW'"),
        (
            "CREATE EXTERNAL TABLE li USING parquet",
            "cannot parse SQL at line 1, column 39: expected LOCATION, found end of statement",
        ),
        (
            "CREATE EXTERNAL TABLE li USING parquet LOCATION /x",
            "cannot parse SQL at line 1, column 49: expected a quoted string, found '/'",
        ),
        (
            "CREATE EXTERNAL TABLE li USING parquet LOCATION '/x' extra",
            "cannot parse SQL at line 1, column 54: expected end of statement, found 'extra'",
        ),
        (
            "CREATE MATERIALIZED VIEW mv\n  PARTITON BY m AS SELECT 1",
            "cannot parse SQL at line 2, column 3: expected PARTITION BY, REFRESH, PROPERTIES or AS, found 'PARTITON'",
        ),
        (
            "CREATE MATERIALIZED VIEW mv PARTITION BY AS SELECT 1",
            "cannot parse SQL at line 1, column 42: expected a column name, found 'AS'",
        ),
        (
            "CREATE MATERIALIZED VIEW mv REFRESH AS SELECT 1",
            "cannot parse SQL at line 1, column 37: expected MANUAL or ASYNC, found 'AS'",
        ),
        (
            "CREATE MATERIALIZED VIEW mv PROPERTIES ('a' = 1) AS SELECT 1",
            "cannot parse SQL at line 1, column 47: expected a quoted string, found '1'",
        ),
        (
            "CREATE MATERIALIZED VIEW mv AS",
            "cannot parse SQL at line 1, column 31: expected a query, found end of statement",
        ),
        (
            "CREATE MATERIALIZED VIEW mv\nAS\nSELECT 1 +",
            "cannot parse SQL at line 3, column 10: Required keyword: 'expression' missing for "
            "<class 'sqlglot.expressions.core.Add'> near '+'",
        ),
        (
            "REFRESH MATERIALIZED VIEW mv WITH FOO MODE",
            "cannot parse SQL at line 1, column 30: expected end of statement, found 'WITH'",
        ),
        (
            "SHOW VIEWS",
            "cannot parse SQL at line 1, column 6: "
            "expected MATERIALIZED VIEWS, TABLES or CATALOGS after SHOW, found 'VIEWS'",
        ),
        ("SHOW TABLES x", "cannot parse SQL at line 1, column 13: expected end of statement, found 'x'"),
        (
            "SELECT 1 FROM t WHERE",
            "cannot parse SQL at line 1, column 21: Required keyword: 'this' missing for "
            "<class 'sqlglot.expressions.query.Where'> near 'WHERE'",
        ),
        (
            "SELECT FROM",
            "cannot parse SQL at line 1, column 11: Expected table name but got end of statement near 'FROM'",
        ),
        ("SELECT 1\nFROM t WHERE x = 'abc", "cannot parse SQL at line 2, column 18: unterminated string"),
        ("SELECT `a", "cannot parse SQL at line 1, column 8: unterminated quoted identifier"),
        ("SELECT 1 /* x", "cannot parse SQL at line 1, column 10: unterminated comment"),
        ("INSERT INTO t VALUES (1)", "expected exactly one SELECT query"),
        ("DELETE FROM t", "expected exactly one SELECT query"),
    ],
)
def test_parse_errors(sql: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_statement(sql)
    assert str(info.value) == message
    assert isinstance(info.value, SparkMvError)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "CREATE EXTERNAL TABLE `../etc` USING parquet LOCATION '/x'",
            "invalid name '`../etc`': use letters, digits and _ (optionally namespace.name)",
        ),
        ("DROP TABLE `a.b`", "invalid name '`a.b`': use letters, digits and _ (optionally namespace.name)"),
        ("DROP TABLE `a/b`", "invalid name '`a/b`': use letters, digits and _ (optionally namespace.name)"),
        ("DROP TABLE db.`x y`", "invalid name 'db.`x y`': use letters, digits and _ (optionally namespace.name)"),
        ("DROP TABLE a.b.c", "invalid name 'a.b.c': use letters, digits and _ (optionally namespace.name)"),
        ("DROP TABLE 1abc", "invalid name '1abc': use letters, digits and _ (optionally namespace.name)"),
        (
            "CREATE MATERIALIZED VIEW `mv``x` AS SELECT 1",
            "invalid name '`mv``x`': use letters, digits and _ (optionally namespace.name)",
        ),
        (
            "CREATE EXTERNAL TABLE sparkmv.x USING parquet LOCATION '/x'",
            "invalid name 'sparkmv.x': namespace 'sparkmv' is reserved",
        ),
        (
            "CREATE MATERIALIZED VIEW " + "a" * 129 + " AS SELECT 1",
            f"invalid name '{'a' * 129}': use letters, digits and _ (optionally namespace.name)",
        ),
    ],
)
def test_invalid_names(sql: str, message: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        parse_statement(sql)
    assert str(info.value) == message


def test_double_quoted_name_is_a_string_not_a_name() -> None:
    with pytest.raises(ParseError, match=r"^cannot parse SQL at line 1, column 23: expected a name, found '\"x y\"'$"):
        parse_statement("CREATE EXTERNAL TABLE \"x y\" USING parquet LOCATION '/x'")


def _error(statement: str) -> str:
    with pytest.raises(ParseError) as info:
        parse_statement(statement)
    return str(info.value)


def test_explain_query_and_set_rewrite_switch() -> None:
    from sparkmv.sql.statements import ExplainQuery, SetVariable

    assert parse_statement("EXPLAIN SELECT a FROM t") == ExplainQuery("SELECT a FROM t")
    assert parse_statement("explain WITH x AS (SELECT 1) SELECT * FROM x;") == ExplainQuery(
        "WITH x AS (SELECT 1) SELECT * FROM x"
    )
    switch = "enable_materialized_view_rewrite"
    assert parse_statement(f"SET {switch} = false") == SetVariable(switch, False)
    assert parse_statement(f"set {switch.upper()} = 'true'") == SetVariable(switch, True)
    assert _error("SET foo = 1") == f"unknown session variable 'foo'; known: {switch}"
    assert _error(f"SET {switch} = 3") == f"{switch} must be true or false, not '3'"
    assert _error("EXPLAIN DROP TABLE x") == (
        "cannot parse SQL at line 1, column 9: expected REFRESH MATERIALIZED VIEW or a query after EXPLAIN, "
        "found 'DROP'"
    )


def test_rewrite_properties_are_validated() -> None:
    from sparkmv.errors import InvalidPropertyError
    from sparkmv.refresh.properties import MvProperties

    p = MvProperties.parse({"query_rewrite_consistency": "loose", "mv_rewrite_staleness_second": "60"})
    assert (p.query_rewrite_consistency, p.mv_rewrite_staleness_second) == ("LOOSE", 60)
    assert (MvProperties().query_rewrite_consistency, MvProperties().mv_rewrite_staleness_second) == ("CHECKED", None)
    with pytest.raises(InvalidPropertyError) as info:
        MvProperties.parse({"query_rewrite_consistency": "sometimes"})
    assert str(info.value) == (
        "property 'query_rewrite_consistency' must be one of CHECKED, LOOSE, DISABLE, not 'sometimes'"
    )
    with pytest.raises(InvalidPropertyError) as info:
        MvProperties.parse({"mv_rewrite_staleness_second": "-1"})
    assert str(info.value) == "property 'mv_rewrite_staleness_second' must be an integer from 0 to 315360000, not '-1'"
