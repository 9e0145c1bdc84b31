"""Resume and chunking benchmark on TPC-H SF1; not a test.

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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results import git_commit, publish, verdict  # bench/ is on the path: the script's directory

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Resume and chunking"
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


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jvm_pid(client: Any) -> int:
    return int(client.spark.sparkContext._gateway.proc.pid)


def _cpu(client: Any) -> float:
    """CPU seconds used so far by this process and its JVM."""
    return time.process_time() + _proc_cpu(_jvm_pid(client))


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMV_")}
    env.update(SPARKMV_HOME=str(home), SPARKMV_SPARK_MASTER="local[2]", **extra)
    return env


def _worker(home: Path, lineitem: Path, chunk_size: int) -> subprocess.Popen[bytes]:
    """A fresh process: create the MV (deferred) and refresh it once."""
    log = (home / "worker.log").open("ab")
    return subprocess.Popen(
        [sys.executable, __file__, "--worker", str(home), str(lineitem), str(chunk_size)],
        env=_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


WARM_UP = (
    "SELECT l_returnflag, count(*) AS n, sum(l_extendedprice * (1 - l_discount)) AS s "
    "FROM lineitem WHERE l_shipmonth = '1995-06' GROUP BY l_returnflag"
)


def recover_worker(home: Path) -> None:
    """Body of the recovery process: warm up, then resume what the killed process left."""
    from sparkmv.client.client import Client

    client = Client(home=home, conf=CONF, recover=False)
    client.sql(WARM_UP).collect()  # type: ignore[union-attr]
    started, cpu = time.monotonic(), _cpu(client)
    outcomes = client.recover()
    wall, cpu = time.monotonic() - started, _cpu(client) - cpu
    states = [o.run.state if o.run else o.action for o in outcomes]
    print(json.dumps({"states": states, "wall": wall, "cpu": cpu}), flush=True)


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
    started, cpu = time.monotonic(), _cpu(client)
    print(json.dumps({"jvm": _jvm_pid(client), "cpu_start": cpu}), flush=True)
    run = client.refresh("q1")
    wall, cpu = time.monotonic() - started, _cpu(client) - cpu
    print(json.dumps({"run_id": run.run_id, "state": run.state, "wall": wall, "cpu": cpu}), flush=True)


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
    return {"chunks": len(chunks), "work": _work(chunks), "wall": out["wall"], "cpu": out["cpu"], "state": out["state"]}


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
            break
    time.sleep(typical / 2)  # in the middle of the chunk
    first = json.loads(next(ln for ln in (home / "worker.log").read_text().splitlines() if ln.startswith("{")))
    cpu_killed = _proc_cpu(proc.pid) + _proc_cpu(first["jvm"]) - first["cpu_start"]
    os.killpg(proc.pid, signal.SIGKILL)
    killed_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    proc.wait()
    chunks = _progress(home)
    before = [c for c in chunks if c.is_completed]
    # the chunk that was running: its progress row's checkpoint is when its attempt began
    lost = sum((killed_at - c.last_checkpoint).total_seconds() for c in chunks if c.attempts and not c.is_completed)
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
    recover_cpu = json.loads(lines[-1])["cpu"]
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
        "cpu": cpu_killed + recover_cpu,
    }


def _trial(base: Path, lineitem: Path, partitions: int, size12: int) -> dict[str, Any]:
    full12 = uninterrupted(base, lineitem, size12, "chunks12")
    print("uninterrupted, 12 chunks:", full12, flush=True)
    killed = killed_and_resumed(base, lineitem, size12, full12["chunks"] // 2)
    print("killed + resumed:", killed, flush=True)
    full1 = uninterrupted(base, lineitem, partitions, "chunks1")
    print("uninterrupted, 1 chunk:", full1, flush=True)
    return {
        "full12": full12,
        "killed": killed,
        "full1": full1,
        "resume": killed["work"] / full12["work"],
        "chunking": full12["work"] / full1["work"],
        "chunking_wall": full12["wall"] / full1["wall"],
        "resume_cpu": killed["cpu"] / full12["cpu"],
        "chunking_cpu": full12["cpu"] / full1["cpu"],
    }


def main() -> None:
    """Run the benchmark and print (and with ``--write`` record) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--repeat", type=int, default=1, help="trials (each: 12 chunks, killed+resumed, 1 chunk)")
    parser.add_argument("--write", action="store_true", help="record the figures in bench/RESULTS.md")
    args = parser.parse_args()
    lineitem = _lineitem(args.data)
    partitions = len([p for p in lineitem.iterdir() if p.name.startswith("l_shipmonth=")])
    size12 = -(-partitions // 12)
    trials = []
    for _ in range(args.repeat):
        base = Path(tempfile.mkdtemp(prefix="sparkmv-bench-resume-"))
        try:
            trials.append(_trial(base, lineitem, partitions, size12))
        finally:
            shutil.rmtree(base, ignore_errors=True)
    rows = "\n".join(_row(i + 1, t) for i, t in enumerate(trials))
    resume = statistics.median(t["resume"] for t in trials)
    chunking = statistics.median(t["chunking"] for t in trials)
    resume_cpu = statistics.median(t["resume_cpu"] for t in trials)
    chunking_cpu = statistics.median(t["chunking_cpu"] for t in trials)
    k = trials[-1]["killed"]
    today = dt.date.today().isoformat()
    text = f"""### {today}: `bench/bench_resume.py --repeat {args.repeat}`

2 cores shared with other jobs (load average 5-12 during the runs), Spark `local[2]`,
driver 3g; TPC-H SF1 lineitem (6,001,215 rows, {partitions} `l_shipmonth` partitions,
~{_size_mb(lineitem)} MB Parquet). MV: `Q1_PRICING_SUMMARY` partitioned by `l_shipmonth`, STRICT,
{size12} partitions per chunk. `bench/bench_resume.py --repeat {args.repeat}`. Each refresh and the
recovery run in a fresh process whose JVM is first warmed by a one-month query. Work = sum of
the chunk times in the progress table (`duration_seconds`), plus, for the killed run, the
time its unfinished chunk had run before the `SIGKILL` (lost work). CPU = CPU seconds of the
refreshing processes (Python driver + JVM) during the refresh, resp. until the kill plus
during the recovery: less sensitive than wall-clock times to other jobs on the machine. The killed run is
`SIGKILL`-ed in the middle of chunk {k["done_before_kill"]} (after {k["done_before_kill"]} of {k["chunks"]} chunks were recorded) and resumed by
a fresh process calling `recover` once its lease expired.

| trial | uninterrupted, 12 chunks: work | killed + resumed: work | resume ratio | 1 chunk: work | chunking overhead 12 vs 1 |
|---|---|---|---|---|---|
{rows}

- **Resume ratio** (killed+resumed work / uninterrupted work), median: **{resume:.2f}**; by CPU
  **{resume_cpu:.2f}** (target <= 1.15).
- **Chunking overhead** (12 chunks / 1 chunk, work), median: **{chunking:.2f}**; by CPU
  **{chunking_cpu:.2f}** (target <= 1.2).
- Only the chunk killed mid-way is computed twice; recorded chunks keep `attempts = 1`.
- Not counted as work: the recovery process's start-up (JVM start + warm-up, {k["startup"]:.1f} s wall in
  the last trial) and the lease expiry wait (6 s with `lease_timeout_seconds = 6`).
- The machine was shared with other Spark jobs; chunk times vary by +-30 % between runs, so
  single-trial ratios are noisy (a ratio below 1 only means the later run had a quieter machine).
"""  # noqa: E501
    print(text)
    if args.write:
        headline = (
            f"resume ratio {resume:.2f} (target <= 1.15: {verdict(resume <= 1.15)}); chunking "
            f"overhead {chunking:.2f} (target <= 1.2: {verdict(chunking <= 1.2)})"
        )
        publish(SECTION, text, headline, today, git_commit(), script="bench/bench_resume.py")


def _row(number: int, t: dict[str, Any]) -> str:
    full12, killed, full1 = t["full12"], t["killed"], t["full1"]
    return (
        f"| {number} | {full12['work']:.1f} s ({full12['chunks']} chunks) "
        f"| {killed['work']:.1f} s (lost {killed['lost']:.1f} s; recomputed chunks {killed['recomputed']}) "
        f"| **{t['resume']:.2f}** (CPU {t['resume_cpu']:.2f}) | {full1['work']:.1f} s "
        f"| **{t['chunking']:.2f}** (wall {t['chunking_wall']:.2f}, CPU {t['chunking_cpu']:.2f}) |"
    )


def _size_mb(path: Path) -> int:
    return int(sum(f.stat().st_size for f in path.rglob("*.parquet")) / 1e6)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--recover":
        recover_worker(Path(sys.argv[2]))
    else:
        main()
