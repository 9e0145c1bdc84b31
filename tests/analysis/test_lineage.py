"""Partition lineage (no Spark): every transform, CTEs, subqueries, joins, UNION ALL and
the fallbacks with their reasons."""

from __future__ import annotations

import pytest

from sparkmv.analysis.lineage import TIME_SUFFIX, Lineage, Transform, partition_lineage
from sparkmv.analysis.query import parse_query

SCHEMA = {
    "default.f": {"d": "string", "x": "int", "k": "int"},
    "default.g": {"d": "string", "x": "int"},
    "default.dim": {"k": "int", "name": "string"},
}
PARTS = {"default.f": ["d"], "default.g": ["d"], "default.dim": []}


def trace(sql: str, column: str = "m") -> Lineage:
    return partition_lineage(parse_query(sql), column, SCHEMA, PARTS)


@pytest.mark.parametrize(
    ("sql", "column", "transform", "value"),
    [
        ("SELECT d, sum(x) AS s FROM f GROUP BY d", "d", Transform("identity"), "1995-02-14"),
        ("SELECT d AS day, sum(x) AS s FROM f GROUP BY d", "day", Transform("identity"), "1995-02-14"),
        (
            "SELECT date_format(d, 'yyyy-MM') AS m, sum(x) AS s FROM f GROUP BY 1",
            "m",
            Transform("prefix", 7),
            "1995-02",
        ),
        ("SELECT date_format(d, 'yyyy') AS m FROM f", "m", Transform("prefix", 4), "1995"),
        ("SELECT date_format(cast(d AS date), 'yyyy-MM') AS m FROM f", "m", Transform("prefix", 7), "1995-02"),
        ("SELECT substr(d, 1, 7) AS m FROM f", "m", Transform("prefix", 7), "1995-02"),
        ("SELECT substring(d, 1, 4) AS m FROM f", "m", Transform("prefix", 4), "1995"),
        ("SELECT left(d, 7) AS m FROM f", "m", Transform("prefix", 7), "1995-02"),
        ("SELECT trunc(d, 'MM') AS m FROM f", "m", Transform("trunc_month"), "1995-02-01"),
        ("SELECT trunc(d, 'YEAR') AS m FROM f", "m", Transform("trunc_year"), "1995-01-01"),
        ("SELECT cast(date_trunc('MONTH', d) AS date) AS m FROM f", "m", Transform("trunc_month"), "1995-02-01"),
        (
            "SELECT date_trunc('month', d) AS m FROM f",
            "m",
            Transform("trunc_month", suffix=TIME_SUFFIX),
            "1995-02-01 00:00:00",
        ),
        (
            "SELECT date_trunc('year', d) AS m FROM f",
            "m",
            Transform("trunc_year", suffix=TIME_SUFFIX),
            "1995-01-01 00:00:00",
        ),
        ("SELECT date_trunc('day', d) AS m FROM f", "m", Transform("prefix", 10, TIME_SUFFIX), "1995-02-14 00:00:00"),
        ("SELECT cast(d AS date) AS m FROM f", "m", Transform("prefix", 10), "1995-02-14"),
    ],
)
def test_every_transform(sql: str, column: str, transform: Transform, value: str) -> None:
    lin = trace(sql, column)
    assert lin.reason is None
    mapping = lin.mappings["default.f"]
    assert (mapping.base_column, mapping.transform) == ("d", transform)
    assert mapping.transform.apply("1995-02-14") == value
    assert mapping.transform.apply(None) is None


def test_through_cte_and_subquery() -> None:
    cte = trace("WITH a AS (SELECT d AS dd, x FROM f) SELECT substr(dd, 1, 7) AS m, sum(x) AS s FROM a GROUP BY 1")
    assert cte.mappings["default.f"].transform == Transform("prefix", 7)
    sub = trace("SELECT m, sum(x) AS s FROM (SELECT date_format(d, 'yyyy-MM') AS m, x FROM f) t GROUP BY m")
    assert sub.mappings["default.f"].transform == Transform("prefix", 7)
    nested = trace("SELECT substr(m, 1, 4) AS y FROM (SELECT substr(d, 1, 7) AS m FROM f) t", "y")
    assert nested.mappings["default.f"].transform == Transform("prefix", 4)


def test_join_with_unpartitioned_dimension() -> None:
    lin = trace("SELECT f.d, dim.name, sum(f.x) AS s FROM f JOIN dim ON f.k = dim.k GROUP BY 1, 2", "d")
    assert set(lin.mappings) == {"default.f"}  # dim is a non-reference table
    assert lin.known and lin.reason is None


def test_union_all_maps_each_branch() -> None:
    same = trace("SELECT d, x FROM f UNION ALL SELECT d, x FROM g", "d")
    assert {t: m.transform for t, m in same.mappings.items()} == {
        "default.f": Transform("identity"),
        "default.g": Transform("identity"),
    }
    mixed = trace("SELECT substr(d, 1, 7) AS m, x FROM f UNION ALL SELECT d AS m, x FROM g")
    assert mixed.mappings["default.f"].transform == Transform("prefix", 7)
    assert mixed.mappings["default.g"].transform == Transform("identity")


def test_many_to_many_falls_back_with_reason() -> None:
    lin = trace("SELECT d FROM f UNION ALL SELECT substr(d, 1, 4) AS d FROM f", "d")
    assert not lin.known
    assert lin.reason is not None and "more than one way" in lin.reason


@pytest.mark.parametrize(
    ("sql", "column", "fragment"),
    [
        ("SELECT x AS m, sum(k) AS s FROM f GROUP BY x", "m", "not its partition column"),
        ("SELECT concat(d, 'x') AS m FROM f", "m", "unsupported transform"),
        ("SELECT date_format(d, 'MM') AS m FROM f", "m", "unsupported transform"),
        ("SELECT substr(d, 2, 4) AS m FROM f", "m", "unsupported transform"),
        ("SELECT d FROM f", "nope", "cannot trace"),
    ],
)
def test_unknown_lineage_has_a_reason(sql: str, column: str, fragment: str) -> None:
    lin = trace(sql, column)
    assert not lin.known
    assert lin.reason is not None and fragment in lin.reason


def test_partial_union_keeps_known_branch_and_reason() -> None:
    lin = trace("SELECT d AS m FROM f UNION ALL SELECT cast(x AS string) AS m FROM g")
    assert set(lin.mappings) == {"default.f"}
    assert lin.reason is not None and "default.g" in lin.reason


def test_describe() -> None:
    assert Transform("prefix", 7).describe("d") == "substr(d, 1, 7)"
    assert Transform("trunc_month").describe("d") == "date_trunc('month', d)"
    assert "TIMESTAMP" in Transform("trunc_year", suffix=TIME_SUFFIX).describe("d")
    assert Transform("identity").describe("d") == "d"


def test_week_quarter_hour_to_date_and_join_equivalence() -> None:
    from sparkmv.analysis.lineage import partition_lineage
    from sparkmv.analysis.query import parse_query

    schema = {"default.t": {"dt": "date", "ts": "timestamp_ntz", "k": "int"}, "default.u": {"dt": "date", "v": "int"}}
    parts = {"default.t": ["dt"], "default.u": []}

    def mapped(sql: str, column: str, partitions: dict[str, list[str]] = parts) -> dict[str, str]:
        lin = partition_lineage(parse_query(sql), column, schema, partitions)
        return {t: m.transform.apply(v) or "" for t, m in lin.mappings.items() for v in ["2024-05-30"]}

    assert mapped("SELECT date_trunc('WEEK', dt) AS w FROM t", "w") == {"default.t": "2024-05-27 00:00:00"}
    assert mapped("SELECT date_trunc('QUARTER', dt) AS q FROM t", "q") == {"default.t": "2024-04-01 00:00:00"}
    assert mapped("SELECT to_date(dt) AS d FROM t", "d") == {"default.t": "2024-05-30"}
    by_ts = {"default.t": ["ts"], "default.u": []}
    lin = partition_lineage(parse_query("SELECT date_trunc('HOUR', ts) AS h FROM t"), "h", schema, by_ts)
    assert lin.mappings["default.t"].transform.apply("2024-05-30 10:42:00") == "2024-05-30 10:00:00"
    # u.dt = t.dt in an inner join: t is a reference table although the MV selects u.dt.
    joined = "SELECT u.dt, count(*) AS n FROM t JOIN u ON t.dt = u.dt GROUP BY u.dt"
    lin = partition_lineage(parse_query(joined), "dt", schema, parts)
    assert set(lin.mappings) == {"default.t"} and lin.complete and lin.reason is None
    # Not through an outer join, and not through an OR.
    left = "SELECT u.dt, count(*) AS n FROM t LEFT JOIN u ON t.dt = u.dt GROUP BY u.dt"
    assert partition_lineage(parse_query(left), "dt", schema, parts).mappings == {}
    either = "SELECT u.dt, count(*) AS n FROM t JOIN u ON t.dt = u.dt OR t.k = u.v GROUP BY u.dt"
    assert partition_lineage(parse_query(either), "dt", schema, parts).mappings == {}
    # Two partition levels: the MV partition may use either column.
    two = {"default.t": ["k", "dt"], "default.u": []}
    lin = partition_lineage(parse_query("SELECT dt, count(*) AS n FROM t GROUP BY dt"), "dt", schema, two)
    assert lin.mappings["default.t"].base_column == "dt" and lin.complete


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT a.d AS m, sum(b.x) AS s FROM f a JOIN f b ON a.k = b.k GROUP BY a.d",
        "SELECT a.d AS m, b.s FROM f a JOIN (SELECT k, sum(x) AS s FROM f GROUP BY k) b ON a.k = b.k",
        "WITH c AS (SELECT d, k, x FROM f) SELECT a.d AS m, b.x FROM c a JOIN c b ON a.k = b.k",
    ],
)
def test_a_self_joined_table_is_not_a_reference_table(sql: str) -> None:
    # Restricting both reads to the changed partition would drop the rows the other read
    # takes from other partitions (found by mutation testing).
    lin = trace(sql)
    assert "default.f" not in lin.mappings
    assert lin.reason == "table default.f is read more than once in one query branch (a self-join)"
    assert not lin.complete


def test_a_table_in_two_union_branches_still_maps() -> None:
    lin = trace("SELECT d AS m, x FROM f UNION ALL SELECT d AS m, x FROM f WHERE x > 0")
    assert lin.mappings["default.f"].transform == Transform("identity")
    assert lin.reason is None
