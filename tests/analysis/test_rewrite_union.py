"""Partition compensation (union rewrite), pure: the union source replacing a stale MV, the
query's rollup and compensation on top of it, typed partition predicates (NULL, dates,
timestamps), and restricting base tables."""

from __future__ import annotations

import dataclasses

import pytest
from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query, partition_literal, partition_predicate, restrict_tables
from sparkmv.analysis.rewrite import ROLLUP, BaseFilter, MvCandidate, StalePartitions, rewrite_query
from sparkmv.names import ObjectName
from sparkmv.storage.partition_values import PartitionValueError

LI = ObjectName("default", "li")
SCHEMA = {LI: {"mode": "string", "month": "string", "day": "date", "ts": "timestamp_ntz", "qty": "int"}}
DEFINITION = "SELECT month, mode, sum(qty) AS q, count(*) AS n FROM li GROUP BY month, mode"
COLUMNS = (("month", "string"), ("mode", "string"), ("q", "bigint"), ("n", "bigint"), ("__smv_count", "bigint"))
STALE = StalePartitions(
    "month", "string", (None, "1995-02"), DEFINITION, (BaseFilter(LI, "month", "string", (None, "1995-02")),)
)
MV = MvCandidate(ObjectName("default", "by_month"), DEFINITION, COLUMNS, 10, STALE)


def test_rollup_runs_over_the_union_of_fresh_and_stale_partitions() -> None:
    result = rewrite_query("SELECT mode, sum(qty) AS s, count(*) AS c FROM li GROUP BY mode", [MV], SCHEMA)
    assert result.mvs == [MV.name] and result.used[0].kind == ROLLUP
    assert result.compensations == ["by_month: 2 stale partitions and consistency CHECKED: compensated from base"]
    assert result.sql == (
        "SELECT default__by_month.mode AS mode, CAST(SUM(default__by_month.q) AS BIGINT) AS s, "
        "COALESCE(SUM(default__by_month.n), 0) AS c FROM ("
        "SELECT `month`, `mode`, `q`, `n`, `__smv_count` FROM default.by_month "
        "WHERE NOT `month` IS NULL AND NOT `month` IN ('1995-02') "
        "UNION ALL "
        "SELECT CAST(`__smv_q`.`month` AS STRING) AS `month`, CAST(`__smv_q`.`mode` AS STRING) AS `mode`, "
        "CAST(`__smv_q`.`q` AS BIGINT) AS `q`, CAST(`__smv_q`.`n` AS BIGINT) AS `n`, "
        "CAST(`__smv_q`.`__smv_count` AS BIGINT) AS `__smv_count` FROM ("
        "SELECT month, mode, SUM(qty) AS q, COUNT(*) AS n, COUNT(*) AS __smv_count, COUNT(qty) AS __smv_nn_2 "
        "FROM (SELECT * FROM li WHERE month IN ('1995-02') OR month IS NULL) AS li GROUP BY month, mode"
        ") AS __smv_q WHERE `__smv_q`.`month` IN ('1995-02') OR `__smv_q`.`month` IS NULL"
        ") AS default__by_month GROUP BY default__by_month.mode"
    )


def test_exact_match_and_predicates_apply_on_top_of_the_union() -> None:
    result = rewrite_query(
        f"{DEFINITION[: DEFINITION.index(' GROUP')]} WHERE month > '1995-01' GROUP BY 1, 2", [MV], SCHEMA
    )
    assert result.mvs == [MV.name]
    assert result.sql.endswith(") AS default__by_month WHERE default__by_month.month > '1995-01'")
    assert "UNION ALL" in result.sql


def test_without_base_filters_the_base_is_read_whole() -> None:
    mv = dataclasses.replace(MV, stale=dataclasses.replace(STALE, base_filters=()))
    result = rewrite_query("SELECT mode, count(*) FROM li GROUP BY mode", [mv], SCHEMA)
    assert "FROM li GROUP BY month, mode" in result.sql and "SELECT * FROM li" not in result.sql


def test_a_stale_value_not_of_the_partition_kind_is_a_reason() -> None:
    bad = dataclasses.replace(MV, stale=dataclasses.replace(STALE, kind="date", values=("1995-02",)))
    result = rewrite_query("SELECT mode, count(*) FROM li GROUP BY mode", [bad], SCHEMA)
    assert not result.rewritten
    assert result.reasons == [
        "by_month: its stale partitions cannot be compensated: '1995-02' is not a date (yyyy-MM-dd)"
    ]


@pytest.mark.parametrize(
    ("values", "kind", "exclude", "sql"),
    [
        (["1995-02-01"], "date", False, "c IN (CAST('1995-02-01' AS DATE))"),
        (["1995-02-01 10:00:00.5"], "timestamp", False, "c IN (CAST('1995-02-01 10:00:00.5' AS TIMESTAMP_NTZ))"),
        (
            ["1995-02-01T00:00:00+01:00"],
            "timestamptz",
            True,
            "c IS NULL OR NOT c IN (CAST('1995-01-31 23:00:00' AS TIMESTAMP))",
        ),
        ([None], "date", False, "c IS NULL"),
        ([None], "date", True, "NOT c IS NULL"),
        (["07", None], "integer", True, "NOT c IS NULL AND NOT c IN (7)"),
        (["o'k"], "string", False, "c IN ('o\\'k')"),
        (["false"], "boolean", False, "c IN (FALSE)"),
        ([], "string", False, "FALSE"),
        ([], "string", True, "TRUE"),
    ],
)
def test_partition_predicates_are_typed(values: list[str | None], kind: str, exclude: bool, sql: str) -> None:
    assert partition_predicate(exp.column("c"), values, kind, exclude).sql(DIALECT) == sql


def test_partition_literal_refuses_a_value_of_another_kind() -> None:
    with pytest.raises(PartitionValueError, match="is not an integer"):
        partition_literal("x", "integer")


def test_restrict_tables_keeps_aliases_and_every_reference() -> None:
    query = parse_query("SELECT a.x FROM li AS a JOIN li ON a.k = li.k JOIN other o ON o.k = a.k")
    out = restrict_tables(query, {LI: exp.column("month").eq(exp.Literal.string("m"))}).sql(DIALECT)
    assert out == (
        "SELECT a.x FROM (SELECT * FROM li WHERE month = 'm') AS a "
        "JOIN (SELECT * FROM li WHERE month = 'm') AS li ON a.k = li.k JOIN other AS o ON o.k = a.k"
    )
