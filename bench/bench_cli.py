"""Benchmark: wall time of the catalog-only ``sparkmv`` commands, each a fresh process.

``runs NAME``, ``status``, ``status NAME``, ``cancel NAME`` / ``pause NAME`` /
``resume NAME`` (answered "not being refreshed": the catalog path is the same) and
``sql "SHOW MATERIALIZED VIEWS"`` need no Spark: they must answer without importing pyspark
(target: under 0.6 s for ``runs NAME`` on a quiet machine). The home (one external Parquet
table, one MV with 12 partitions and a few refresh runs) is built once in this process,
which starts Spark; the timed commands do not.

Usage: ``.venv/bin/python bench/bench_cli.py [--repeat 7] [--append-results]``
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from results import git_commit, publish, today, verdict  # bench/ is on the path: the script's directory

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## CLI latency of catalog-only commands"
SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
COMMANDS: list[tuple[str, list[str]]] = [
    ("runs NAME", ["runs", "by_month"]),
    ("status", ["status"]),
    ("status NAME", ["status", "by_month"]),
    ("cancel NAME", ["cancel", "by_month"]),
    ("pause NAME", ["pause", "by_month"]),
    ("resume NAME", ["resume", "by_month"]),
    ("SHOW MATERIALIZED VIEWS", ["sql", "SHOW MATERIALIZED VIEWS"]),
    ("--help", ["--help"]),
]


def build_home(root: Path) -> Path:
    """A home with ``sales`` (12 monthly partitions) and MV ``by_month`` refreshed three times."""
    from sparkmv.client.client import Client
    from sparkmv.storage.spark import get_spark

    sales = root / "sales"
    for month in range(1, 13):
        part = sales / f"m=2024-{month:02d}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"id": list(range(100)), "amount": [float(i) for i in range(100)]}), part / "p.parquet")
    spark = get_spark("local[2]", {"spark.sql.shuffle.partitions": "2"})
    with Client(home=root / "home", spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        client.sql(
            "CREATE MATERIALIZED VIEW by_month PARTITION BY m AS SELECT m, sum(amount) AS t FROM sales GROUP BY m"
        )
        client.refresh("by_month")
        client.refresh("by_month", force=True)
    return root / "home"


def time_command(home: Path, argv: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system, of the process) of
    ``sparkmv --home HOME ARGV``, ``repeat`` times each (after one warm-up). CPU time
    hardly depends on what else the machine runs; wall time does."""
    env = {**os.environ}
    env.pop("SPARKMV_CATALOG_URL", None)
    cmd = [SPARKMV, "--home", str(home), *argv]
    subprocess.run(cmd, capture_output=True, env=env, check=False)  # warm the page cache
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env=env, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()}")
    return walls, cpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--append-results", action="store_true", help="record the table in bench/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp:
        home = build_home(Path(tmp))
        load_before = os.getloadavg()[0]
        rows = [(label, time_command(home, argv, args.repeat)) for label, argv in COMMANDS]
        load_after = os.getloadavg()[0]
    lines = [
        f"### {datetime.now(UTC):%Y-%m-%d}: `bench/bench_cli.py --repeat {args.repeat}`",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}; "
        f"1-minute load average {load_before:.1f} before and {load_after:.1f} after the timed commands"
        + (" (shared machine: other engineers' jobs were running)." if max(load_before, load_after) > 1.5 else "."),
        "Each command is a fresh `sparkmv` process on a home with one MV (12 partitions, 3 runs).",
        "",
        "| command | wall median | wall min | wall max | CPU median |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, (walls, cpus) in rows:
        wall = f"{statistics.median(walls):.3f} s | {min(walls):.3f} s | {max(walls):.3f} s"
        lines.append(f"| `{label}` | {wall} | {statistics.median(cpus):.3f} s |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.append_results:
        runs = statistics.median(dict(rows)["runs NAME"][0])
        headline = f"`sparkmv runs NAME` {runs:.3f} s median (target 0.6 s: {verdict(runs <= 0.6)})"
        publish(SECTION, text, headline, today(), git_commit(), script="bench/bench_cli.py")


if __name__ == "__main__":
    main()
