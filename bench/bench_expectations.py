"""What expectations cost a refresh: the same MVs over TPC-H SF1 ``lineitem`` with and without
expectations, refreshed FULL (``REFRESH ... FORCE``) and INCREMENTAL (after an outside append
of 1,000 rows to one ship month); not a test.

Two MV pairs: a projection (``warn`` + ``drop``, maintained by the delta rules: the append's
rows are counted and filtered) and an aggregate by ship month and ship mode (a ``drop`` on
the aggregate's output: recomputed by its touched groups instead of merged). Each refresh is
timed ``--repeat`` times, alternating plain and with expectations, after one untimed warm-up;
medians are compared.

Usage: ``.venv/bin/python bench/bench_expectations.py [--data data/tpch] [--repeat 3]
[--no-write]``; records the run under "## Expectations" in ``bench/RESULTS.md``.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import git_commit, publish, timed, today  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Expectations"
PROJECTION = (
    "SELECT l_shipmonth, l_orderkey, l_linenumber, l_quantity, l_discount, l_extendedprice FROM lineitem",
    "CONSTRAINT positive_quantity EXPECT (l_quantity > 0) ON VIOLATION DROP ROW, "
    "CONSTRAINT small_discount EXPECT (l_discount <= 0.09)",
)
AGGREGATE = (
    "SELECT l_shipmonth, l_shipmode, sum(l_extendedprice) AS revenue, count(*) AS n FROM lineitem "
    "GROUP BY l_shipmonth, l_shipmode",
    "CONSTRAINT enough_lines EXPECT (n >= 10) ON VIOLATION DROP ROW",
)


def _append(lineitem: Path, i: int) -> None:
    """An outside writer appends 1,000 rows to ship month 1995-06 (a new file)."""
    import pyarrow.parquet as pq

    target = lineitem / "l_shipmonth=1995-06"
    source = sorted(p for p in target.glob("*.parquet") if not p.name.startswith("bench-"))[0]
    pq.write_table(pq.read_table(source).slice(0, 1000), target / f"bench-{i}.parquet")


def run(data: Path, work: Path, repeat: int) -> dict[str, Any]:
    """Run the benchmark in ``work``; returns seconds per (MV, technique)."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import prepare
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    lineitem = work / "lineitem"
    shutil.copytree(prepare(spark, data, 1.0).lineitem, lineitem)
    client = Client(home=work / "home", spark=spark)
    times: dict[str, list[float]] = {}
    try:
        client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{lineitem}'")
        for kind, (query, rules) in (("projection", PROJECTION), ("aggregate", AGGREGATE)):
            for variant, clause in (("plain", ""), ("expect", f" ({rules})")):
                client.sql(
                    f"CREATE MATERIALIZED VIEW {kind}_{variant}{clause} PARTITION BY l_shipmonth "
                    f"PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}"
                )
        names = [f"{k}_{v}" for k in ("projection", "aggregate") for v in ("plain", "expect")]
        for round_ in range(repeat + 1):  # the first round is the warm-up
            for name in names:
                run_, seconds = timed(lambda n=name: client.refresh(n, force=True))
                assert (run_.state, run_.mode) == ("SUCCESS", "FULL"), run_
                if round_:
                    times.setdefault(f"{name} FULL", []).append(seconds)
            _append(lineitem, round_)
            for name in names:
                run_, seconds = timed(lambda n=name: client.refresh(n))
                assert (run_.state, run_.mode) == ("SUCCESS", "INCREMENTAL"), run_
                if round_:
                    times.setdefault(f"{name} INCREMENTAL", []).append(seconds)
        load = os.getloadavg()[0]
        return {"times": times, "load": load}
    finally:
        client.close()


def report(figures: dict[str, Any], repeat: int) -> str:
    times = figures["times"]
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_expectations.py --repeat {repeat}`",
        "",
        f"Machine: {platform.system()} {platform.machine()}, nproc {os.cpu_count()}; Spark `local[2]`, "
        f"one process; 1-minute load average {figures['load']:.1f} at the end. Data: TPC-H SF1 `lineitem` "
        "(84 ship-month partitions); INCREMENTAL after an append of 1,000 rows to one month.",
        "",
        "| MV | technique | plain median s | with expectations median s | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for kind in ("projection", "aggregate"):
        for technique in ("FULL", "INCREMENTAL"):
            plain = statistics.median(times[f"{kind}_plain {technique}"])
            expect = statistics.median(times[f"{kind}_expect {technique}"])
            lines.append(f"| {kind} | {technique} | {plain:.2f} | {expect:.2f} | {expect / plain:.2f} |")
    lines.append("")
    return "\n".join(lines)


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    times = figures["times"]
    ratios = [
        statistics.median(times[f"{kind}_expect {technique}"]) / statistics.median(times[f"{kind}_plain {technique}"])
        for kind in ("projection", "aggregate")
        for technique in ("FULL", "INCREMENTAL")
    ]
    return f"a refresh with expectations takes {min(ratios):.2f}-{max(ratios):.2f}x the time of the plain one"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-expectations-"))
    try:
        figures = run(args.data.resolve(), work, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    entry = report(figures, args.repeat)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_expectations.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
