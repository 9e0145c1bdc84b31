"""Resume and chunking benchmark (issue 3) on TPC-H SF1; not a test.

Q1 pricing summary MV partitioned by ``l_shipmonth`` (~84 partitions), STRICT strategy.

1. Uninterrupted: one refresh cut into 12 chunks, in a fresh process.
2. Killed and resumed: the same refresh in a fresh process, ``SIGKILL``-ed from outside in
   the middle of chunk 6 (after 6 of 12 chunks were recorded); after its lease expires a
   fresh ``sparkmv recover`` process resumes it. Total work = the chunk times in the progress
   table (completed chunks, both processes) + the time the killed attempt had spent on
   its unfinished chunk (lost work).
3. Chunking overhead: the same refresh as 1 chunk vs 12 chunks, both in fresh processes.

Every refresh (and the recovery) runs in its own fresh process that first warms its JVM
with a small query over one month of lineitem, so chunk times are steady-state work in
every process and the figures compare like with like; the start-up cost of a fresh
recovery process (JVM start and warm-up) is reported separately, in wall-clock time.

Usage: ``.venv/bin/python bench/bench_resume.py [--data data/tpch] [--write]``; ``--write``
appends the section to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
CONF = {"spark.driver.memory": "3g"}
LEASE = {"lease_timeout_seconds": "6", "lease_renew_seconds": "2"}


def _lineitem(data: Path) -> Path:
    layout_root = data / "sf1" / "partitioned"
    if not (layout_root / "lineitem" / "_SUCCESS").exists():
        from sparkmv.demo.data import prepare
        from sparkmv.storage.spark import get_spark

        spark = get_spark("local[2]", CONF)
        prepare(spark, data, 1.0)
        spark.stop()
    return layout_root / "lineitem"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMV_")}
    env.update(SPARKMV_HOME=str(home), SPARKMV_SPARK_MASTER="local[2]", **extra)
    return env


def _worker(home: Path, lineitem: Path, chunk_size: int) -> subprocess.Popen[bytes]:
    """A fresh process: create the MV (deferred) and refresh it once."""
    log = (home / "worker.log").open("ab")
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", str(home), str(lineitem), str(chunk_size)],
        env=_env(home), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


WARM_UP = (
    "SELECT l_returnflag, count(*) AS n, sum(l_extendedprice * (1 - l_discount)) AS s "
    "FROM lineitem WHERE l_shipmonth = '1995-06' GROUP BY l_returnflag"
)


def recover_worker(home: Path) -> None:
    """Body of the recovery process: warm up, then resume what the killed process left."""
    from sparkmv.client.client import Client

    client = Client(home=home, conf=CONF, recover=False)
    client.sql(WARM_UP).collect()  # type: ignore[union-attr]
    started = time.monotonic()
    outcomes = client.recover()
    wall = time.monotonic() - started
    states = [o.run.state if o.run else o.action for o in outcomes]
    print(json.dumps({"states": states, "wall": wall}), flush=True)


def worker(home: Path, lineitem: Path, chunk_size: int) -> None:
    """Body of a worker process."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import Q1_PRICING_SUMMARY

    props = {"partition_refresh_strategy": "STRICT", "partition_refresh_number": str(chunk_size), **LEASE}
    text = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    client = Client(home=home, conf=CONF)
    client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{lineitem}'")
    client.sql(
        f"CREATE MATERIALIZED VIEW q1 PARTITION BY l_shipmonth REFRESH DEFERRED PROPERTIES ({text}) "
        f"AS {Q1_PRICING_SUMMARY}"
    )
    client.sql(WARM_UP).collect()  # type: ignore[union-attr]
    started = time.monotonic()
    run = client.refresh("q1")
    print(json.dumps({"run_id": run.run_id, "state": run.state, "wall": time.monotonic() - started}), flush=True)


def _catalog(home: Path) -> Any:
    from sparkmv.catalog import Catalog

    return Catalog.open(f"sqlite:///{home}/catalog.db")


def _progress(home: Path) -> list[Any]:
    catalog = _catalog(home)
    try:
        with catalog.transaction() as s:
            runs = catalog.runs.list(s)
            return catalog.runs.chunks(s, runs[0].run_id) if runs else []
    finally:
        catalog.close()


def _work(chunks: list[Any]) -> float:
    return sum(c.duration_seconds for c in chunks if c.is_completed)


def uninterrupted(base: Path, lineitem: Path, chunk_size: int, label: str) -> dict[str, Any]:
    """One refresh in a fresh process; returns chunk count, work and wall time."""
    home = base / label
    home.mkdir(parents=True)
    proc = _worker(home, lineitem, chunk_size)
    rc = proc.wait()
    lines = [ln for ln in (home / "worker.log").read_text().splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        raise SystemExit(f"{label} failed:\n{(home / 'worker.log').read_text()[-3000:]}")
    out = json.loads(lines[-1])
    chunks = _progress(home)
    return {"chunks": len(chunks), "work": _work(chunks), "wall": out["wall"], "state": out["state"]}


def killed_and_resumed(base: Path, lineitem: Path, chunk_size: int, kill_in_chunk: int) -> dict[str, Any]:
    """Kill the refresh inside chunk ``kill_in_chunk``, then ``sparkmv recover``."""
    home = base / "killed"
    home.mkdir(parents=True)
    proc = _worker(home, lineitem, chunk_size)
    typical = None
    while True:
        time.sleep(0.2)
        if proc.poll() is not None:
            raise SystemExit(f"worker ended before the kill:\n{(home / 'worker.log').read_text()[-3000:]}")
        try:
            chunks = _progress(home)
        except Exception:  # the catalog may not exist yet
            continue
        done = [c for c in chunks if c.is_completed]
        if len(done) >= kill_in_chunk and chunks[kill_in_chunk].attempts >= 1:
            typical = sum(c.duration_seconds for c in done) / len(done)
            started = chunks[kill_in_chunk].last_checkpoint  # naive UTC, set when the attempt began
            break
    time.sleep(typical / 2)  # in the middle of the chunk
    os.killpg(proc.pid, signal.SIGKILL)
    killed_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    proc.wait()
    lost = (killed_at - started).total_seconds()
    before = [c for c in _progress(home) if c.is_completed]
    time.sleep(float(LEASE["lease_timeout_seconds"]) + 0.5)
    t0 = time.monotonic()
    rec = subprocess.run(
        [sys.executable, __file__, "--recover", str(home)], env=_env(home), capture_output=True, text=True, check=False
    )
    process_wall = time.monotonic() - t0
    lines = [ln for ln in rec.stdout.splitlines() if ln.startswith("{")]
    if rec.returncode != 0 or not lines or json.loads(lines[-1])["states"] != ["SUCCESS"]:
        raise SystemExit(f"recover failed: {rec.stdout}\n{rec.stderr[-3000:]}")
    recover_wall = json.loads(lines[-1])["wall"]
    chunks = _progress(home)
    recomputed = [c.chunk_id for c in chunks if c.attempts > 1]
    return {
        "chunks": len(chunks),
        "done_before_kill": len(before),
        "work_recorded": _work(chunks),
        "lost": lost,
        "work": _work(chunks) + lost,
        "recomputed": recomputed,
        "recover_wall": recover_wall,
        "startup": process_wall - recover_wall,
    }


def _write_results(text: str) -> None:
    path = ROOT / "bench" / "RESULTS.md"
    existing = path.read_text() if path.exists() else "# Benchmark results\n"
    path.write_text(existing.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n")


def main() -> None:
    """Run the benchmark and print (and with ``--write`` record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--write", action="store_true", help="append the figures to bench/RESULTS.md")
    args = parser.parse_args()
    lineitem = _lineitem(args.data)
    partitions = len([p for p in lineitem.iterdir() if p.name.startswith("l_shipmonth=")])
    size12 = -(-partitions // 12)
    base = Path(tempfile.mkdtemp(prefix="sparkmv-bench-resume-"))
    try:
        full12 = uninterrupted(base, lineitem, size12, "chunks12")
        print("uninterrupted, 12 chunks:", full12, flush=True)
        killed = killed_and_resumed(base, lineitem, size12, full12["chunks"] // 2)
        print("killed + resumed:", killed, flush=True)
        full1 = uninterrupted(base, lineitem, partitions, "chunks1")
        print("uninterrupted, 1 chunk:", full1, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    resume_ratio = killed["work"] / full12["work"]
    chunk_ratio = full12["work"] / full1["work"]
    chunk_wall_ratio = full12["wall"] / full1["wall"]
    today = dt.date.today().isoformat()
    text = f"""## Resume and chunking (issue 3)

{today}; 2 cores (shared with other jobs), Spark `local[2]`, driver 3g; TPC-H SF1 lineitem
(6,001,215 rows, {partitions} `l_shipmonth` partitions, ~{_size_mb(lineitem)} MB Parquet).
MV: `Q1_PRICING_SUMMARY` partitioned by `l_shipmonth`, STRICT, {size12} partitions per chunk
({full12["chunks"]} chunks). Each refresh and the recovery run in a fresh process whose JVM
is first warmed by a one-month query;
`bench/bench_resume.py`. Work = sum of the chunk times in the progress table
(`duration_seconds`), plus, for the killed run, the time its unfinished chunk had run.

| measurement | figure | target |
|---|---|---|
| uninterrupted refresh, {full12["chunks"]} chunks: work / wall | {full12["work"]:.1f} s / {full12["wall"]:.1f} s | |
| killed (SIGKILL inside chunk {killed["done_before_kill"]}, after {killed["done_before_kill"]} of {killed["chunks"]} chunks recorded) + `sparkmv recover`: work | {killed["work"]:.1f} s (of which lost {killed["lost"]:.1f} s) | |
| chunks computed twice | {killed["recomputed"]} (only the one killed mid-way) | |
| recovery process: resume wall / start-up (JVM start + warm-up, not in work) | {killed["recover_wall"]:.1f} s / {killed["startup"]:.1f} s | |
| **resume ratio**: killed+resumed work / uninterrupted work | **{resume_ratio:.2f}** | <= 1.15 |
| uninterrupted refresh, 1 chunk: work / wall | {full1["work"]:.1f} s / {full1["wall"]:.1f} s | |
| **chunking overhead**: 12 chunks / 1 chunk (work) | **{chunk_ratio:.2f}** (wall {chunk_wall_ratio:.2f}) | <= 1.2 |
"""  # noqa: E501
    print(text)
    if args.write:
        _write_results(text)


def _size_mb(path: Path) -> int:
    return int(sum(f.stat().st_size for f in path.rglob("*.parquet")) / 1e6)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--recover":
        recover_worker(Path(sys.argv[2]))
    else:
        main()
