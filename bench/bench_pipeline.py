"""Spark Declarative Pipelines benchmark: ``spark-pipelines run`` against
``sparkmv pipeline run`` on the same project; not a test.

The project: two materialized views over TPC-H ``lineitem`` partitioned by ship month (84
partitions at SF1), both ``PARTITIONED BY (l_shipmonth)``. Each tool gets its own copy of the
data and of the project, and runs as a cold CLI process (a new JVM each run), as a user runs it:

1. initial build;
2. a refresh with no change;
3. a refresh after an outside writer added a file to one month (the same file in both copies);

and, during each run, a reader polls each MV every 0.1 s and counts the seconds it was empty
or unreadable (pyarrow over ``spark-pipelines``' table directory, which it truncates before
recomputing; the current Iceberg snapshot's ``total-records`` for sparkmv). After every step
the two tools' tables are compared row by row.

``spark-pipelines`` runs against a local Spark Connect server it starts (``--remote local[2]``)
with a Derby Hive metastore configured in ``spark-defaults.conf`` (its default in-memory
catalog forgets the tables between runs); ``lineitem`` is registered there once, as it is
registered in sparkmv with ``CREATE EXTERNAL TABLE`` (neither timed); sparkmv's class-data
archive of its local driver JVM is built first when missing (``sparkmv jvm-archive
--if-missing``, as ``make install`` does; not timed).

Usage: ``.venv/bin/python bench/bench_pipeline.py [--sf 1] [--data data/tpch] [--work DIR]
[--no-write]``; records the run under "## Spark Declarative Pipelines" in
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import git_commit, publish, today, verdict  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Spark Declarative Pipelines"
BIN = Path(sys.executable).parent
CHANGED_MONTH = "1995-06"
MVS = ("revenue_by_month", "shipmode_by_month")
TOOLS = ("sdp", "sparkmv")
PROJECT_SQL = """CREATE MATERIALIZED VIEW revenue_by_month PARTITIONED BY (l_shipmonth) AS
SELECT l_shipmonth, l_returnflag, l_linestatus, sum(l_quantity) AS qty,
       sum(l_extendedprice * (1 - l_discount)) AS revenue, count(*) AS n
FROM lineitem GROUP BY l_shipmonth, l_returnflag, l_linestatus;

CREATE MATERIALIZED VIEW shipmode_by_month PARTITIONED BY (l_shipmonth) AS
SELECT l_shipmonth, l_shipmode, count(*) AS n, sum(l_discount) AS discounts
FROM lineitem WHERE l_quantity > 10 GROUP BY l_shipmonth, l_shipmode;
"""
SPEC = "name: tpch\nstorage: file://{storage}\nlibraries:\n  - glob:\n      include: transformations/**\n"
SPARK_DEFAULTS = """spark.sql.catalogImplementation hive
spark.sql.warehouse.dir {work}/sdp-warehouse
spark.hadoop.javax.jdo.option.ConnectionURL jdbc:derby:;databaseName={work}/sdp-metastore;create=true
spark.sql.shuffle.partitions 2
spark.ui.enabled false
"""


def prepare(sf: float, data: Path, work: Path, tools: tuple[str, ...] = TOOLS) -> dict[str, Path]:
    """The partitioned ``lineitem`` (generated once under ``data``), copied for each tool of
    ``tools``, and the projects; ``lineitem`` registered in their catalogs."""
    from pyspark.sql import SparkSession

    from sparkmv.demo.data import prepare as tpch

    # Bytecode of sparkmv's own modules, as an installed package has it: with
    # PYTHONDONTWRITEBYTECODE set, an editable install would compile them in every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True, capture_output=True)

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    layout = tpch(spark, data, sf)
    spark.stop()
    paths: dict[str, Path] = {}
    for tool in tools:
        lake = work / tool / "lineitem"
        shutil.copytree(layout.lineitem, lake, ignore=shutil.ignore_patterns("_SUCCESS", ".*"))
        project = work / tool / "project"
        (project / "transformations").mkdir(parents=True)
        (project / "spark-pipeline.yml").write_text(SPEC.format(storage=work / tool / "storage"))
        (project / "transformations" / "mvs.sql").write_text(PROJECT_SQL)
        paths[tool] = project
        paths[f"{tool}-lake"] = lake
    if "sdp" in tools:
        (work / "conf").mkdir()
        (work / "conf" / "spark-defaults.conf").write_text(SPARK_DEFAULTS.format(work=work))
        register = f"CREATE TABLE lineitem USING parquet LOCATION '{paths['sdp-lake']}'; MSCK REPAIR TABLE lineitem"
        _run([str(BIN / "spark-sql"), "-e", register], work, _sdp_env(work))
    if "sparkmv" in tools:
        # The class-data archive of the local driver JVM, as `make install` leaves it.
        _run([str(BIN / "sparkmv"), "jvm-archive", "--if-missing"], work, os.environ.copy())
        sql = f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{paths['sparkmv-lake']}'"
        _run([str(BIN / "sparkmv"), "--home", str(work / "home"), "sql", sql], work, os.environ.copy())
    return paths


def _sdp_env(work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_CONF_DIR": str(work / "conf"),
        "PYSPARK_PYTHON": sys.executable,
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Run ``cmd``; its wall seconds. Raises with its output's tail when it fails."""
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({out.returncode}):\n{(out.stdout + out.stderr)[-3000:]}")
    return time.perf_counter() - started


class Reader(threading.Thread):
    """Polls ``count()`` every 0.1 s; ``empty`` is the seconds it saw no rows or an error."""

    def __init__(self, count: Any) -> None:
        super().__init__(daemon=True)
        self.count, self.empty, self.polls, self.stop = count, 0.0, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                rows = self.count()
            except Exception:
                rows = 0
            self.polls += 1
            self.stop.wait(0.1)
            if not rows:
                self.empty += time.perf_counter() - started


def _sdp_rows(work: Path, mv: str) -> int:
    import pyarrow.parquet as pq

    files = [
        p
        for p in (work / "sdp-warehouse" / mv).rglob("*.parquet")
        if not any(s.startswith(("_", ".")) for s in p.parts[-3:])
    ]
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def _sparkmv_catalog(work: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    home = work / "home"
    return SqlCatalog("sparkmv", uri=f"sqlite:///{home}/catalog.db", warehouse=f"file://{home}/warehouse")


def _sparkmv_rows(catalog: Any, mv: str) -> int:
    snap = catalog.load_table(f"default.{mv}").current_snapshot()
    return int(snap.summary["total-records"]) if snap is not None and snap.summary is not None else 0


def step(work: Path, paths: dict[str, Path], what: str, exists: bool, tools: tuple[str, ...] = TOOLS) -> dict[str, Any]:
    """Run each tool of ``tools`` once (cold CLI processes), each with a reader polling each
    MV; the tables are compared when both ran."""
    catalog = _sparkmv_catalog(work) if exists else None
    runs = {
        "sdp": (
            [str(BIN / "spark-pipelines"), "run", "--remote", "local[2]"],
            _sdp_env(work),
            lambda mv: _sdp_rows(work, mv),
        ),
        "sparkmv": (
            [str(BIN / "sparkmv"), "--home", str(work / "home"), "pipeline", "run"],
            os.environ.copy(),
            lambda mv: _sparkmv_rows(catalog, mv) if catalog is not None else 0,
        ),
    }
    out: dict[str, Any] = {"step": what}
    for tool, (cmd, env, rows) in runs.items():
        if tool not in tools:
            continue
        readers = [Reader(lambda mv=mv, rows=rows: rows(mv)) for mv in MVS] if exists else []
        for r in readers:
            r.start()
        out[tool] = _run(cmd, paths[tool], env)
        for r in readers:
            r.stop.set()
            r.join()
        out[f"{tool}_empty"] = max((r.empty for r in readers), default=None)
    out["equal"] = same_tables(work) if set(tools) == set(TOOLS) else None
    if len(tools) == 1:
        print(f"{what}: {tools[0]} {out[tools[0]]:.1f} s", flush=True)
    return out


def same_tables(work: Path) -> bool:
    """Both tools' tables hold the same rows (floats compared to 1e-6 relative)."""
    import pyarrow.dataset as ds

    catalog = _sparkmv_catalog(work)
    for mv in MVS:
        sdp = ds.dataset(str(work / "sdp-warehouse" / mv), format="parquet", partitioning="hive").to_table()
        mine = catalog.load_table(f"default.{mv}").scan().to_arrow()
        cols = [c for c in mine.column_names if not c.startswith("__smv_")]
        if sorted(_rows(sdp, cols)) != sorted(_rows(mine, cols)):
            return False
    return True


def _rows(table: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    data = table.select(cols).to_pylist()
    return [
        tuple(round(v, 6) if isinstance(v, float) else (str(v) if v is not None else None) for v in r.values())
        for r in data
    ]


def change_one_month(paths: dict[str, Path]) -> int:
    """Add the same file (a copy of 1 % of one month's rows) to that month in both copies."""
    import pyarrow.parquet as pq

    month = next(paths[k] for k in ("sdp-lake", "sparkmv-lake") if k in paths) / f"l_shipmonth={CHANGED_MONTH}"
    source = pq.read_table(next(month.glob("*.parquet")))
    part = source.slice(0, max(1, source.num_rows // 100))
    for tool in ("sdp", "sparkmv"):
        if f"{tool}-lake" not in paths:
            continue
        pq.write_table(part, paths[f"{tool}-lake"] / f"l_shipmonth={CHANGED_MONTH}" / "part-bench-added.parquet")
    return part.num_rows


def report(sf: float, steps: list[dict[str, Any]], added: int, load: tuple[str, str]) -> str:
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_pipeline.py --sf {sf:g}`",
        "",
        f"Machine: {platform.system()} {platform.machine()}, nproc {os.cpu_count()}; load average before "
        f"{load[0]}, after {load[1]}. Data: TPC-H SF {sf:g} `lineitem` (tpchgen-cli) as Parquet partitioned "
        "by ship month (84 partitions), one copy per tool; two MVs partitioned by month. Each run is a cold "
        "CLI process (sparkmv's driver JVM with its class-data archive, `sparkmv jvm-archive`); "
        f"the one-partition change adds {added:,} rows to `{CHANGED_MONTH}`.",
        "",
        "| step | spark-pipelines s | sparkmv s | ratio | seconds empty (SDP / sparkmv) | tables equal |",
        "|---|---:|---:|---:|---|---|",
    ]
    for s in steps:
        empty = "-" if s["sdp_empty"] is None else f"{s['sdp_empty']:.1f} / {s['sparkmv_empty']:.1f}"
        lines.append(
            f"| {s['step']} | {s['sdp']:.1f} | {s['sparkmv']:.1f} | {s['sdp'] / s['sparkmv']:.1f}x | {empty} | "
            f"{'yes' if s['equal'] else '**NO**'} |"
        )
    return "\n".join(lines) + "\n"


def headline(steps: list[dict[str, Any]]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    by_step = {s["step"]: s for s in steps}
    one, none = by_step["one of 84 partitions changed"], by_step["no change"]
    ratio = one["sdp"] / one["sparkmv"]
    return (
        f"one partition changed: {ratio:.1f}x faster than `spark-pipelines` (target >= 5x: "
        f"{verdict(ratio >= 5)}); no change {none['sparkmv']:.1f} s (target < 3 s: "
        f"{verdict(none['sparkmv'] < 3)})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--only", choices=TOOLS, default=None, help="run one tool only (for profiling; nothing is written)"
    )
    args = parser.parse_args(argv)
    tools = (args.only,) if args.only else TOOLS
    work = (args.work or Path(tempfile.mkdtemp(prefix="bench-pipeline-"))).resolve()
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    paths = prepare(args.sf, args.data.resolve(), work, tools)
    steps = [step(work, paths, "initial build", False, tools)]
    steps.append(step(work, paths, "no change", True, tools))
    added = change_one_month(paths)
    steps.append(step(work, paths, "one of 84 partitions changed", True, tools))
    if args.only:
        print(f"work directory: {work}")
        return 0
    entry = report(args.sf, steps, added, (load_before, " ".join(f"{x:.1f}" for x in os.getloadavg())))
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(steps), today(), git_commit(), script="bench/bench_pipeline.py")
    return 0 if all(s["equal"] for s in steps) else 1


if __name__ == "__main__":
    raise SystemExit(main())
