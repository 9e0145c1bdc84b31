"""Outer joins a WHERE condition makes inner (:mod:`sparkmv.analysis.null_rejection`)."""

from __future__ import annotations

import pytest

from sparkmv.analysis.null_rejection import simplify_outer_joins
from sparkmv.analysis.query import parse_query


@pytest.mark.parametrize(
    ("where", "joins"),
    [
        ("b.x = 1", "a JOIN b ON a.k = b.k"),
        ("b.x + 1 > a.y", "a JOIN b ON a.k = b.k"),
        ("NOT b.x IS NULL", "a JOIN b ON a.k = b.k"),
        ("b.x IN (1, 2) AND a.y > 0", "a JOIN b ON a.k = b.k"),
        ("b.x BETWEEN 1 AND 2", "a JOIN b ON a.k = b.k"),
        ("-b.x LIKE '1%'", "a JOIN b ON a.k = b.k"),
    ],
)
def test_a_null_rejecting_conjunct_makes_the_left_join_inner(where: str, joins: str) -> None:
    query = parse_query(f"SELECT a.k FROM a LEFT OUTER JOIN b ON a.k = b.k WHERE {where}")
    assert simplify_outer_joins(query).sql() == f"SELECT a.k FROM {joins} WHERE {where}"


@pytest.mark.parametrize(
    "where",
    [
        "b.x IS NULL",
        "coalesce(b.x, 0) = 0",
        "b.x = 1 OR a.y = 2",
        "CASE WHEN b.x IS NULL THEN 1 END = 1",
        "x = 1",  # unqualified: names no source
        "a.y = 1",  # the preserved side
    ],
)
def test_a_condition_padded_rows_may_pass_keeps_the_outer_join(where: str) -> None:
    query = parse_query(f"SELECT a.k FROM a LEFT JOIN b ON a.k = b.k WHERE {where}")
    assert simplify_outer_joins(query) is query


@pytest.mark.parametrize(
    ("side", "where", "kind"),
    [
        ("FULL", "b.x = 1", "RIGHT JOIN"),
        ("FULL", "a.x = 1", "LEFT JOIN"),
        ("FULL", "a.x = b.x", "JOIN"),
        ("RIGHT", "a.x = 1", "JOIN"),
        ("RIGHT", "b.x = 1", "RIGHT JOIN"),
    ],
)
def test_full_and_right_joins_drop_the_rejected_side(side: str, where: str, kind: str) -> None:
    query = parse_query(f"SELECT 1 FROM a {side} JOIN b ON a.k = b.k WHERE {where}")
    assert simplify_outer_joins(query).sql() == f"SELECT 1 FROM a {kind} b ON a.k = b.k WHERE {where}"


def test_a_rejected_source_before_a_right_join_and_in_a_derived_table() -> None:
    query = parse_query(
        "SELECT t.k FROM (SELECT a.k FROM a LEFT JOIN b ON a.k = b.k LEFT JOIN c ON b.k = c.k RIGHT JOIN d "
        "ON d.k = a.k WHERE b.v > 0) AS t"
    )
    assert simplify_outer_joins(query).sql() == (
        "SELECT t.k FROM (SELECT a.k FROM a JOIN b ON a.k = b.k LEFT JOIN c ON b.k = c.k JOIN d "
        "ON d.k = a.k WHERE b.v > 0) AS t"
    )
