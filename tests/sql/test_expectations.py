"""Expectations of ``CREATE MATERIALIZED VIEW name (CONSTRAINT c EXPECT (...) [ON VIOLATION ...], ...)``:
the parsed list exactly, the clause text round-tripping through the parser, errors with positions."""

from __future__ import annotations

import pytest

from sparkmv.analysis.expectations import Expectation
from sparkmv.errors import ParseError
from sparkmv.names import ObjectName
from sparkmv.sql.parser import parse_statement
from sparkmv.sql.statements import CreateMaterializedView, RefreshScheme


def test_constraint_list_after_the_name() -> None:
    stmt = parse_statement(
        "create or replace materialized view sales.mv (\n"
        "  constraint valid_id expect (id IS NOT NULL) on violation drop row,\n"
        "  CONSTRAINT `positive amount` EXPECT (amount > 0 AND coalesce(tag, ',)') IN ('a', (('b'))))\n"
        "    ON VIOLATION FAIL UPDATE,\n"
        "  Constraint Counted Expect (  n >= 0  )\n"
        ") PARTITION BY m REFRESH ASYNC PROPERTIES ('k' = 'v') AS SELECT id, amount, tag, n, m FROM t"
    )
    assert stmt == CreateMaterializedView(
        name=ObjectName("sales", "mv"),
        query="SELECT id, amount, tag, n, m FROM t",
        partition_by="m",
        refresh=RefreshScheme("ASYNC", None, None, "ASYNC"),
        properties={"k": "v"},
        or_replace=True,
        expectations=(
            Expectation("valid_id", "id IS NOT NULL", "drop"),
            Expectation("positive amount", "amount > 0 AND coalesce(tag, ',)') IN ('a', (('b')))", "fail"),
            Expectation("Counted", "n >= 0", "warn"),
        ),
    )


def test_no_list_means_no_expectations() -> None:
    stmt = parse_statement("CREATE MATERIALIZED VIEW IF NOT EXISTS mv REFRESH DEFERRED AS SELECT 1 AS a")
    assert isinstance(stmt, CreateMaterializedView)
    assert (stmt.expectations, stmt.if_not_exists, stmt.deferred) == ((), True, True)


@pytest.mark.parametrize(
    "expectation",
    [
        Expectation("ok", "x > 0", "fail"),
        Expectation("a b`c", "f(x, ')') = 'y'", "drop"),
        Expectation("commented", "x > 0 -- positive", "warn"),
        Expectation("multi_line", "x > 0\n  AND y IS NOT NULL", "warn"),
    ],
)
def test_clause_round_trips(expectation: Expectation) -> None:
    stmt = parse_statement(f"CREATE MATERIALIZED VIEW mv ({expectation.clause}, {expectation.clause}) AS SELECT 1")
    assert isinstance(stmt, CreateMaterializedView)
    assert stmt.expectations == (expectation, expectation)
    assert stmt.query == "SELECT 1"


MV = "CREATE MATERIALIZED VIEW mv "


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            MV + "(CONSTRAINT c EXPECT (x > 0) ON VIOLATION DELETE) AS SELECT 1",
            "cannot parse SQL at line 1, column 71: expected DROP ROW or FAIL UPDATE after ON VIOLATION "
            "(CONSTRAINT c), found 'DELETE'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0) ON VIOLATION) AS SELECT 1",
            "cannot parse SQL at line 1, column 70: expected DROP ROW or FAIL UPDATE after ON VIOLATION "
            "(CONSTRAINT c), found ')'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0) ON DROP ROW) AS SELECT 1",
            "cannot parse SQL at line 1, column 61: expected VIOLATION after ON (CONSTRAINT c), found 'DROP'",
        ),
        (
            MV + "(CONSTRAINT c (x > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 43: expected EXPECT after CONSTRAINT c "
            "(sparkmv's constraints are expectations), found '('",
        ),
        (
            MV + "(CONSTRAINT c CHECK (x > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 43: expected EXPECT after CONSTRAINT c "
            "(sparkmv's constraints are expectations), found 'CHECK'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT x > 0) AS SELECT 1",
            "cannot parse SQL at line 1, column 50: expected ( after EXPECT "
            "(the condition of CONSTRAINT c is written in parentheses), found 'x'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0 AS SELECT 1",
            "cannot parse SQL at line 1, column 50: the ( of CONSTRAINT c EXPECT is never closed",
        ),
        (
            MV + "(CONSTRAINT c EXPECT ( )) AS SELECT 1",
            "cannot parse SQL at line 1, column 52: expected a condition inside EXPECT ( ) of CONSTRAINT c, found ')'",
        ),
        (
            MV + "(CONSTRAINT EXPECT (x > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 41: expected a name after CONSTRAINT, found 'EXPECT'",
        ),
        (
            MV + "(CONSTRAINT 'c' EXPECT (x > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 41: expected a name after CONSTRAINT, found \"'c'\"",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0) CONSTRAINT d EXPECT (y > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 58: expected , or ) after CONSTRAINT c, found 'CONSTRAINT'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0),) AS SELECT 1",
            "cannot parse SQL at line 1, column 58: expected CONSTRAINT (the list after a materialized view's "
            "name holds its expectations), found ')'",
        ),
        (
            MV + "(id INT) AS SELECT 1",
            "cannot parse SQL at line 1, column 30: expected CONSTRAINT (the list after a materialized view's "
            "name holds its expectations), found 'id'",
        ),
        (
            MV + "(CONSTRAINT c EXPECT (x > 0)",
            "cannot parse SQL at line 1, column 57: expected , or ) after CONSTRAINT c, found end of statement",
        ),
        (
            MV + "PARTITION BY m (CONSTRAINT c EXPECT (x > 0)) AS SELECT 1",
            "cannot parse SQL at line 1, column 44: expected PARTITION BY, REFRESH, PROPERTIES or AS, found '('",
        ),
        (
            MV + "(\n  CONSTRAINT c EXPECT (x > 0),\n  CONSTRAINT d EXPECT (y) ON VIOLATION DELETE\n) AS SELECT 1",
            "cannot parse SQL at line 3, column 40: expected DROP ROW or FAIL UPDATE after ON VIOLATION "
            "(CONSTRAINT d), found 'DELETE'",
        ),
    ],
)
def test_bad_constraints(sql: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_statement(sql)
    assert str(info.value) == message
