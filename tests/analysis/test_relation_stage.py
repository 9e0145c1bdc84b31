"""A global aggregate over an outer join reading the join as a stage
(:mod:`sparkmv.analysis.relation_stage`)."""

from __future__ import annotations

import pytest

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.relation_stage import split_outer_relation


def test_counts_and_sums_are_weighted_by_the_stage_rows_multiplicity() -> None:
    sql = "SELECT count(*) AS n, sum(b.v) AS s, min(a.x) AS m FROM a LEFT JOIN b ON a.k = b.k WHERE a.x > 0"
    split = split_outer_relation(parse_query(sql))
    assert split is not None and split.sql() == (
        "SELECT COALESCE(SUM(__smv_rel.__smv_weight), 0) AS n, SUM((__smv_rel.__smv_c0) * __smv_rel.__smv_weight) "
        "AS s, MIN(__smv_rel.__smv_c1) AS m FROM (SELECT b.v AS __smv_c0, a.x AS __smv_c1, COUNT(*) AS __smv_weight "
        "FROM a LEFT JOIN b ON a.k = b.k WHERE a.x > 0 GROUP BY b.v, a.x) AS __smv_rel"
    )
    analysis = analyze_incremental(parse_query(sql))
    assert analysis.reason is None and analysis.technique == "delta rules"
    assert [s.analysis.technique for s in analysis.stages] == ["affected-key recomputation"]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM a JOIN b ON a.k = b.k",  # no outer join
        "SELECT a.k, count(*) FROM a LEFT JOIN b ON a.k = b.k GROUP BY a.k",  # grouped: keyed as written
        "SELECT avg(b.v) FROM a LEFT JOIN b ON a.k = b.k",  # avg is not weighted
        "SELECT count(DISTINCT b.v) FROM a LEFT JOIN b ON a.k = b.k",
        "SELECT sum(v) FROM a LEFT JOIN b ON a.k = b.k",  # unqualified
        "SELECT sum(b.v) + a.x FROM a LEFT JOIN b ON a.k = b.k",  # a column outside the aggregate
    ],
)
def test_other_shapes_are_left_alone(sql: str) -> None:
    assert split_outer_relation(parse_query(sql)) is None
