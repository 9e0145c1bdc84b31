"""TPC-H's 22 MVs refreshed as one pass after RF1 and RF2, against a FULL pass; not a test.

The lake and the changes are those of ``bench/bench_tpch_refresh.py`` (TPC-H at ``--sf`` in
an external pyiceberg SQL catalog, ``lineitem`` / ``orders`` partitioned by month; RF1
appends 0.1 % new orders, RF2 deletes 0.1 % merge-on-read or, with ``--rf2 copy-on-write``,
by pyiceberg's ``Table.delete``). One warm process, one SparkSession ``local[2]``:

1. the 22 queries become MVs ``q1`` .. ``q22`` (AUTO), built by their CREATE;
2. after each change: ``REFRESH MATERIALIZED VIEW q1, ..., q22`` (one pass: dependency
   order, up to four at once, each change read and netted once for all; timed as a whole),
   every MV compared with its query computed by DuckDB, then the same pass with ``FORCE``
   (a FULL recompute of every MV over the same snapshots: the yardstick), timed alike.

Printed and recorded: the wall time of both passes and their ratio, the technique of each
MV, and where the AUTO pass's time went (each run's phases summed over the 22, from
``smv_task_runs.timings``, :mod:`sparkmv.refresh.timing`).

Usage: ``nice -n 10 .venv/bin/python bench/bench_tpch_pass.py [--sf 1] [--rf2 copy-on-write]
[--no-write]``. Exit status 1 when an MV differs from DuckDB's result or a refresh failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_tpch_refresh import KEPT, _check, _keys, _technique, lake_client, rf1, rf2  # noqa: E402
from results import git_commit, publish, timed, today  # noqa: E402

SECTION = "## TPC-H's 22 MVs refreshed as one pass"


def step(client: Any, queries: dict[str, str], what: str) -> dict[str, Any]:
    """The AUTO pass, the check of every MV, then the FULL pass; figures of the step."""
    names = list(queries)
    auto, auto_s = timed(lambda: client.refresh_many(names))
    techniques = {str(n): _technique(r) for n, r in auto.runs.items()}
    exact = {mv: _check(client, mv, q)[0] for mv, q in queries.items()}
    phases: Counter[str] = Counter()
    jobs = 0
    for run in auto.runs.values():
        timings = run.timings or {}
        phases.update(timings.get("phases") or {})
        jobs += (timings.get("spark_jobs") or {}).get("count", 0)
    full, full_s = timed(lambda: client.refresh_many(names, force=True))
    failed = [str(n) for n in auto.failed + full.failed]
    kept = sum(1 for t in techniques.values() if t in KEPT)
    print(
        f"{what}\n  AUTO pass {auto_s:.1f} s ({kept} of {len(names)} not FULL), FULL pass {full_s:.1f} s, "
        f"ratio {full_s / auto_s:.2f}x; exact {sum(exact.values())}/{len(exact)}; failed {failed}; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return {
        "what": what,
        "auto_s": auto_s,
        "full_s": full_s,
        "techniques": techniques,
        "exact": exact,
        "failed": failed,
        "phases": dict(phases),
        "jobs": jobs,
        "load": os.getloadavg()[0],
    }


def run(sf: float, data: Path, work: Path, rf2_mode: str) -> dict[str, Any]:
    """Create the lake and the MVs in ``work``, then the two steps; returns the figures."""
    from sparkmv.demo.tpch_queries import TPCH_QUERIES, qualified

    cat, _, _, client = lake_client(sf, data, work)
    figures: dict[str, Any] = {"sf": sf, "rf2": rf2_mode, "load_before": os.getloadavg()[0], "steps": []}
    try:
        queries = {mv: qualified(q, "lake.tpch") for mv, q in TPCH_QUERIES.items()}
        for mv, query in queries.items():
            client.execute(f"CREATE MATERIALIZED VIEW {mv} AS {query}")
        print(f"TPC-H SF {sf:g}: {len(queries)} MVs built", flush=True)
        rnd, original_max = random.Random(24), _keys(cat)[-1]
        figures["steps"].append(step(client, queries, rf1(cat, rnd)))
        figures["steps"].append(step(client, queries, rf2(cat, rnd, original_max, rf2_mode)))
    finally:
        client.close()
    figures["load_after"] = os.getloadavg()[0]
    return figures


def report(figures: dict[str, Any]) -> str:
    """The Markdown entry of one run."""
    head = (
        f"### {dt.date.today().isoformat()}: "
        f"`bench/bench_tpch_pass.py --sf {figures['sf']:g} --rf2 {figures['rf2']}`\n\n"
        f"Machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, Spark `local[2]`, one process; "
        f"1-minute load {figures['load_before']:.1f} before, {figures['load_after']:.1f} after.\n\n"
        "| step | AUTO pass | FULL pass | FULL / AUTO | not FULL | exact | Spark jobs |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for s in figures["steps"]:
        kept = sum(1 for t in s["techniques"].values() if t in KEPT)
        n = len(s["techniques"])
        lines.append(
            f"| {s['what']} | {s['auto_s']:.1f} s | {s['full_s']:.1f} s | {s['full_s'] / s['auto_s']:.2f}x | "
            f"{kept} of {n} | {sum(s['exact'].values())} of {len(s['exact'])} | {s['jobs']} |"
        )
    lines.append("")
    for s in figures["steps"]:
        total = sum(s["phases"].values()) or 1.0
        parts = ", ".join(
            f"{p} {v:.1f} s ({v / total:.0%})" for p, v in sorted(s["phases"].items(), key=lambda x: -x[1])
        )
        techniques = Counter(s["techniques"].values())
        lines.append(f"- {s['what']}: where the AUTO runs' time went (summed over the MVs): {parts}.")
        lines.append(f"  Techniques: {', '.join(f'{t} {c}' for t, c in sorted(techniques.items()))}.")
    return "\n".join(lines) + "\n"


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    parts = []
    for s in figures["steps"]:
        kept = sum(1 for t in s["techniques"].values() if t in KEPT)
        parts.append(
            f"{s['what'].split(':')[0]}: FULL / AUTO {s['full_s'] / s['auto_s']:.2f}x, {kept} of "
            f"{len(s['techniques'])} not FULL"
        )
    return "; ".join(parts) + " (targets >= 5x and >= 20 of 22 not FULL)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report and (unless ``--no-write``) record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch", help="generated tables are cached here")
    parser.add_argument("--rf2", choices=("merge-on-read", "copy-on-write"), default="merge-on-read")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-tpch-pass-") as tmp:
        figures = run(args.sf, args.data.resolve(), Path(tmp), args.rf2)
    entry = report(figures)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_tpch_pass.py")
    good = all(all(s["exact"].values()) and not s["failed"] for s in figures["steps"])
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
