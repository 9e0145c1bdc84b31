"""Run every ``bench/bench_*.py`` script, one after the other, each in its own process.

``make bench`` calls this. Each script records its own figures in ``bench/RESULTS.md``.
Extra arguments are passed to every script. Exit status: 0 when every script succeeded,
else 1 (every script still runs).

Usage: ``.venv/bin/python bench/run_all.py [--only NAME ...] [-- script args]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def scripts(only: list[str] | None = None) -> list[Path]:
    """The benchmark scripts present, sorted by name (``only``: names or stems to keep)."""
    found = sorted(BENCH.glob("bench_*.py"))
    if only:
        wanted = {o.removesuffix(".py") for o in only}
        found = [p for p in found if p.stem in wanted or p.stem.removeprefix("bench_") in wanted]
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the scripts; print a summary line per script."""
    parser = argparse.ArgumentParser(description="run every bench/bench_*.py")
    parser.add_argument("--only", nargs="*", help="script names to run (default: all)")
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="arguments after -- go to every script")
    args = parser.parse_args(argv)
    extra = [a for a in args.rest if a != "--"]
    results: list[tuple[str, int, float]] = []
    for script in scripts(args.only):
        print(f"== {script.name}", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script), *extra], cwd=BENCH.parent)
        results.append((script.name, code, time.monotonic() - started))
    print("== summary")
    for name, code, seconds in results:
        print(f"{name}: {'ok' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s")
    if not results:
        print("no bench/bench_*.py scripts found")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
