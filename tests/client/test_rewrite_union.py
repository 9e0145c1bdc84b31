"""Partition compensation (union rewrite) on Spark: with stale partitions and consistency
CHECKED, a rewrite reads the fresh partitions from the MV and computes the stale ones from
the base, UNION ALL; its result equals the query over the base tables (and DuckDB's over the
same files). LOOSE reads the MV as it is; a change in a non-reference table is not
compensated."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.client.client import Client
from sparkmv.client.queries import run_query
from sparkmv.names import ObjectName
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

NULL_PART = "__HIVE_DEFAULT_PARTITION__"
BY_MONTH = """SELECT l_month, l_mode, sum(l_qty) AS q, count(*) AS n, avg(l_price) AS p, max(l_day) AS last_day
FROM li GROUP BY l_month, l_mode"""
EV_MONTH = "SELECT trunc(d, 'MM') AS m, k, sum(v) AS s, count(*) AS n FROM ev GROUP BY trunc(d, 'MM'), k"
SEG = "SELECT o_month, c_seg, count(*) AS n FROM ord JOIN cust ON c_key = o_cust GROUP BY o_month, c_seg"
UNPART = "SELECT l_mode, count(*) AS n FROM li GROUP BY l_mode"
COMPENSATED = "stale partitions and consistency CHECKED: compensated from base"

# Queries answered by by_month: exact match, rollups (the aggregate runs over the union),
# a predicate on the partition column, AVG from the state columns, NULL keys, HAVING/ORDER BY.
MONTH_QUERIES = [
    BY_MONTH,
    "SELECT l_mode, sum(l_qty), count(*) FROM li GROUP BY l_mode",
    "SELECT l_month, avg(l_price) AS a FROM li GROUP BY l_month ORDER BY l_month",
    "SELECT count(*), sum(l_qty), max(l_day) FROM li",
    "SELECT l_mode, sum(l_qty) FROM li WHERE l_month IS NULL OR l_month >= '1995-02' GROUP BY l_mode",
    "SELECT l_month, count(*) AS n FROM li GROUP BY l_month HAVING count(*) > 2",
]


def _li(month: str | None, n: int, start: int) -> dict[str, Any]:
    year, mon = (1995, int(month[5:])) if month else (1995, 6)
    return {
        "l_key": list(range(start, start + n)),
        "l_qty": pa.array([Decimal(start + i) / 4 for i in range(n)], pa.decimal128(15, 2)),
        "l_price": [float((start + i) % 7) + 0.5 for i in range(n)],
        "l_mode": [["AIR", "MAIL", None][(start + i) % 3] for i in range(n)],
        "l_day": [dt.date(year, mon, 1 + (start + i) % 27) for i in range(n)],
    }


def _ev(day: str, n: int, start: int) -> dict[str, Any]:
    return {"k": [["a", "b", None][(start + i) % 3] for i in range(n)], "v": [start + i for i in range(n)]}


@pytest.fixture(scope="module")
def uc(spark, tmp_path_factory: pytest.TempPathFactory) -> Any:  # type: ignore[no-untyped-def]
    """A client (rewrite on) over li (by month, with a NULL partition), ev (by DATE day),
    ord (by month) and cust (unpartitioned), with the MVs built."""
    root = tmp_path_factory.mktemp("union")
    for i, month in enumerate(["1995-01", "1995-02", "1995-03", NULL_PART]):
        write_partition(root / "li", "l_month", month, _li(None if month == NULL_PART else month, 6, 10 * i))
    for i, day in enumerate(["1995-01-05", "1995-01-20", "1995-02-03", "1995-03-09"]):
        write_partition(root / "ev", "d", day, _ev(day, 4, 10 * i))
    for i, month in enumerate(["1995-01", "1995-02"]):
        write_partition(root / "ord", "o_month", month, {"o_key": [i * 10, i * 10 + 1], "o_cust": [1, 2]})
    (root / "cust").mkdir()
    pq.write_table(pa.table({"c_key": [1, 2], "c_seg": ["AUTO", "HOME"]}), root / "cust" / "c.parquet")
    client = Client(home=root / "home", spark=spark)
    for name in ("li", "ev", "ord", "cust"):
        client.sql(f"CREATE EXTERNAL TABLE {name} USING parquet LOCATION '{root / name}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_month PARTITION BY l_month AS {BY_MONTH}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW ev_month PARTITION BY m AS {EV_MONTH}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW seg PARTITION BY o_month AS {SEG}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW unpart AS {UNPART}", raise_on_failure=True)
    client.root = root  # type: ignore[attr-defined]
    yield client
    client.close()


def _rows(df: Any) -> list[tuple[Any, ...]]:
    rows = [tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in r) for r in df.collect()]
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))


def _types(df: Any) -> list[str]:
    return [f.dataType.simpleString() for f in df.schema.fields]


def _same_as_base(client: Client, sql: str) -> None:
    through, base = client.sql(sql), run_query(client.runtime, sql)
    assert _types(through) == _types(base)
    assert _rows(through) == _rows(base), sql


def test_fresh_mvs_are_read_as_they_are(uc: Client) -> None:
    result = uc.rewrite(MONTH_QUERIES[1])
    assert result.mvs == [ObjectName("default", "by_month")]
    assert "UNION ALL" not in result.sql and result.compensations == []


def test_stale_partitions_checked_are_compensated_from_base(uc: Client) -> None:
    loose_before = _rows(uc.sql(MONTH_QUERIES[1]))
    root: Path = uc.root  # type: ignore[attr-defined]
    write_partition(root / "li", "l_month", "1995-02", _li("1995-02", 3, 500), file="part-1.parquet")
    write_partition(root / "li", "l_month", NULL_PART, _li(None, 2, 600), file="part-1.parquet")
    write_partition(root / "li", "l_month", "1995-04", _li("1995-04", 2, 700))  # a new partition
    for sql in MONTH_QUERIES:
        result = uc.rewrite(sql)
        assert result.mvs == [ObjectName("default", "by_month")], result.reasons
        assert result.used[0].compensation == f"3 {COMPENSATED}"
        assert "UNION ALL" in result.sql and "FROM default.by_month" in result.sql
        assert "FROM (SELECT * FROM li WHERE l_month IN ('1995-02', '1995-04') OR l_month IS NULL)" in result.sql
        _same_as_base(uc, sql)
    explain = uc.execute(f"EXPLAIN {MONTH_QUERIES[1]}").message or ""
    assert f"partition compensation:\n  by_month: 3 {COMPENSATED}" in explain
    # DuckDB over the same files agrees (an engine sparkmv does not use).
    with duckdb.connect() as con:
        oracle = con.execute(
            f"SELECT l_mode, sum(l_qty), count(*) FROM read_parquet('{root}/li/*/*.parquet', hive_partitioning=true) "
            "GROUP BY l_mode"
        ).fetchall()
    assert _rows(uc.sql(MONTH_QUERIES[1])) == sorted(
        (tuple(r) for r in oracle), key=lambda r: tuple((v is None, str(v)) for v in r)
    )
    # LOOSE: the MV's rows as they are (documented), stale or not.
    uc.sql("ALTER MATERIALIZED VIEW by_month SET PROPERTIES ('query_rewrite_consistency' = 'LOOSE')")
    try:
        loose = uc.rewrite(MONTH_QUERIES[1])
        assert loose.mvs == [ObjectName("default", "by_month")] and "UNION ALL" not in loose.sql
        assert _rows(uc.sql(MONTH_QUERIES[1])) == loose_before != _rows(run_query(uc.runtime, MONTH_QUERIES[1]))
    finally:
        uc.sql("ALTER MATERIALIZED VIEW by_month SET PROPERTIES ('query_rewrite_consistency' = 'CHECKED')")
    uc.sql("REFRESH MATERIALIZED VIEW by_month")
    assert "UNION ALL" not in uc.rewrite(MONTH_QUERIES[1]).sql  # fresh again


def test_date_partitions_are_compensated_with_typed_literals(uc: Client) -> None:
    root: Path = uc.root  # type: ignore[attr-defined]
    write_partition(root / "ev", "d", "1995-02-03", _ev("1995-02-03", 3, 100), file="part-1.parquet")
    write_partition(root / "ev", "d", "1995-04-11", _ev("1995-04-11", 2, 200))
    for sql in (EV_MONTH, "SELECT k, sum(v) AS s, count(*) FROM ev GROUP BY k", "SELECT sum(v) FROM ev"):
        result = uc.rewrite(sql)
        assert result.mvs == [ObjectName("default", "ev_month")], result.reasons
        assert result.compensations == [f"ev_month: 2 {COMPENSATED}"]
        assert "`m` IN (CAST('1995-02-01' AS DATE), CAST('1995-04-01' AS DATE))" in result.sql
        assert "WHERE d IN (CAST('1995-02-03' AS DATE), CAST('1995-04-11' AS DATE))" in result.sql
        _same_as_base(uc, sql)


def test_change_in_a_non_reference_table_is_not_compensated(uc: Client) -> None:
    root: Path = uc.root  # type: ignore[attr-defined]
    sql = "SELECT c_seg, count(*) FROM ord JOIN cust ON c_key = o_cust GROUP BY c_seg"
    assert uc.rewrite(sql).mvs == [ObjectName("default", "seg")]
    pq.write_table(pa.table({"c_key": [3], "c_seg": ["NEW"]}), root / "cust" / "c2.parquet")
    write_partition(root / "ord", "o_month", "1995-02", {"o_key": [99], "o_cust": [3]}, file="part-1.parquet")
    result = uc.rewrite(sql)
    assert not result.rewritten
    assert (
        "seg: 2 stale base partitions and consistency CHECKED; not compensated from base: "
        "non-reference table default.cust changed" in result.reasons
    )
    _same_as_base(uc, sql)


def test_unpartitioned_mv_is_not_compensated(uc: Client) -> None:
    root: Path = uc.root  # type: ignore[attr-defined]
    sql = "SELECT l_mode, count(*) AS n FROM li GROUP BY l_mode"
    write_partition(root / "li", "l_month", "1995-03", _li("1995-03", 1, 900), file="part-2.parquet")
    result = uc.rewrite(sql)
    assert any(
        r.startswith("unpart: ")
        and r.endswith("stale base partitions and consistency CHECKED; not compensated from base: unpartitioned MV")
        for r in result.reasons
    ), result.reasons
    assert result.mvs == [ObjectName("default", "by_month")]  # the partitioned MV, compensated
    _same_as_base(uc, sql)


def test_small_mvs_are_read_in_memory_on_the_tiny_input_session(uc: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkmv.refresh import small_mv

    root: Path = uc.root  # type: ignore[attr-defined]
    sql = MONTH_QUERIES[1]
    uc.sql("REFRESH MATERIALIZED VIEW by_month", raise_on_failure=True)
    tiny = small_mv.tiny_session(uc.spark)
    assert tiny is not None and tiny is not uc.spark and tiny is small_mv.tiny_session(uc.spark)
    assert tiny.conf.get("spark.sql.adaptive.enabled") == "false"
    assert uc.spark.conf.get("spark.sql.adaptive.enabled") == "true"  # the parent's settings untouched
    through = uc.sql(sql)
    assert through.sparkSession is tiny
    assert "LocalTableScan" in through._jdf.queryExecution().executedPlan().toString()
    _same_as_base(uc, sql)
    held = small_mv._VIEWS[tiny]["default.by_month"][-1]
    # A new snapshot replaces the in-memory copy: the rows just written are in the answer.
    write_partition(root / "li", "l_month", "1995-01", _li("1995-01", 4, 800), file="part-9.parquet")
    assert uc.sql(sql).sparkSession is uc.spark  # stale: compensated from base, regular session
    uc.sql("REFRESH MATERIALIZED VIEW by_month", raise_on_failure=True)
    assert uc.rewrite(sql).compensations == []
    _same_as_base(uc, sql)
    assert small_mv._VIEWS[tiny]["default.by_month"][-1][2] != held[2]
    # Above the size threshold: the MV's files are read on the regular session, same rows.
    monkeypatch.setattr(small_mv, "SMALL_MV_ROWS", 0)
    assert uc.sql(sql).sparkSession is uc.spark
    _same_as_base(uc, sql)
