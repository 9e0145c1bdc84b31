"""The machinery tax: a FULL refresh (``REFRESH ... FORCE``) of TPC-H Q1 as
an MV partitioned by ship month, against plain PySpark computing and writing the same query over
the same input in the same session (``spark.sql(q).write.partitionBy(...).parquet(...)``);
not a test.

Both are run ``--repeat`` times, alternating (plain first), after one untimed warm-up of each;
medians are compared. With ``--profile FILE`` one more FORCE refresh runs under cProfile and the
time per sparkmv step is printed (Spark's own work shows as Py4J waits inside the step that
started it).

Usage: ``.venv/bin/python bench/bench_overhead.py [--data data/tpch] [--repeat 3]
[--profile FILE] [--no-write]``; records the run under "## Machinery tax" in
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import os
import platform
import pstats
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_pct import Q1  # noqa: E402 (bench/ is put on the path above)
from results import git_commit, publish, timed, today, verdict  # noqa: E402

SECTION = "## Machinery tax"


def run(data: Path, work: Path, repeat: int, profile: Path | None) -> dict[str, Any]:
    """Run the benchmark in ``work``; returns the figures."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import prepare
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    layout = prepare(spark, data, 1.0)
    lineitem = work / "lineitem"
    shutil.copytree(layout.lineitem, lineitem)
    client = Client(home=work / "home", spark=spark)
    try:
        client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{lineitem}'")
        client.sql("CREATE MATERIALIZED VIEW q1 PARTITION BY l_shipmonth PROPERTIES ('refresh_mode' = 'FULL') AS " + Q1)
        spark.read.parquet(str(lineitem)).createOrReplaceTempView("plain_lineitem")
        plain_query = Q1.replace("FROM lineitem", "FROM plain_lineitem")

        def plain() -> None:
            out = work / "plain"
            spark.sql(plain_query).write.mode("overwrite").partitionBy("l_shipmonth").parquet(str(out))

        def force() -> None:
            result = client.refresh("q1", force=True)
            assert (result.state, result.mode) == ("SUCCESS", "FULL"), result

        plain()
        force()  # warm-up of each, untimed
        load_before = os.getloadavg()[0]
        plain_s: list[float] = []
        force_s: list[float] = []
        for _ in range(repeat):
            plain_s.append(timed(plain)[1])
            force_s.append(timed(force)[1])
        load_after = os.getloadavg()[0]
        if profile is not None:
            cProfile.runctx("force()", globals(), {"force": force}, str(profile))
        return {
            "plain": plain_s,
            "force": force_s,
            "load": (load_before, load_after),
            "rows": spark.read.parquet(str(work / "plain")).count(),
        }
    finally:
        client.close()


def breakdown(profile: Path, top: int = 25) -> str:
    """The sparkmv functions of the profile by cumulative seconds (the biggest ``top``)."""
    stats = pstats.Stats(str(profile))
    rows = [
        (v[3], f"{Path(k[0]).name}:{k[2]}")
        for k, v in stats.stats.items()  # type: ignore[attr-defined]
        if "/sparkmv/" in k[0]
    ]
    return "\n".join(f"{s:7.2f} s  {name}" for s, name in sorted(rows, reverse=True)[:top])


def report(figures: dict[str, Any]) -> str:
    plain, force = statistics.median(figures["plain"]), statistics.median(figures["force"])

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    return "\n".join(
        [
            f"### {dt.date.today().isoformat()}: `bench/bench_overhead.py --repeat {len(figures['plain'])}`",
            "",
            f"Machine: {platform.system()} {platform.machine()}, nproc {os.cpu_count()}; Spark `local[2]`, "
            f"`spark.sql.shuffle.partitions = 2`, one process; 1-minute load average {figures['load'][0]:.1f} "
            f"before, {figures['load'][1]:.1f} after. Data: TPC-H SF1 `lineitem` (84 ship-month partitions); "
            f"TPC-H Q1 by ship month ({figures['rows']} rows).",
            "",
            "| | median s | runs s |",
            "|---|---:|---|",
            f"| plain PySpark (`spark.sql(q).write.partitionBy(...).parquet(...)`) | {plain:.2f} | "
            f"{listed(figures['plain'])} |",
            f"| sparkmv `REFRESH ... FORCE` (FULL) | {force:.2f} | {listed(figures['force'])} |",
            "",
            f"FORCE / plain: **{force / plain:.2f}** (target at most 1.1).",
            "",
        ]
    )


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    ratio = statistics.median(figures["force"]) / statistics.median(figures["plain"])
    return f"FULL refresh (FORCE) / plain PySpark {ratio:.2f} (target at most 1.1: {verdict(ratio <= 1.1)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    try:
        figures = run(args.data.resolve(), work, args.repeat, args.profile)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    entry = report(figures)
    print(entry)
    if args.profile is not None:
        print(breakdown(args.profile))
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_overhead.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
