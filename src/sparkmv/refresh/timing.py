"""Where the time of a refresh run goes: wall-clock seconds per phase, and the run's Spark
jobs (count and seconds), recorded with every run (``smv_task_runs.timings``) and shown by
``sparkmv runs NAME`` and ``EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW``.

Phases (each second counted once, in the innermost phase open at that moment):

- ``plan``: analysis and planning (technique, estimates, chunks);
- ``pin``: pinning the base tables' snapshots or file listings;
- ``changes``: reading base changes (signed rows, netting into the change cache);
- ``compute``: computing and staging the chunks (Spark jobs, the incremental merge, writes);
- ``commit``: the Iceberg commit that publishes the run;
- ``catalog``: sparkmv's catalog transactions (plan, progress, result);
- ``other``: the rest of the run (cleanup, lease checks, Python between phases).

A phase is opened with :func:`phase` anywhere below the lifecycle; outside a run (no
:func:`recording` active) it costs nothing.

>>> with recording() as t:
...     with phase("plan"):
...         with phase("pin"):
...             pass
>>> sorted(t.phases) == ["pin", "plan"]
True
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

PHASES = ("plan", "pin", "changes", "compute", "commit", "catalog", "other")


@dataclass
class Timings:
    """Seconds per phase of one run (exclusive of nested phases) and its Spark jobs.

    Attributes:
        phases: phase -> seconds.
        spark_jobs: the run's Spark jobs (by its tag): ``count``, ``seconds`` (sum of each
            job's submission to completion) and ``groups`` (job group -> ``[count, seconds]``);
            empty when unknown (Spark Connect, or no Spark job ran).
        started: monotonic clock at the start (for ``other``).
    """

    phases: dict[str, float] = field(default_factory=dict)
    spark_jobs: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    _stack: list[list[Any]] = field(default_factory=list)

    def enter(self, name: str) -> None:
        now = time.monotonic()
        if self._stack:
            top = self._stack[-1]
            self.phases[top[0]] = self.phases.get(top[0], 0.0) + now - top[1]
        self._stack.append([name, now])

    def exit(self) -> None:
        now = time.monotonic()
        name, start = self._stack.pop()
        self.phases[name] = self.phases.get(name, 0.0) + now - start
        if self._stack:
            self._stack[-1][1] = now

    def to_json(self) -> dict[str, Any]:
        """``{"total": s, "phases": {phase: s}, "spark_jobs": {...}}``, seconds to 4 places,
        ``other`` the total minus the phases."""
        total = time.monotonic() - self.started
        phases = {p: round(s, 4) for p, s in self.phases.items() if s > 0}
        phases["other"] = round(max(0.0, total - sum(self.phases.values())), 4)
        return {"total": round(total, 4), "phases": phases, "spark_jobs": self.spark_jobs}


_CURRENT: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("sparkmv_run_timings", default=None)


@contextmanager
def recording() -> Iterator[Timings]:
    """Record the phases of the run executed inside (one per thread)."""
    timings = Timings()
    token = _CURRENT.set(timings)
    try:
        yield timings
    finally:
        _CURRENT.reset(token)


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the time inside as ``name`` (one of :data:`PHASES`) of the current run."""
    timings = _CURRENT.get()
    if timings is None:
        yield
        return
    timings.enter(name)
    try:
        yield
    finally:
        timings.exit()


def current() -> Timings | None:
    """The timings being recorded in this thread (None outside a run)."""
    return _CURRENT.get()


def breakdown_text(timings: dict[str, Any] | None) -> str:
    """One line of a run's recorded timings (``""`` when none):

    >>> breakdown_text({"total": 1.5, "phases": {"plan": 0.2, "compute": 1.1, "other": 0.2},
    ...                 "spark_jobs": {"count": 3, "seconds": 0.9}})
    'plan 0.20 s, compute 1.10 s, other 0.20 s; 3 Spark jobs 0.90 s'
    """
    if not timings:
        return ""
    phases = timings.get("phases") or {}
    parts = [f"{p} {phases[p]:.2f} s" for p in PHASES if p in phases]
    jobs = timings.get("spark_jobs") or {}
    text = ", ".join(parts)
    if jobs.get("count"):
        text += f"; {jobs['count']} Spark jobs {jobs['seconds']:.2f} s"
    return text
