"""Benchmark: ``sparkmv ui`` over a catalog of 500 MVs and 20,000 refresh runs.

The catalog is written directly through the catalog stores (no Spark): 50 external Parquet
base tables (a directory of 12 partitions each), 250 MVs over one or two base tables (half
fresh, half with one stale partition, every fifth failed, a few refreshing), 250 MVs over
those MVs, and 40 runs per MV. ``sparkmv ui`` runs as its own process; each page is fetched
``--repeat`` times over HTTP after a first request. Server time is the request's wall time
on localhost (the client side of urllib adds well under a millisecond). Start-up computes
every MV's freshness and the graph's ``dot`` layout before the address is printed. Resident
memory is the server process' VmRSS after all requests.
Targets: graph page and ``/api/objects`` under 200 ms, under 150 MB resident.

With ``--home HOME`` (e.g. the demo's ``.sparkmv-demo`` after ``make demo``) it measures that
catalog instead: every page the UI links to (the graph, ``/runs``, ``/rewrite``,
every object's page, the newest run's page of each) is opened once, and the server's VmRSS
is read after each; it reports the largest, and whether pyarrow, pandas or pyspark were
loaded (their shared libraries in ``/proc/PID/maps``). Target: under 150 MB.

Usage: ``.venv/bin/python bench/bench_ui.py [--repeat 9] [--write] [--home HOME]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))
MVS, RUNS_PER_MV, BASES, PARTS = 500, 40, 50, 12
PAGES = ["/", "/api/objects", "/api/runs", "/runs", "/objects/mv_0007", "/api/objects/mv_0007"]


def build(home: Path, data: Path) -> None:
    """The bench catalog (see the module docstring)."""
    from sparkmv.catalog import ControlCommand, ObjectKind, RunState, Trigger
    from sparkmv.catalog.versions import VersionEntry
    from sparkmv.client.client import Client
    from sparkmv.names import ObjectName
    from sparkmv.sources import parquet

    client = Client(home=home, recover=False)
    cat = client.runtime.catalog
    now = datetime.now(UTC).replace(tzinfo=None)
    versions = {}
    with cat.transaction() as s:
        for b in range(BASES):
            loc = data / f"t{b:02d}"
            for p in range(PARTS):
                (loc / f"m=2024-{p + 1:02d}").mkdir(parents=True)
                (loc / f"m=2024-{p + 1:02d}" / "part-0.parquet").write_bytes(b"x" * 100)
            cat.objects.insert(
                s,
                ObjectName.parse(f"t{b:02d}"),
                ObjectKind.EXTERNAL_TABLE,
                location=str(loc),
                format="parquet",
                schema_json="{}",
                partition_columns=["m"],
            )
            versions[f"default.t{b:02d}"] = parquet.pin(f"default.t{b:02d}", str(loc), "{}", ["m"]).versions()
    with cat.transaction() as s:
        for i in range(MVS):
            bases = (
                [f"default.t{i % BASES:02d}", f"default.t{(i * 7) % BASES:02d}"]
                if i < MVS // 2
                else [f"default.mv_{i % (MVS // 2):04d}"]
            )
            row = cat.objects.insert(
                s,
                ObjectName.parse(f"mv_{i:04d}"),
                ObjectKind.MATERIALIZED_VIEW,
                definition=f"SELECT m, count(*) AS n FROM {bases[0]} GROUP BY m",
                partition_by="m",
                base_tables=sorted(set(bases)),
                properties={"partition_refresh_number": "4"},
            )
            last = None
            for k in range(RUNS_PER_MV):
                state = RunState.FAILED if (k == RUNS_PER_MV - 1 and i % 5 == 0) else RunState.SUCCESS
                started = now - timedelta(hours=RUNS_PER_MV - k, minutes=i % 60)
                run = cat.runs.create(
                    s,
                    row.id,
                    f"default.mv_{i:04d}",
                    Trigger.SCHEDULED,
                    state,
                    mode="PCT",
                    mode_reason="changed",
                    started=started,
                    finished=started + timedelta(seconds=30),
                    chunks_planned=3,
                    chunks_done=3,
                    rows_written=1000,
                    error="boom" if state == RunState.FAILED else None,
                )
                last = run.run_id if state == RunState.SUCCESS else last
            entries = [
                VersionEntry(t, path, "old" if (i % 2 and path == "m=2024-03") else v)
                for t in sorted(set(bases))
                if t in versions
                for path, v in versions[t].items()
            ]
            cat.versions.apply(s, row.id, last or 0, entries, [], replace_all=True)
            cat.objects.set_fields(s, row.id, last_success_run_id=last)
            if i % 50 == 3:
                run = cat.runs.create(
                    s,
                    row.id,
                    f"default.mv_{i:04d}",
                    Trigger.MANUAL,
                    RunState.RUNNING,
                    started=now,
                    chunks_planned=10,
                    chunks_done=i % 10,
                )
                fresh_row = cat.objects.by_id(s, row.id)
                cat.objects.begin_refresh(s, fresh_row, run.run_id, "bench:1:0", 3600)
                if i % 100 == 3:
                    cat.control.send(s, row.id, run.run_id, ControlCommand.PAUSE)
    client.close()


def _rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024  # type: ignore[union-attr]


def _fetch(url: str) -> tuple[float, int]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        size = len(r.read())
    return time.perf_counter() - start, size


def _start(home: Path) -> tuple[subprocess.Popen[str], str]:
    """``sparkmv ui --port 0`` on ``home``: the process and its base URL (no trailing /)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    argv = [sys.executable, "-m", "sparkmv.cli.main", "--home", str(home), "ui", "--port", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    url = re.search(r"(http://\S+/)", proc.stdout.readline()).group(1).rstrip("/")  # type: ignore[union-attr]
    return proc, url


def loaded_libraries(pid: int) -> list[str]:
    """Which of pyarrow, pandas, numpy and pyspark the process loaded (by their files mapped)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    marks = {"pyarrow": "/pyarrow/", "pandas": "/pandas/", "numpy": "/numpy/", "pyspark": "/pyspark/"}
    return [name for name, mark in marks.items() if mark in maps]


def measure_catalog(home: Path) -> tuple[list[str], float, list[str]]:
    """Open every page of the catalog at ``home`` once; the per-page lines (page, status,
    size, VmRSS after it), the largest VmRSS (MB) and the heavy libraries loaded."""
    proc, url = _start(home)
    try:
        with urllib.request.urlopen(url + "/api/objects", timeout=120) as r:
            names = [o["name"] for o in json.load(r)["objects"]]
        pages = ["/", "/runs", "/rewrite", "/api/objects"] + [f"/objects/{n}" for n in names]
        for n in names:
            with urllib.request.urlopen(f"{url}/api/runs?name={n}&per_page=1", timeout=120) as r:
                pages += [f"/runs/{run['run_id']}" for run in json.load(r)["runs"]]
        lines, peak = [], 0.0
        for page in pages:
            seconds, size = _fetch(url + page)
            rss = _rss_mb(proc.pid)
            peak = max(peak, rss)
            lines.append(f"| `{page}` | {seconds * 1000:.0f} ms | {size / 1024:.0f} KiB | {rss:.0f} MB |")
        libraries = loaded_libraries(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    return lines, peak, libraries


def measure(home: Path, repeat: int) -> tuple[list[str], float, float]:
    """First and median warm times of each page, the server's resident memory (MB) and its
    start-up time (s: imports, catalog, every MV's freshness, the layout, until it prints its address)."""
    t0 = time.perf_counter()
    proc, url = _start(home)
    try:
        startup = time.perf_counter() - t0
        lines = []
        for page in PAGES:
            cold, size = _fetch(url + page)
            warm = [_fetch(url + page)[0] for _ in range(repeat)]
            lines.append(
                f"| `{page}` | {cold * 1000:.0f} ms | {statistics.median(warm) * 1000:.0f} ms |"
                f" {max(warm) * 1000:.0f} ms | {size / 1024:.0f} KiB |"
            )
        rss = _rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    return lines, rss, startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--write", action="store_true", help="record the figures in bench/RESULTS.md")
    parser.add_argument("--home", type=Path, help="measure this catalog's pages (e.g. .sparkmv-demo)")
    args = parser.parse_args()
    if args.home is not None:
        lines, peak, libraries = measure_catalog(args.home)
        head = (
            f"Catalog {args.home}: every page opened once. {platform.node()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.\n\n"
            "| page | time | size | server VmRSS after |\n|---|---|---|---|\n" + "\n".join(lines) + "\n\n"
            f"Largest server resident memory: {peak:.0f} MB (target: under 150 MB); "
            f"loaded of pyarrow, pandas, numpy, pyspark: {', '.join(libraries) or 'none'}."
        )
        print(head)
        if args.write:
            from bench.results import git_commit, publish, verdict

            date = f"{datetime.now(UTC):%Y-%m-%d}"
            headline = f"largest server resident memory {peak:.0f} MB (target < 150 MB: {verdict(peak < 150)})"
            entry = f"### {date}: `bench/bench_ui.py --home {args.home}`\n\n{head}"
            publish("## Web UI over the demo catalog", entry, headline, date, git_commit(), script="bench/bench_ui.py")
        return
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        build(Path(tmp) / "home", Path(tmp) / "data")
        built = time.perf_counter() - t0
        lines, rss, startup = measure(Path(tmp) / "home", args.repeat)
    head = (
        f"{MVS} MVs ({MVS // 2} over {BASES} Parquet base tables of {PARTS} partitions, {MVS // 2} over MVs), "
        f"{MVS * RUNS_PER_MV:,} runs; catalog written in {built:.1f} s. {platform.node()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
        f"`dot` {'used' if __import__('shutil').which('dot') else 'absent (own layout)'}.\n\n"
        f"Start-up (imports, every MV's freshness, the `dot` layout) {startup:.1f} s.\n\n"
        "| page | first request | median of next | slowest of next | size |\n"
        "|---|---|---|---|---|\n" + "\n".join(lines) + f"\n\nServer resident memory after the requests: {rss:.0f} MB."
    )
    print(head)
    if args.write:
        from bench.results import git_commit, publish, verdict

        date = f"{datetime.now(UTC):%Y-%m-%d}"
        headline = (
            f"server resident memory {rss:.0f} MB after the requests (target < 150 MB: "
            f"{verdict(rss < 150)}); start-up {startup:.1f} s"
        )
        entry = f"### {date}: `bench/bench_ui.py --repeat {args.repeat}`\n\n{head}"
        publish("## Web UI over 500 generated MVs", entry, headline, date, git_commit(), script="bench/bench_ui.py")


if __name__ == "__main__":
    main()
