"""Partition change tracking benchmark on TPC-H SF1; not a test.

TPC-H Q1 (pricing summary) as an MV partitioned by ``l_shipmonth`` over ``lineitem``
partitioned by ship month (~84 partitions). In one process, back to back:

1. create the MV (first, full refresh; reported, not compared);
2. ``--warmup`` PCT refreshes of other months (``1993-01``, ``1993-02``, ...), not in the
   ratio: the first small refresh in the process runs code the full refresh of step 1 did
   not (reported as "first PCT refresh"), and the JVM compiles Spark's per-job code over
   the first few dozen jobs;
3. ``--repeat`` times: change one month (an outside writer adds a Parquet file to
   ``l_shipmonth=1995-06``, then ``1995-07``, ...) and PCT refresh it (``refresh_mode =
   PCT``; AUTO would pick INCREMENTAL for this append): only that month is recomputed;
4. ``--repeat`` full recomputes of the same MV (``refresh_mode = FULL`` + FORCE: replace
   every partition, the truncate-and-recompute that open-source Spark Declarative
   Pipelines does);
5. no-change refreshes (``SKIPPED``, no Spark job), median of several.

The ratio compares the medians of steps 3 and 4. CPU seconds (driver Python + the local
JVM) are reported beside wall times: on a shared machine they vary less.

The MV is checked against Q1 recomputed from scratch after steps 3 and 4. ``lineitem`` is
copied to a bench-private directory first: the shared TPC-H data is never modified.

Usage: ``.venv/bin/python bench/bench_pct.py [--data data/tpch] [--repeat 3] [--warmup 1]
[--no-write]``; records the run under "## Partition change tracking" in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import cpu_clock, git_commit, publish, timed, today, verdict  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Partition change tracking"
CHANGED_MONTH = "1995-06"
WARMUP_MONTH = "1993-01"
Q1 = """
SELECT l_shipmonth, l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM lineitem
WHERE l_shipdate <= date '1998-09-02'
GROUP BY l_shipmonth, l_returnflag, l_linestatus
"""


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*.parquet"))


def _change_one_month(lineitem: Path, month: str) -> int:
    """An outside writer appends a file of 10,000 rows to one month; returns the rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory = lineitem / f"l_shipmonth={month}"
    source = sorted(directory.glob("*.parquet"))[0]
    rows = pq.read_table(source).slice(0, 10_000)
    index = rows.schema.get_field_index("l_quantity")
    bumped = pc.add(rows["l_quantity"], 1).cast(rows.schema.field(index).type)
    rows = rows.set_column(index, rows.schema.field(index), bumped)
    pq.write_table(rows, directory / f"part-bench-{int(time.time())}.parquet")
    return rows.num_rows


def _matches(client: Any, mv: str) -> bool:
    table = client.table(mv)
    expected = client.sql(Q1).select(*table.columns)
    return table.exceptAll(expected).count() == 0 and expected.exceptAll(table).count() == 0


def _months_after(months: list[str], first: str, n: int) -> list[str]:
    start = months.index(f"l_shipmonth={first}")
    return [m.split("=", 1)[1] for m in months[start : start + n]]


def run(data: Path, work: Path, repeat: int = 3, warmup: int = 1) -> dict[str, Any]:
    """Run the benchmark in ``work`` (a fresh directory); returns the figures."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import prepare
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    layout = prepare(spark, data, 1.0)
    lineitem = work / "lineitem"
    shutil.copytree(layout.lineitem, lineitem)
    months = sorted(p.name for p in lineitem.iterdir() if p.name.startswith("l_shipmonth="))
    client = Client(home=work / "home", spark=spark)
    try:
        client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{lineitem}'")
        created, create_s = timed(
            lambda: client.execute(f"CREATE MATERIALIZED VIEW q1 PARTITION BY l_shipmonth AS {Q1}").run
        )
        assert created is not None and created.state == "SUCCESS", created
        # PCT explicitly: under AUTO an append-only change is refreshed INCREMENTAL.
        client.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('refresh_mode' = 'PCT')")
        cpu = cpu_clock(spark)
        warm_s: list[float] = []
        for month in _months_after(months, WARMUP_MONTH, warmup):
            _change_one_month(lineitem, month)
            first, seconds = timed(lambda: client.refresh("q1"))
            assert (first.state, first.mode, first.partitions_done) == ("SUCCESS", "PCT", 1), first
            warm_s.append(seconds)

        load_before = os.getloadavg()[0]
        pct_s: list[float] = []
        pct_cpu: list[float] = []
        for month in _months_after(months, CHANGED_MONTH, repeat):
            added = _change_one_month(lineitem, month)
            started_cpu = cpu()
            pct, seconds = timed(lambda: client.refresh("q1"))
            pct_cpu.append(cpu() - started_cpu)
            pct_s.append(seconds)
            assert (pct.state, pct.mode, pct.partitions_done) == ("SUCCESS", "PCT", 1), pct
        pct_ok = _matches(client, "q1")

        client.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('refresh_mode' = 'FULL')")
        full_s: list[float] = []
        full_cpu: list[float] = []
        for _ in range(repeat):
            started_cpu = cpu()
            full, seconds = timed(lambda: client.refresh("q1", force=True))
            full_cpu.append(cpu() - started_cpu)
            full_s.append(seconds)
            assert (full.state, full.mode) == ("SUCCESS", "FULL"), full
        full_ok = _matches(client, "q1")
        client.sql("ALTER MATERIALIZED VIEW q1 SET PROPERTIES ('refresh_mode' = 'AUTO')")

        noop_times = []
        for _ in range(5):
            noop, noop_s = timed(lambda: client.refresh("q1"))
            assert (noop.state, noop.reason) == ("SKIPPED", "up to date"), noop
            noop_times.append(noop_s)
        return {
            "months": len(months),
            "lineitem_bytes": _dir_size(lineitem),
            "added_rows": added,
            "create_s": create_s,
            "first_pct_s": warm_s[0] if warm_s else None,
            "warmup": warmup,
            "pct_runs": pct_s,
            "pct_s": statistics.median(pct_s),
            "pct_cpu_s": statistics.median(pct_cpu),
            "pct_partitions": pct.partitions_done,
            "full_runs": full_s,
            "full_s": statistics.median(full_s),
            "full_cpu_s": statistics.median(full_cpu),
            "full_partitions": full.partitions_done,
            "noop_median_s": statistics.median(noop_times),
            "noop_max_s": max(noop_times),
            "correct": pct_ok and full_ok,
            "load": (load_before, os.getloadavg()[0]),
        }
    finally:
        client.close()


def report(figures: dict[str, Any]) -> str:
    """The RESULTS.md entry for ``figures``."""
    speedup = figures["full_s"] / figures["pct_s"]
    cpu_speedup = figures["full_cpu_s"] / figures["pct_cpu_s"]
    runs = len(figures["pct_runs"])
    cpus = os.cpu_count()

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    return "\n".join(
        [
            f"### {dt.date.today().isoformat()}: `bench/bench_pct.py`",
            "",
            f"Machine: 2 cores, 24 GiB (os.cpu_count() = {cpus}, {platform.system()} {platform.machine()}); "
            "Spark `local[2]` (`spark.sql.shuffle.partitions = 2`) in one process; 1-minute load average "
            f"{figures['load'][0]:.1f} before and {figures['load'][1]:.1f} after the timed steps "
            "(other engineers' Spark jobs shared the 2 cores).",
            f"Data: TPC-H SF1 `lineitem`, {figures['lineitem_bytes'] / 1e6:.0f} MB of Parquet in "
            f"{figures['months']} ship-month partitions (bench-private copy); one month "
            f"(`{CHANGED_MONTH}` and the next months, one per PCT refresh) changed by adding a file of "
            f"{figures['added_rows']:,} rows.",
            "",
            "| step | wall time | CPU (Python + JVM) | MV partitions written |",
            "|---|---:|---:|---:|",
            f"| create + first refresh (FULL) | {figures['create_s']:.1f} s | | {figures['months']} |",
            f"| first PCT refresh in the process (`{WARMUP_MONTH}`; {figures['warmup']} warm-up refreshes, "
            f"not in the ratio) | {figures['first_pct_s'] or 0:.2f} s | | 1 |",
            f"| PCT refresh after the change (median of {runs}: {listed(figures['pct_runs'])}) | "
            f"{figures['pct_s']:.2f} s | {figures['pct_cpu_s']:.2f} s | {figures['pct_partitions']} |",
            f"| full recompute (`refresh_mode = FULL`, FORCE; median of {runs}: {listed(figures['full_runs'])}) | "
            f"{figures['full_s']:.2f} s | {figures['full_cpu_s']:.2f} s | {figures['full_partitions']} |",
            f"| no-change refresh (SKIPPED, median of 5; max) | {figures['noop_median_s'] * 1000:.0f} ms "
            f"(max {figures['noop_max_s'] * 1000:.0f} ms) | | 0 |",
            "",
            f"PCT vs full recompute: **{speedup:.1f}x** faster (target >= 20x); by CPU {cpu_speedup:.1f}x. "
            f"No-change refresh: {'under' if figures['noop_max_s'] < 2 else 'OVER'} the 2 s target. "
            f"MV equal to Q1 recomputed from scratch after both refreshes: {figures['correct']}.",
            "",
        ]
    )


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    speedup = figures["full_s"] / figures["pct_s"]
    return (
        f"PCT refresh {speedup:.1f}x faster than a full recompute ({figures['pct_s']:.2f} s vs "
        f"{figures['full_s']:.2f} s; target >= 20x: {verdict(speedup >= 20)})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures and (unless ``--no-write``) record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--repeat", type=int, default=3, help="PCT refreshes and full recomputes timed (median)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed PCT refreshes before the timed ones")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-pct-") as tmp:
        figures = run(args.data.resolve(), Path(tmp), args.repeat, args.warmup)
    entry = report(figures)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_pct.py")
    return 0 if figures["correct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
