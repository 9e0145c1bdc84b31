"""Recording benchmark figures in ``bench/RESULTS.md`` (shared by the bench scripts)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_results(entry: str, section: str, path: Path = RESULTS) -> None:
    """Append ``entry`` at the end of ``section`` (a ``## ...`` heading line) of ``path``;
    the section, and the file, are created when missing."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if section not in text:
        text = text.rstrip("\n") + f"\n\n{section}\n\n{entry}"
    else:
        start = text.index(section) + len(section)
        following = text.find("\n## ", start)
        end = len(text) if following < 0 else following + 1
        text = text[:end].rstrip("\n") + f"\n\n{entry}\n" + text[end:]
    path.write_text(text.rstrip("\n") + "\n")


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the wall-clock seconds it took."""
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def cpu_clock(spark: Any) -> Callable[[], float]:
    """A clock of the CPU seconds used so far by this Python process and the local Spark JVM
    (user + system, from ``/proc/<pid>/stat``)."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    tick = os.sysconf("SC_CLK_TCK")

    def clock() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick + time.process_time()

    return clock
