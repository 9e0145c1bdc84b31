"""AUTO's cost model, fitted from the catalog's own refresh runs (as Databricks' Enzyme fits
its cost model from the history of past runs).

Each refresh run stores the techniques AUTO weighed with their estimates in bytes read
(:mod:`sparkmv.refresh.incremental.candidates`), the one it ran, and its wall time. Per
technique (FULL, PCT, INCREMENTAL), seconds are fitted by least squares as

    seconds = fixed_seconds + estimate_bytes / bytes_per_second

over the catalog's newest :data:`HISTORY` successful runs of that technique (the fixed part
covers its Spark jobs, its commit and its catalog transactions; the slope its reading and
merging). A technique with fewer than :data:`MIN_RUNS` runs keeps no fitted constants; AUTO
then compares bytes, its default for a new catalog. Once every eligible technique of a run
is fitted, AUTO picks the least predicted seconds
(:func:`sparkmv.refresh.incremental.candidates.choose`).

How often AUTO picked the faster technique: for each past run where it weighed two or
more, the chosen technique's measured seconds against the least predicted seconds of the
others (right when it is not slower), published in ``sparkmv.cost_model``.

>>> m = fit([Sample("FULL", 100 * k, 1.0 + k) for k in range(1, 30)])
>>> round(m.techniques["FULL"].fixed_seconds, 3), round(m.techniques["FULL"].bytes_per_second, 1)
(1.0, 100.0)
>>> round(m.predict("FULL", 500), 3), m.predict("PCT", 500) is None
(6.0, True)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

MIN_RUNS = 20
"""Runs of one technique before its constants are fitted (fewer: AUTO compares bytes)."""
HISTORY = 500
"""Newest successful runs of each technique the fit reads."""
TECHNIQUES = ("FULL", "PCT", "INCREMENTAL")


@dataclass(frozen=True)
class Sample:
    """One past run: technique, its estimate (bytes read) and its wall time (seconds);
    ``others``: the other eligible techniques' estimates (technique -> bytes)."""

    mode: str
    estimate_bytes: int
    seconds: float
    others: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Fitted:
    """The constants of one technique: seconds = fixed_seconds + bytes / bytes_per_second
    (``bytes_per_second`` None: no slope, the fixed part only); ``runs``: samples fitted."""

    fixed_seconds: float
    bytes_per_second: float | None
    runs: int

    def predict(self, estimate_bytes: int) -> float:
        """Predicted seconds of a run reading ``estimate_bytes``."""
        rate = self.bytes_per_second
        return self.fixed_seconds + (estimate_bytes / rate if rate else 0.0)


@dataclass(frozen=True)
class CostModel:
    """Fitted constants per technique, the share of right choices, and when.

    Attributes:
        techniques: technique -> :class:`Fitted` (only those with :data:`MIN_RUNS` runs).
        weighed: past runs where AUTO weighed two or more techniques with a fitted alternative.
        right: of those, the runs whose chosen technique was not slower than the others' prediction.
        fitted_at: the finish time of the newest run fitted (None: nothing fitted).
        runs: samples read.
    """

    techniques: dict[str, Fitted]
    weighed: int = 0
    right: int = 0
    fitted_at: datetime | None = None
    runs: int = 0

    def predict(self, mode: str, estimate_bytes: int) -> float | None:
        """Predicted seconds of ``mode`` reading ``estimate_bytes``; None when not fitted."""
        fitted = self.techniques.get(mode)
        return None if fitted is None else fitted.predict(estimate_bytes)

    @property
    def right_share(self) -> float | None:
        """Share of right choices (None when no run was weighed)."""
        return self.right / self.weighed if self.weighed else None


def fit(samples: Iterable[Sample], fitted_at: datetime | None = None) -> CostModel:
    """Fit every technique with :data:`MIN_RUNS` samples, then score the past choices."""
    by_mode: dict[str, list[Sample]] = {}
    every = list(samples)
    for s in every:
        by_mode.setdefault(s.mode, []).append(s)
    techniques = {m: _line(rows) for m, rows in by_mode.items() if m in TECHNIQUES and len(rows) >= MIN_RUNS}
    model = CostModel(techniques, fitted_at=fitted_at, runs=len(every))
    weighed = right = 0
    for s in every:
        alternatives = [model.predict(m, b) for m, b in s.others.items() if m != s.mode]
        known = [p for p in alternatives if p is not None]
        if not known:
            continue
        weighed += 1
        right += s.seconds <= min(known)
    return replace(model, weighed=weighed, right=right)


def _line(rows: Sequence[Sample]) -> Fitted:
    """Least squares of seconds on bytes, both constants kept non-negative."""
    n = len(rows)
    mean_x = sum(r.estimate_bytes for r in rows) / n
    mean_y = sum(r.seconds for r in rows) / n
    var = sum((r.estimate_bytes - mean_x) ** 2 for r in rows)
    cov = sum((r.estimate_bytes - mean_x) * (r.seconds - mean_y) for r in rows)
    slope = cov / var if var > 0 else 0.0
    if slope <= 0:  # no measurable cost per byte: the fixed part alone
        return Fitted(max(0.0, mean_y), None, n)
    fixed = mean_y - slope * mean_x
    if fixed < 0:  # through the origin instead
        slope = sum(r.estimate_bytes * r.seconds for r in rows) / (sum(r.estimate_bytes**2 for r in rows) or 1)
        fixed = 0.0
    return Fitted(fixed, 1.0 / slope, n)


REFIT_EVERY = 10
"""New runs in the catalog before the model is fitted again."""
_FITTED: dict[str, tuple[int, CostModel]] = {}
"""Catalog URL -> (newest run id when fitted, the model): the fit is read once per
:data:`REFIT_EVERY` runs, not per refresh."""


def learned(catalog: Any) -> CostModel:
    """The cost model of ``catalog`` (a :class:`sparkmv.catalog.Catalog`), fitted from its
    runs and cached until :data:`REFIT_EVERY` more have run."""
    with catalog.read() as s:
        newest = catalog.runs.newest_run_id(s)
        key = str(catalog.db.engine.url)
        cached = _FITTED.get(key)
        if cached is not None and 0 <= newest - cached[0] < REFIT_EVERY:
            return cached[1]
        rows = [r for mode in TECHNIQUES for r in catalog.runs.weighed(s, mode, HISTORY)]
        samples = [_sample(r) for r in rows if r.started is not None and r.finished is not None]
    fitted_at = max((r.finished for r in rows if r.finished is not None), default=None)
    model = fit(samples, fitted_at)
    _FITTED[key] = (newest, model)
    return model


def _sample(row: Any) -> Sample:
    others = {
        c["mode"]: int(c["estimate_bytes"])
        for c in row.candidates or []
        if c.get("eligible") and c.get("estimate_bytes") is not None
    }
    return Sample(row.mode, int(row.estimate_bytes), (row.finished - row.started).total_seconds(), others)
