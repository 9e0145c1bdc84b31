"""Query rewrite benchmark on TPC-H SF1; not a test.

One warm process (one SparkSession ``local[2]``). The demo's external tables (``lineitem``,
``orders``, ``customer`` over the shared TPC-H data, read in place, never modified) and its
three MVs (:data:`sparkmv.demo.data.DEMO_MVS`: ``q1_pricing_summary``,
``revenue_by_shipmode``, ``segment_revenue``) are created and built in a bench-private
``SPARKMV_HOME``. Then :data:`QUERIES` (Q1-style summaries over month ranges and subsets of
the group keys, revenue by ship mode per year, segment revenue per year), each of which must
be answered through query rewrite (the bench fails otherwise):

1. warm-up: each query once with rewrite and once without (untimed);
2. ``--repeat`` times each: ``Client.sql(q).collect()`` with rewrite on (the rewritten query
   over the MV, rewrite analysis and the rewrite log included) and with rewrite off (the
   query over the base tables); medians compared;
3. the rewrite analysis alone: ``Client.rewrite(q)`` (parse, candidate MVs, freshness, match;
   target < 50 ms), median of ``--repeat`` after the warm-up;
4. each rewritten result is compared with the result without rewrite (same rows; doubles to
   1e-9 relative): a difference fails the bench.

The time of a rewritten query is split into the rewrite analysis, Spark's analysis and
planning of the rewritten query (``DataFrame`` creation) and its execution (``collect``);
``SELECT 1`` is timed too, Spark's fixed cost per query on the same session.

Usage: ``.venv/bin/python bench/bench_rewrite.py [--data data/tpch] [--repeat 3]
[--no-write]``; records the run under "## Query rewrite" in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import statistics
import sys
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import git_commit, publish, timed, today, verdict  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Query rewrite"
Q1_AGGS = """sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
       count(*) AS count_order"""
REVENUE = "sum(l_extendedprice * (1 - l_discount))"
SEGMENT_FROM = """FROM orders o JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN customer c ON c.c_custkey = o.o_custkey"""

QUERIES: dict[str, str] = {
    "q1_all": f"""SELECT l_returnflag, l_linestatus, {Q1_AGGS} FROM lineitem
        WHERE l_shipmonth <= '1998-08' GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "q1_1995": f"""SELECT l_returnflag, l_linestatus, {Q1_AGGS} FROM lineitem
        WHERE l_shipmonth BETWEEN '1995-01' AND '1995-12' GROUP BY l_returnflag, l_linestatus""",
    "q1_flag_h1_1996": """SELECT l_returnflag, sum(l_quantity) AS sum_qty, avg(l_extendedprice) AS avg_price,
        count(*) AS n FROM lineitem WHERE l_shipmonth >= '1996-01' AND l_shipmonth < '1996-07'
        GROUP BY l_returnflag ORDER BY l_returnflag""",
    "q1_status_q3_1997": """SELECT l_linestatus, sum(l_extendedprice) AS base, avg(l_discount) AS disc
        FROM lineitem WHERE l_shipmonth IN ('1997-07', '1997-08', '1997-09') GROUP BY l_linestatus""",
    "q1_per_month_1997": """SELECT l_shipmonth, sum(l_quantity) AS qty, count(*) AS n FROM lineitem
        WHERE l_shipmonth LIKE '1997-%' GROUP BY l_shipmonth ORDER BY l_shipmonth""",
    "q1_returned_having": """SELECT l_shipmonth, sum(l_quantity) AS qty FROM lineitem
        WHERE l_returnflag = 'R' GROUP BY l_shipmonth HAVING sum(l_quantity) > 1000000
        ORDER BY qty DESC LIMIT 10""",
    "shipmode_per_year": f"""SELECT substr(l_shipmonth, 1, 4) AS yr, l_shipmode, {REVENUE} AS revenue
        FROM lineitem GROUP BY substr(l_shipmonth, 1, 4), l_shipmode ORDER BY yr, l_shipmode""",
    "shipmode_1994_mail_ship": f"""SELECT l_shipmode, {REVENUE} AS revenue, count(*) AS lines FROM lineitem
        WHERE l_shipmonth BETWEEN '1994-01' AND '1994-12' AND l_shipmode IN ('MAIL', 'SHIP')
        GROUP BY l_shipmode""",
    "shipmode_lines": """SELECT l_shipmode, count(*) AS lines FROM lineitem GROUP BY l_shipmode""",
    "segment_per_year": f"""SELECT substr(o.o_ordermonth, 1, 4) AS yr, c.c_mktsegment,
        sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue {SEGMENT_FROM}
        GROUP BY substr(o.o_ordermonth, 1, 4), c.c_mktsegment ORDER BY yr, c.c_mktsegment""",
    "segment_building_95_96": f"""SELECT o.o_ordermonth, sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue
        {SEGMENT_FROM} WHERE c.c_mktsegment = 'BUILDING' AND o.o_ordermonth BETWEEN '1995-01' AND '1996-12'
        GROUP BY o.o_ordermonth""",
    "segment_lines_join_order": """SELECT c.c_mktsegment, count(*) AS lines
        FROM customer c JOIN orders o ON o.o_custkey = c.c_custkey JOIN lineitem l ON o.o_orderkey = l.l_orderkey
        GROUP BY c.c_mktsegment""",
}


def _norm(value: Any) -> Any:
    if isinstance(value, float) and not math.isnan(value):
        return float(f"{value:.9g}")  # doubles summed in another order: equal to 1e-9 relative
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    out = [tuple(_norm(v) for v in r) for r in rows]
    return sorted(out, key=lambda r: tuple((v is None, str(v)) for v in r))


def _build(client: Any, layout: Any) -> dict[str, float]:
    """Create the demo's tables and MVs and build them; seconds per MV build."""
    import importlib

    from sparkmv.demo.data import DEMO_MVS

    create_objects = importlib.import_module("sparkmv.demo.run").create_objects
    create_objects(client, layout)
    built = {}
    for name in DEMO_MVS:
        run, seconds = timed(lambda name=name: client.refresh(name, raise_on_failure=True))
        assert run.state == "SUCCESS", run
        built[name] = seconds
    return built


def _one_query(client: Any, name: str, sql: str, repeat: int) -> dict[str, Any]:
    """Warm-up, then timed runs with and without rewrite, analysis alone; checks equality."""
    from sparkmv.services.rewrite import rewrite

    plan = client.rewrite(sql)
    if not plan.rewritten:
        raise SystemExit(f"{name}: not answered through query rewrite: {plan.reasons}")

    def through() -> list[Any]:
        client.rewrite_enabled = True
        return list(client.sql(sql).collect())

    def base() -> list[Any]:
        client.rewrite_enabled = False
        try:
            return list(client.sql(sql).collect())
        finally:
            client.rewrite_enabled = True

    rewritten_rows, base_rows = through(), base()  # warm-up
    if _rows(rewritten_rows) != _rows(base_rows):
        raise SystemExit(f"{name}: the rewritten result differs from the result without rewrite")
    on, off, analysis, planning, execution = [], [], [], [], []
    for _ in range(repeat):
        rows, seconds = timed(through)
        on.append(seconds)
        off.append(timed(base)[1])
        analysis.append(timed(lambda: rewrite(client.runtime, sql, count=False))[1])
        planned, seconds = timed(lambda: _rewritten_frame(client, plan))
        planning.append(seconds)
        execution.append(timed(planned.collect)[1])
    if _rows(rows) != _rows(base_rows):
        raise SystemExit(f"{name}: the rewritten result differs from the result without rewrite")
    return {
        "name": name,
        "mvs": ", ".join(f"{u.name.display} ({u.kind})" for u in plan.used),
        "rows": len(base_rows),
        "rewrite_s": statistics.median(on),
        "base_s": statistics.median(off),
        "analysis_ms": statistics.median(analysis) * 1000,
        "planning_ms": statistics.median(planning) * 1000,
        "execution_ms": statistics.median(execution) * 1000,
    }


def _rewritten_frame(client: Any, plan: Any) -> Any:
    from sparkmv.client.queries import run_rewritten

    return run_rewritten(client.runtime, plan.sql, plan.mvs)


def run(data: Path, work: Path, repeat: int = 3) -> dict[str, Any]:
    """Run the benchmark in ``work`` (a fresh directory); returns the figures."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import prepare
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    layout = prepare(spark, data, 1.0)
    client = Client(home=work / "home", spark=spark, rewrite=True)
    try:
        built = _build(client, layout)
        load_before = os.getloadavg()[0]
        queries = [_one_query(client, name, sql, repeat) for name, sql in QUERIES.items()]
        load_after = os.getloadavg()[0]
        floor = statistics.median(timed(lambda: spark.sql("SELECT 1").collect())[1] for _ in range(5))
        counts = client.execute(
            "SELECT mv, rewrite_class, count(*) AS n FROM sparkmv.rewrite_log GROUP BY mv, rewrite_class "
            "ORDER BY mv, rewrite_class",
            prefer_rows=True,
        ).rows
        return {
            "built": built,
            "queries": queries,
            "lineitem_bytes": sum(f.stat().st_size for f in layout.lineitem.rglob("*.parquet")),
            "repeat": repeat,
            "load": (load_before, load_after),
            "floor_ms": floor * 1000,
            "log_counts": [tuple(r) for r in counts.rows] if counts is not None else [],
        }
    finally:
        client.close()


def report(figures: dict[str, Any]) -> str:
    """The RESULTS.md entry for ``figures``."""
    queries = figures["queries"]
    speedups = [q["base_s"] / q["rewrite_s"] for q in queries]
    median = statistics.median(speedups)
    analysis = [q["analysis_ms"] for q in queries]
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_rewrite.py`",
        "",
        f"Machine: 2 cores, shared with other engineers' test and Spark runs during the measurement "
        f"(os.cpu_count() = {os.cpu_count()}, {platform.system()} {platform.machine()}; 1-minute load average "
        f"{figures['load'][0]:.1f} before and {figures['load'][1]:.1f} after the timed queries). Spark "
        "`local[2]` (`spark.sql.shuffle.partitions = 2`), one warm process.",
        f"Data: TPC-H SF1, `lineitem` {figures['lineitem_bytes'] / 1e6:.0f} MB of Parquet in ship-month "
        "partitions, `orders` by order month, `customer`; the demo's three MVs built first ("
        + ", ".join(f"{n} {s:.1f} s" for n, s in figures["built"].items())
        + f"). Medians of {figures['repeat']} runs after one warm-up run of each query each way; every "
        "rewritten result equal to the result without rewrite.",
        "",
        "| query | MV used (rewrite class) | rows | without rewrite | with rewrite | speed-up | "
        "rewrite analysis | Spark planning | execution |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for q, s in zip(queries, speedups, strict=True):
        lines.append(
            f"| {q['name']} | {q['mvs']} | {q['rows']} | {q['base_s']:.2f} s | {q['rewrite_s'] * 1000:.0f} ms | "
            f"{s:.1f}x | {q['analysis_ms']:.1f} ms | {q['planning_ms']:.0f} ms | {q['execution_ms']:.0f} ms |"
        )
    lines += [
        "",
        f"Median speed-up **{median:.1f}x** (target >= 20x: {'met' if median >= 20 else 'MISSED'}); "
        f"range {min(speedups):.1f}x to {max(speedups):.1f}x. Rewrite analysis (`Client.rewrite` alone): "
        f"median {statistics.median(analysis):.1f} ms, max {max(analysis):.1f} ms (target < 50 ms: "
        f"{'met' if max(analysis) < 50 else 'MISSED'}).",
        f"Where the time of a rewritten query goes (medians over the queries): rewrite analysis "
        f"{statistics.median(analysis):.0f} ms, Spark analysis and planning of the rewritten query "
        f"{statistics.median(q['planning_ms'] for q in queries):.0f} ms, execution "
        f"{statistics.median(q['execution_ms'] for q in queries):.0f} ms (includes Spark's physical planning "
        f"and code generation); `SELECT 1` on the same session took {figures['floor_ms']:.0f} ms.",
        "`sparkmv.rewrite_log` after the run (mv, class, queries): "
        + "; ".join(f"{mv or 'NULL'} {cls or '-'} {n}" for mv, cls, n in figures["log_counts"])
        + ".",
        "",
    ]
    return "\n".join(lines)


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    queries = figures["queries"]
    median = statistics.median(q["base_s"] / q["rewrite_s"] for q in queries)
    slowest = max(q["analysis_ms"] for q in queries)
    return (
        f"median speed-up {median:.1f}x (target >= 20x: {verdict(median >= 20)}); rewrite analysis "
        f"at most {slowest:.1f} ms (target < 50 ms: {verdict(slowest < 50)})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures and (unless ``--no-write``) record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each query each way (median)")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-rewrite-") as tmp:
        figures = run(args.data.resolve(), Path(tmp), args.repeat)
    entry = report(figures)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_rewrite.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
