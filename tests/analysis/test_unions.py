"""``UNION`` (distinct) maintained by affected-key recomputation of the DISTINCT over its
``UNION ALL`` (no Spark): the rewritten query, the key query per branch, and the unions
left refused with their reason."""

from __future__ import annotations

import pytest

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.keyed import inline_ctes
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.unions import distinct_union

WHY = "is not incrementally maintainable"


def test_union_is_the_distinct_of_its_union_all() -> None:
    sql = "SELECT f.k, f.s AS label FROM fact AS f WHERE f.v > 0 UNION SELECT d.k, d.label FROM dim AS d"
    a = analyze_incremental(parse_query(sql))
    assert (a.reason, a.technique, a.state_columns) == (None, "affected-key recomputation", ())
    assert [(c.name, c.role) for c in a.columns] == [("k", "group"), ("label", "group")]
    assert a.augmented_sql == (
        "SELECT DISTINCT k, label FROM (SELECT f.k, f.s AS label FROM fact AS f WHERE f.v > 0 UNION ALL "
        "SELECT d.k, d.label FROM dim AS d) AS __smv_union"
    )
    assert a.keyed is not None and a.keyed.keys == ("k", "label")
    assert a.keyed.branch_terms == (
        "SELECT k AS k, label AS label FROM (SELECT f.k, f.s AS label FROM fact AS f WHERE f.v > 0) AS __smv_union",
        "SELECT k AS k, label AS label FROM (SELECT d.k, d.label FROM dim AS d) AS __smv_union",
    )
    assert maintenance_plan(a)[3:] == [f"    union branch {i}: {sql}" for i, sql in enumerate(a.keyed.branch_terms, 1)]


@pytest.mark.parametrize(
    ("sql", "rewritten"),
    [
        # Nested unions flatten under the top UNION, UNION ALL ones too; CTEs are inlined.
        (
            "WITH c AS (SELECT a FROM t) SELECT a FROM c UNION ALL SELECT b FROM u UNION SELECT a FROM v",
            "SELECT DISTINCT a FROM (SELECT a FROM (SELECT a FROM t) AS c UNION ALL SELECT b FROM u UNION ALL "
            "SELECT a FROM v) AS __smv_union",
        ),
        (
            "SELECT a AS `x y` FROM t UNION (SELECT b FROM u UNION SELECT c FROM v)",
            "SELECT DISTINCT `x y` FROM (SELECT a AS `x y` FROM t UNION ALL SELECT b FROM u UNION ALL "
            "SELECT c FROM v) AS __smv_union",
        ),
    ],
)
def test_rewritten_unions(sql: str, rewritten: str) -> None:
    inlined = inline_ctes(parse_query(sql))
    assert not isinstance(inlined, str)
    out = distinct_union(inlined)
    assert out is not None and out.sql("spark") == rewritten


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a FROM t UNION ALL SELECT a FROM u",  # the delta rules' own
        "SELECT a FROM t INTERSECT SELECT a FROM u",
        "SELECT a FROM t UNION SELECT a FROM u ORDER BY a",
        "SELECT a FROM t UNION (SELECT a FROM u LIMIT 2)",
        "SELECT * FROM t UNION SELECT * FROM u",
        "SELECT a + 1 FROM t UNION SELECT a FROM u",  # the first branch's name is Spark's own
    ],
)
def test_unions_not_rewritten(sql: str) -> None:
    assert distinct_union(parse_query(sql)) is None


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "SELECT a FROM t UNION SELECT max(b) FROM u",
            f"max(b) {WHY}: an aggregate inside the grouped relation is not maintained",
        ),
        ("SELECT a FROM t UNION SELECT a FROM u LIMIT 3", f"UNION {WHY}: only UNION ALL is maintained"),
        (
            "SELECT a, b AS a FROM t UNION SELECT a, b FROM u",
            f"SELECT DISTINCT a, a FROM (SELECT a, b AS a FROM t "
            f"UNION ALL SELECT a, b FROM u) AS __smv_union {WHY}: output column names must be distinct",
        ),
    ],
)
def test_unions_refused(sql: str, reason: str) -> None:
    assert analyze_incremental(parse_query(sql)).reason == reason


def test_a_grouped_union_all_touches_keys_per_branch() -> None:
    a = analyze_incremental(
        parse_query("SELECT k, count(*) AS n FROM (SELECT k FROM t UNION ALL SELECT k FROM u) s GROUP BY k")
    )
    assert a.technique == "affected-key recomputation" and a.keyed is not None
    assert a.keyed.branch_terms == (
        "SELECT k AS k FROM (SELECT k FROM t) AS s",
        "SELECT k AS k FROM (SELECT k FROM u) AS s",
    )
