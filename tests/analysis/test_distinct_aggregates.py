"""DISTINCT aggregates over an inner GROUP BY (:mod:`sparkmv.analysis.distinct_aggregates`)."""

from __future__ import annotations

import pytest

from sparkmv.analysis.distinct_aggregates import split_distinct_aggregates
from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.query import parse_query


def test_a_global_distinct_count_reads_a_stage_grouped_by_its_argument() -> None:
    sql = "SELECT count(DISTINCT o) + 1 AS n, max(x) AS m, count(y) AS c FROM t JOIN u ON t.k = u.k WHERE t.z > 0"
    split = split_distinct_aggregates(parse_query(sql))
    assert split is not None
    assert split.sql() == (
        "SELECT COUNT(__smv_dist.__smv_d) + 1 AS n, MAX(__smv_dist.__smv_a1) AS m, "
        "COALESCE(SUM(__smv_dist.__smv_a2), 0) AS c FROM (SELECT o AS __smv_d, MAX(x) AS __smv_a1, "
        "COUNT(y) AS __smv_a2 FROM t JOIN u ON t.k = u.k WHERE t.z > 0 GROUP BY o) AS __smv_dist"
    )
    analysis = analyze_incremental(parse_query(sql))
    assert analysis.reason is None
    assert [s.analysis.technique for s in analysis.stages] == ["affected-key recomputation"]


def test_a_cte_stays_above_the_stage() -> None:
    split = split_distinct_aggregates(parse_query("WITH w AS (SELECT k FROM t) SELECT count(DISTINCT k) AS n FROM w"))
    assert split is not None and split.sql() == (
        "WITH w AS (SELECT k FROM t) SELECT COUNT(__smv_dist.__smv_d) AS n FROM "
        "(SELECT k AS __smv_d FROM w GROUP BY k) AS __smv_dist"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(DISTINCT a), count(DISTINCT b) FROM t",  # two arguments
        "SELECT count(DISTINCT a), avg(b) FROM t",  # avg's type would change
        "SELECT sum(DISTINCT a) FROM t",
        "SELECT k, count(DISTINCT a) FROM t GROUP BY k HAVING count(*) > 1",
        "SELECT v, count(DISTINCT a) FROM t GROUP BY k",  # v is not a key
        "SELECT k + 1 AS j, count(DISTINCT a) FROM t GROUP BY j",  # an output alias
        "SELECT count(DISTINCT a) OVER () FROM t",
        "SELECT count(*) FROM t",
    ],
)
def test_other_shapes_are_left_alone(sql: str) -> None:
    assert split_distinct_aggregates(parse_query(sql)) is None
