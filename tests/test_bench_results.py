"""``bench/results.py``'s ``publish``: a new run becomes the latest of its section of
``RESULTS.md``, the previous latest moves to the benchmark's history file. Pure text, no Spark."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH_RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results.py"


def _results_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_results_under_test", BENCH_RESULTS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BEFORE = """# Benchmark results

Intro.

## Partition change tracking

`bench/bench_pct.py`. Older runs in full: [history/pct.md](history/pct.md).

**Latest run:** 2026-11-28, commit `abc1234`: PCT 12.4x faster than FULL (target >= 20x: missed)

### 2026-11-28: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.34 s |

### History

| date | commit | headline |
|---|---|---|
| 2026-11-21 | — | PCT 9.1x faster than FULL |

## Query rewrite

`bench/bench_rewrite.py`.
"""

HISTORY_BEFORE = """# Partition change tracking: older runs

Header.

### 2026-11-21: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.64 s |
"""

NEW_RUN = """### 2026-12-05: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.20 s |
"""


def test_publish_replaces_the_latest_run_and_moves_it_to_the_history(tmp_path: Path) -> None:
    results = _results_module()
    path = tmp_path / "RESULTS.md"
    path.write_text(BEFORE)
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "pct.md").write_text(HISTORY_BEFORE)

    results.publish(
        "## Partition change tracking",
        NEW_RUN,
        "PCT 21.0x faster than FULL (target >= 20x: met)",
        "2026-12-05",
        "def5678",
        results=path,
    )

    assert path.read_text() == (
        """# Benchmark results

Intro.

## Partition change tracking

`bench/bench_pct.py`. Older runs in full: [history/pct.md](history/pct.md).

**Latest run:** 2026-12-05, commit `def5678`: PCT 21.0x faster than FULL (target >= 20x: met)

### 2026-12-05: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.20 s |

### History

| date | commit | headline |
|---|---|---|
| 2026-11-28 | `abc1234` | PCT 12.4x faster than FULL (target >= 20x: missed) |
| 2026-11-21 | — | PCT 9.1x faster than FULL |

## Query rewrite

`bench/bench_rewrite.py`.
"""
    )
    assert (tmp_path / "history" / "pct.md").read_text() == (
        """# Partition change tracking: older runs

Header.

### 2026-11-28: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.34 s |

### 2026-11-21: `bench/bench_pct.py`

| step | wall time |
|---|---:|
| PCT refresh | 0.64 s |
"""
    )


def test_publish_creates_a_missing_section_and_history_file(tmp_path: Path) -> None:
    results = _results_module()
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nIntro.\n")

    results.publish(
        "Expectations",
        "| a | b |\n|---|---|\n| 1 | 2 |\n",
        "a = 1",
        "2026-12-05",
        None,
        script="bench/x.py",
        results=path,
    )
    assert path.read_text() == (
        """# Benchmark results

Intro.

## Expectations

`bench/x.py`. Older runs in full: [history/expectations.md](history/expectations.md).

**Latest run:** 2026-12-05, commit —: a = 1

| a | b |
|---|---|
| 1 | 2 |

### History

| date | commit | headline |
|---|---|---|
"""
    )

    results.publish(
        "Expectations", "| a | b |\n|---|---|\n| 3 | 4 |\n", "a = 3 | b = 4", "2026-12-06", None, results=path
    )
    assert path.read_text().endswith(
        """**Latest run:** 2026-12-06, commit —: a = 3 | b = 4

| a | b |
|---|---|
| 3 | 4 |

### History

| date | commit | headline |
|---|---|---|
| 2026-12-05 | — | a = 1 |
"""
    )
    assert (tmp_path / "history" / "expectations.md").read_text() == (
        """# Expectations: older runs

The full tables of this benchmark's older runs, newest first. The latest run, and one line per run,
are in [../RESULTS.md](../RESULTS.md) (section "Expectations").

### 2026-12-05, commit —

| a | b |
|---|---|
| 1 | 2 |
"""
    )


def test_slug() -> None:
    assert _results_module().slug("TPC-H's 22 queries kept fresh through RF1 and RF2") == (
        "tpc-h-22-queries-kept-fresh-through-rf1-and-rf2"
    )
