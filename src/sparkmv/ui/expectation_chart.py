"""The expectations chart of a dataset's page as server-side SVG: rows failed per run, one
series (line and marks) per expectation, built like the refresh history (:mod:`sparkmv.ui.charts`).

No JavaScript: a mark of a refresh run is an SVG ``<a>`` to the run's page (``/runs/{run_id}``),
one of a pipeline's refresh outside the run lifecycle (no run id) a ``<g>``; each has a
``<title>`` tooltip (expectation, action, rows failed of rows counted) and carries
``data-expectation``, ``data-run`` (empty without a run id) and ``data-failed``. x is the run's
position (oldest left, evenly spaced: a run's time says little about its counts); y the rows
failed on a logarithmic scale, since a FULL run and an incremental one differ by orders of
magnitude. Every text is escaped (markupsafe).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import escape

from sparkmv.ui.charts import LEFT, RIGHT, WIDTH, human_number

SERIES_COLOURS = ("#1d5fbf", "#c62828", "#2e9d3a", "#ef6c00", "#7e57c2", "#00838f", "#6d4c41", "#ad1457")
"""Colour of each expectation's series, by its position in name order (cycled)."""
PLOT_TOP, PLOT_H = 44, 140


@dataclass(frozen=True)
class ExpectationCount:
    """One expectation's counts in one run: rows whose condition was TRUE (``passed``), and
    FALSE or NULL (``failed``); ``action``: ``warn``, ``drop`` or ``fail``."""

    expectation: str
    action: str
    passed: int
    failed: int


@dataclass(frozen=True)
class ExpectationRun:
    """One run's expectation results as the chart sees them.

    Attributes:
        run_id: the refresh run (None: a pipeline's refresh outside the run lifecycle).
        at: when the results were stored (naive UTC).
        counts: one per expectation the run counted.
    """

    run_id: int | None
    at: datetime
    counts: tuple[ExpectationCount, ...]

    @property
    def label(self) -> str:
        """``run N``, or the time of a pipeline's refresh without a run id."""
        return f"run {self.run_id}" if self.run_id is not None else f"refresh at {self.at:%Y-%m-%d %H:%M:%S}"


def expectation_runs(runs: Sequence[Mapping[str, Any]]) -> list[ExpectationRun]:
    """The page's expectation history (``object_detail(...)["expectations"]``: dicts with
    ``run_id``, ``recorded_at`` in ISO 8601 and ``results``, oldest first) as chart runs."""
    return [
        ExpectationRun(
            r["run_id"],
            datetime.fromisoformat(r["recorded_at"]),
            tuple(
                ExpectationCount(e["expectation"], e["action"], e["rows_passed"], e["rows_failed"])
                for e in r["results"]
            ),
        )
        for r in runs
    ]


def _legend(names: Sequence[str]) -> str:
    parts: list[str] = []
    x = float(LEFT)
    for i, name in enumerate(names):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        shown = name if len(name) <= 30 else name[:29] + "…"
        parts.append(f'<line x1="{x:.0f}" y1="12" x2="{x + 18:.0f}" y2="12" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x + 9:.0f}" cy="12" r="4" fill="{colour}"/>')
        parts.append(f'<text x="{x + 24:.0f}" y="16">{escape(shown)}</text>')
        x += 36 + 7 * len(shown)
    return '<g class="legend">' + "".join(parts) + "</g>"


def _point(run: ExpectationRun, count: ExpectationCount, x: float, y: float, colour: str) -> str:
    """One mark: a link to the run's page (a plain group without a run id) with a tooltip."""
    total = count.passed + count.failed
    title = f"{run.label}: {count.expectation} ({count.action}): {count.failed} of {total} rows failed"
    attrs = (
        f'class="point" data-expectation="{escape(count.expectation)}"'
        f' data-run="{run.run_id if run.run_id is not None else ""}" data-failed="{count.failed}"'
    )
    shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}" stroke="#ffffff" stroke-width="1"/>'
    inner = f"<title>{escape(title)}</title>{shape}"
    if run.run_id is None:
        return f"<g {attrs}>{inner}</g>"
    return f'<a href="/runs/{run.run_id}" {attrs}>{inner}</a>'


def _series(name: str, colour: str, runs: Sequence[ExpectationRun], xs: Sequence[float], y_of: Any) -> str:
    """The line and marks of expectation ``name`` over the runs that counted it."""
    points = [(run, c, x) for run, x in zip(runs, xs, strict=True) for c in run.counts if c.expectation == name]
    line = " ".join(f"{x:.1f},{y_of(c.failed):.1f}" for _, c, x in points)
    out = [f'<g class="series" data-expectation="{escape(name)}">']
    if len(points) > 1:
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
    out.extend(_point(run, c, x, y_of(c.failed), colour) for run, c, x in points)
    out.append("</g>")
    return "".join(out)


def expectations_svg(runs: Sequence[ExpectationRun]) -> str:
    """Rows failed per run (``runs`` oldest first), one series per expectation (sorted by
    name), as one ``<svg id="expectations-chart">``; with no runs, a line saying so."""
    if not runs:
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" id="expectations-chart" width="300" height="24">'
            '<text x="0" y="16">no expectation results</text></svg>'
        )
    names = sorted({c.expectation for r in runs for c in r.counts})
    peak = max((c.failed for r in runs for c in r.counts), default=0) or 1
    bottom = PLOT_TOP + PLOT_H
    height = bottom + 24

    def y_of(v: float) -> float:
        return bottom - (PLOT_H - 8) * math.log10(1 + v) / math.log10(1 + peak)

    left, right = LEFT + 10, WIDTH - RIGHT - 10
    step = (right - left) / (len(runs) - 1) if len(runs) > 1 else 0.0
    xs = [left + i * step if len(runs) > 1 else (left + right) / 2 for i in range(len(runs))]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="expectations-chart" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" role="img" aria-label="rows failed per expectation and run">',
        _legend(names),
        f'<text class="axis" x="{LEFT}" y="{PLOT_TOP - 8}">rows failed per run (log scale)</text>',
        f'<line x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#90a4ae"/>',
        f'<line x1="{LEFT}" y1="{PLOT_TOP + 8}" x2="{WIDTH - RIGHT}" y2="{PLOT_TOP + 8}" stroke="#eceff1"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{PLOT_TOP + 12}" text-anchor="end">{human_number(peak)}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{bottom + 4}" text-anchor="end">0</text>',
    ]
    for i, name in enumerate(names):
        out.append(_series(name, SERIES_COLOURS[i % len(SERIES_COLOURS)], runs, xs, y_of))
    out.append(f'<text class="tick" x="{LEFT}" y="{height - 4}">{escape(runs[0].label)}</text>')
    out.append(
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{height - 4}" text-anchor="end">{escape(runs[-1].label)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out)
