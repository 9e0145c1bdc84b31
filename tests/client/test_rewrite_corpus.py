"""Query rewrite on Spark: every query's result through rewrite equals its result over the
base tables (multisets, DOUBLE within 1e-9 relative), queries that must not be rewritten
are not, and freshness gates the MVs (CHECKED, LOOSE, DISABLE, the session switch)."""

from __future__ import annotations

import datetime as dt
import math
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.client.client import Client
from sparkmv.client.queries import run_query
from sparkmv.names import ObjectName
from sparkmv.services.rewrite import REGISTRY
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

MONTHS = ["1995-01", "1995-02", "1995-03", "1995-04"]
MODES = ["AIR", "MAIL", "SHIP", None]
SEGMENTS = ["AUTO", "BUILDING", None]
CUTOFF = "DATE '1995-04-20'"

Q1 = f"""SELECT l_month, l_flag, l_mode, sum(l_quantity) AS sum_qty, sum(l_price * (1 - l_discount)) AS revenue,
  avg(l_quantity) AS avg_qty, avg(l_discount) AS avg_disc, avg(l_tax) AS avg_tax, count(*) AS n,
  count(l_flag) AS n_flag, min(l_shipdate) AS first_ship, max(l_price) AS max_price
FROM li WHERE l_shipdate <= {CUTOFF} GROUP BY l_month, l_flag, l_mode"""
SEGMENT = """SELECT o_month, c_segment, count(*) AS n, sum(l_price * (1 - l_discount)) AS revenue
FROM ord o JOIN li l ON l.l_orderkey = o.o_orderkey JOIN cust c ON c.c_custkey = o.o_custkey
GROUP BY o_month, c_segment"""
BIG = "SELECT l_orderkey, l_partkey, l_quantity, l_price, l_shipdate, l_mode, l_month FROM li WHERE l_quantity > 20"
W = f"WHERE l_shipdate <= {CUTOFF}"
JOIN = "FROM li l JOIN ord o ON o.o_orderkey = l.l_orderkey JOIN cust c ON c.c_custkey = o.o_custkey"

# (query, the MV that must answer it, or None: must not be rewritten)
CORPUS: list[tuple[str, str | None]] = [
    (Q1, "q1"),
    (f"SELECT l_flag, sum(l_quantity), count(*) FROM li {W} GROUP BY l_flag", "q1"),
    (f"SELECT l_mode, avg(l_quantity), avg(l_discount), avg(l_tax) FROM li {W} GROUP BY l_mode", "q1"),
    (f"SELECT l_month, avg(l_quantity) AS a FROM li {W} GROUP BY l_month ORDER BY a DESC LIMIT 2", "q1"),
    (f"SELECT count(*), sum(l_price * (1 - l_discount)), min(l_shipdate), max(l_price) FROM li {W}", "q1"),
    (f"SELECT l_flag, l_mode, count(l_flag) FROM li {W} AND l_month >= '1995-02' GROUP BY l_flag, l_mode", "q1"),
    (f"SELECT l_month, sum(l_quantity) FROM li {W} AND l_month IN ('1995-01', '1995-03') GROUP BY l_month", "q1"),
    (f"SELECT l_mode, sum(l_quantity) s FROM li {W} GROUP BY l_mode HAVING sum(l_quantity) > 100", "q1"),
    (f"SELECT substr(l_month, 1, 4) y, avg(l_discount) FROM li {W} GROUP BY substr(l_month, 1, 4)", "q1"),
    (f"SELECT count(DISTINCT l_mode), count(DISTINCT l_flag) FROM li {W}", "q1"),
    (f"SELECT l_mode, l_flag, l_month, sum(l_quantity) FROM li {W} GROUP BY 1, 2, 3 HAVING count(*) > 3", "q1"),
    (f"SELECT l_mode, l_flag, l_month, avg(l_quantity) FROM li {W} AND l_mode IS NULL GROUP BY 1, 2, 3", "q1"),
    (f"SELECT l_flag, max(l_price), min(l_shipdate) FROM li {W} AND l_flag IS NOT NULL GROUP BY l_flag", "q1"),
    (f"SELECT l_month FROM li {W} GROUP BY l_month ORDER BY l_month", "q1"),
    (f"WITH t AS (SELECT l_mode, sum(l_quantity) s FROM li {W} GROUP BY l_mode) SELECT * FROM t WHERE s > 0", "q1"),
    (f"SELECT * FROM (SELECT l_flag f, avg(l_tax) t FROM li {W} GROUP BY l_flag) x WHERE x.t IS NOT NULL", "q1"),
    (
        f"SELECT a.l_mode, a.s, b.n FROM (SELECT l_mode, sum(l_quantity) s FROM li {W} GROUP BY l_mode) a "
        f"JOIN (SELECT l_mode, count(*) n FROM li {W} GROUP BY l_mode) b ON a.l_mode <=> b.l_mode",
        "q1",
    ),
    (f"SELECT l_mode, sum(l_quantity) FROM li {W} AND l_month = '1995-02' GROUP BY ROLLUP(l_mode)", None),
    (SEGMENT, "segment"),
    (f"SELECT c_segment, sum(l_price * (1 - l_discount)) rev {JOIN} GROUP BY c_segment", "segment"),
    (f"SELECT o_month, count(*) {JOIN} GROUP BY o_month ORDER BY o_month", "segment"),
    (f"SELECT count(*) {JOIN}", "segment"),
    (
        "SELECT c_segment, o_month, count(*) FROM cust, ord, li WHERE o_custkey = c_custkey "
        "AND l_orderkey = o_orderkey GROUP BY c_segment, o_month",
        "segment",
    ),
    (f"SELECT c_segment, count(*) {JOIN} WHERE o_month > '1995-02' GROUP BY c_segment", "segment"),
    (f"SELECT c_segment, sum(l_price) {JOIN} GROUP BY c_segment", None),
    (f"SELECT c_segment, count(*) {JOIN} WHERE l_mode = 'AIR' GROUP BY c_segment", None),
    (
        "SELECT c_segment, count(*) FROM li l JOIN ord o ON o.o_orderkey = l.l_orderkey "
        "LEFT JOIN cust c ON c.c_custkey = o.o_custkey GROUP BY c_segment",
        None,
    ),
    (BIG, "big"),
    ("SELECT l_orderkey, l_price FROM li WHERE l_quantity > 30 AND l_mode = 'AIR'", "big"),
    ("SELECT l_mode, count(*), sum(l_price) FROM li WHERE l_quantity >= 25 GROUP BY l_mode", "big"),
    ("SELECT l_mode, count(DISTINCT l_partkey) FROM li WHERE l_quantity > 20 GROUP BY l_mode", "big"),
    ("SELECT l_orderkey FROM li WHERE l_quantity BETWEEN 21 AND 40 AND l_shipdate >= DATE '1995-02-01'", "big"),
    ("SELECT max(l_shipdate) FROM li WHERE l_quantity > 20 AND l_month < '1995-03'", "big"),
    ("SELECT l_orderkey, l_tax FROM li WHERE l_quantity > 30", None),
    ("SELECT l_orderkey FROM li WHERE l_quantity > 10", None),
    (f"SELECT count(DISTINCT l_partkey) FROM li {W}", None),
    (f"SELECT l_flag, stddev(l_quantity) FROM li {W} GROUP BY l_flag", None),
    (f"SELECT l_flag, sum(l_tax) FROM li {W} AND l_partkey > 3 GROUP BY l_flag", None),
    ("SELECT l_flag, sum(l_quantity) FROM li GROUP BY l_flag", None),
    (f"SELECT l_flag, sum(l_discount) FROM li {W} GROUP BY l_flag", "q1"),
    (f"SELECT l_flag, sum(l_quantity) OVER (PARTITION BY l_mode) FROM li {W}", None),
    ("SELECT o_month, count(*) FROM ord GROUP BY o_month", None),
]


def _lineitem(rng: random.Random, month: str, n: int, start: int) -> dict[str, Any]:
    year, mon = (int(p) for p in month.split("-"))
    return {
        "l_orderkey": [start + i // 3 for i in range(n)],
        "l_partkey": [rng.randint(1, 9) for _ in range(n)],
        "l_quantity": pa.array([Decimal(rng.randint(1, 5000)) / 100 for _ in range(n)], pa.decimal128(15, 2)),
        "l_price": pa.array([Decimal(rng.randint(100, 999999)) / 100 for _ in range(n)], pa.decimal128(15, 2)),
        "l_discount": pa.array([Decimal(rng.randint(0, 10)) / 100 for _ in range(n)], pa.decimal128(15, 2)),
        "l_tax": [None if i % 11 == 0 else rng.random() / 10 for i in range(n)],
        "l_flag": [rng.choice(["A", "N", "R", None]) for _ in range(n)],
        "l_mode": [rng.choice(MODES) for _ in range(n)],
        "l_shipdate": [dt.date(year, mon, rng.randint(1, 28)) for _ in range(n)],
    }


@pytest.fixture(scope="module")
def rw(spark, tmp_path_factory: pytest.TempPathFactory) -> Any:  # type: ignore[no-untyped-def]
    """One client (rewrite on) with li/ord/cust and the MVs q1, segment and big, built."""
    root = tmp_path_factory.mktemp("rewrite")
    rng = random.Random(15)
    orders = 0
    for k, month in enumerate(MONTHS):
        rows = _lineitem(rng, month, 60, orders)
        write_partition(root / "li", "l_month", month, rows)
        keys = sorted(set(rows["l_orderkey"]))
        orders = keys[-1] + 1
        date = dt.date(1995, k + 1, 5)
        write_partition(
            root / "ord",
            "o_month",
            month,
            {"o_orderkey": keys, "o_custkey": [o % 7 for o in keys], "o_date": [date] * len(keys)},
        )
    cust = root / "cust"
    cust.mkdir()
    import pyarrow.parquet as pq

    pq.write_table(
        pa.table({"c_custkey": list(range(7)), "c_segment": [SEGMENTS[i % 3] for i in range(7)]}), cust / "c.parquet"
    )
    client = Client(home=root / "home", spark=spark)
    for name in ("li", "ord", "cust"):
        client.sql(f"CREATE EXTERNAL TABLE {name} USING parquet LOCATION '{root / name}'")
    client.sql(f"CREATE MATERIALIZED VIEW q1 PARTITION BY l_month AS {Q1}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW segment PARTITION BY o_month AS {SEGMENT}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW big AS {BIG}", raise_on_failure=True)
    client.root = root  # type: ignore[attr-defined]
    yield client
    client.close()


def _norm(value: Any) -> Any:
    if isinstance(value, float) and not math.isnan(value):
        return float(f"{value:.9g}")
    return value


def _rows(df: Any) -> list[tuple[Any, ...]]:
    rows = [tuple(_norm(v) for v in r) for r in df.collect()]
    return sorted(rows, key=lambda r: tuple((v is None, str(v)) for v in r))


def _types(df: Any) -> list[str]:
    return [f.dataType.simpleString() for f in df.schema.fields]


@pytest.mark.parametrize(("sql", "mv"), CORPUS)
def test_corpus(rw: Client, sql: str, mv: str | None) -> None:
    result = rw.rewrite(sql)
    assert set(result.mvs) == ({ObjectName("default", mv)} if mv else set()), result.reasons
    if mv is None:
        assert result.sql == sql  # run as written: nothing to compare
        return
    through = rw.sql(sql)
    base = run_query(rw.runtime, sql)
    assert _types(through) == _types(base)
    assert _rows(through) == _rows(base)


def test_corpus_size() -> None:
    assert len(CORPUS) >= 40
    assert sum(1 for _sql, mv in CORPUS if mv is None) >= 10


def test_explain_and_switches(rw: Client) -> None:
    sql = f"SELECT l_flag, sum(l_quantity) FROM li {W} GROUP BY l_flag"
    text = rw.execute(f"EXPLAIN {sql}").message
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "rewrite: q1: aggregate rollup (grouping by l_flag)"
    assert lines[1].startswith(
        "SQL: SELECT default__q1.l_flag AS l_flag, CAST(SUM(default__q1.sum_qty) AS DECIMAL(25, 2))"
    )
    assert lines[2:] == [
        "rejected MVs:",
        "  big: its predicate l_quantity > 20 is not implied by the query",
        "  segment: it reads cust, li, ord, the query reads li",
    ]
    before = REGISTRY.get_sample_value("sparkmv_mv_rewrite_total", {"mv": "q1"}) or 0
    rw.sql(sql)
    assert REGISTRY.get_sample_value("sparkmv_mv_rewrite_total", {"mv": "q1"}) == before + 1
    assert (
        rw.execute("SET enable_materialized_view_rewrite = false").message == "enable_materialized_view_rewrite = false"
    )
    try:
        assert rw.execute(f"EXPLAIN {sql}").message.splitlines()[0].endswith("queries run as written)")  # type: ignore[union-attr]
        rw.sql(sql)
        assert REGISTRY.get_sample_value("sparkmv_mv_rewrite_total", {"mv": "q1"}) == before + 1
    finally:
        rw.sql("SET enable_materialized_view_rewrite = true")
    rw.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('query_rewrite_consistency' = 'DISABLE')")
    try:
        assert rw.rewrite(sql).reasons[0] == "q1: query_rewrite_consistency is DISABLE"
    finally:
        rw.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('query_rewrite_consistency' = 'CHECKED')")


def test_stale_partitions_checked_vs_loose(rw: Client) -> None:
    """Runs last in this module: it makes q1 stale."""
    sql = f"SELECT l_month, sum(l_quantity) AS s, count(*) AS n FROM li {W} GROUP BY l_month"
    assert rw.rewrite(sql).mvs == [ObjectName("default", "q1")]
    before = _rows(rw.sql(sql))
    extra = _lineitem(random.Random(1), "1995-02", 5, 10_000)
    write_partition(rw.root / "li", "l_month", "1995-02", extra, file="part-1.parquet")  # type: ignore[attr-defined]
    checked = rw.rewrite(sql)
    assert checked.mvs == [ObjectName("default", "q1")] and "UNION ALL" in checked.sql
    assert checked.compensations == ["q1: 1 stale partitions and consistency CHECKED: compensated from base"]
    after = _rows(run_query(rw.runtime, sql))
    assert _rows(rw.sql(sql)) == after != before
    rw.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('query_rewrite_consistency' = 'LOOSE')")
    assert rw.rewrite(sql).mvs == [ObjectName("default", "q1")]
    assert _rows(rw.sql(sql)) == before  # the MV as it is: documented for LOOSE
    rw.sql(
        "ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('query_rewrite_consistency' = 'CHECKED', "
        "'mv_rewrite_staleness_second' = '3600')"
    )
    assert rw.rewrite(sql).mvs == [ObjectName("default", "q1")]  # refreshed within the grace period
