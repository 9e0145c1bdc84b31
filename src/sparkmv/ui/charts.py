"""Refresh history charts as server-side SVG: pure functions from runs to one ``<svg>`` text.

No JavaScript and nothing fetched: each mark is an SVG ``<a>`` to the run's page
(``/runs/{run_id}``) with a ``<title>`` tooltip. A mark's fill is the run's technique
(:data:`TECHNIQUE_COLOURS`); a FAILED run is drawn as a square with a thick red outline, a
CANCELLED one as a hollow dashed circle, every other run as a filled circle. Every text is
escaped (markupsafe). Marks carry ``data-run``, ``data-technique`` and ``data-state``.

The MV chart (:func:`history_svg`) has one panel per measure, x = the run's start time:
``duration`` (seconds), ``rows`` (rows written) and, when any run recorded them, ``bytes``
(bytes read, the mark, beside the chosen technique's estimate, a short black bar); rows and
bytes on a logarithmic scale, since a FULL run and an incremental one differ by orders of
magnitude. The summary
(:func:`summary_svg`) has one lane per object, x = time across all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from markupsafe import escape

TECHNIQUE_COLOURS = {
    "FULL": "#1d5fbf",
    "PCT": "#2e9d3a",
    "INCREMENTAL": "#ef6c00",
    "SKIP": "#9e9e9e",
    "OTHER": "#7e57c2",
}
"""Fill of a run's mark by technique (``OTHER``: a table reload, a run not planned yet)."""
FAILED_STROKE = "#c62828"
WIDTH, LEFT, RIGHT, PANEL_H, GAP, TOP = 760, 78, 16, 110, 34, 34
LANE_H, LANE_LEFT = 22, 190


@dataclass(frozen=True)
class ChartRun:
    """One run as the charts see it.

    Attributes:
        technique: ``FULL``, ``PCT``, ``INCREMENTAL``, ``SKIP`` or ``OTHER`` (:func:`technique`).
        at: when it started (or was created, when it never started), naive UTC.
        seconds: duration (None while unfinished); rows: rows written;
        estimate_bytes / bytes_read: the chosen technique's estimate and the bytes read (None when
            not recorded).
    """

    run_id: int
    name: str
    technique: str
    state: str
    at: datetime
    seconds: float | None
    rows: int
    estimate_bytes: int | None = None
    bytes_read: int | None = None


def technique(mode: str | None, state: str) -> str:
    """The technique of a run from its mode and state.

    >>> technique("PCT", "SUCCESS"), technique(None, "SKIPPED"), technique("FULL_RELOAD", "SUCCESS")
    ('PCT', 'SKIP', 'OTHER')
    """
    if state == "SKIPPED" or mode == "SKIP":
        return "SKIP"
    return mode if mode in ("FULL", "PCT", "INCREMENTAL") else "OTHER"


def chart_runs(runs: Sequence[Mapping[str, Any]]) -> list[ChartRun]:
    """The finished runs among ``runs`` (``run_json`` dicts, any order), oldest first."""
    out = []
    for r in runs:
        when = r.get("started") or r.get("created")
        if r["state"] in ("PENDING", "RUNNING", "FINISHING", "MERGED") or not when:
            continue
        out.append(
            ChartRun(
                run_id=r["run_id"],
                name=r["name"],
                technique=technique(r.get("mode"), r["state"]),
                state=r["state"],
                at=datetime.fromisoformat(when),
                seconds=r.get("duration_seconds"),
                rows=r.get("rows_written") or 0,
                estimate_bytes=r.get("estimate_bytes"),
                bytes_read=r.get("bytes_read"),
            )
        )
    return sorted(out, key=lambda c: (c.at, c.run_id))


def human_number(value: float) -> str:
    """A number in at most 4 characters of digits and a unit letter.

    >>> human_number(0), human_number(950), human_number(12_345), human_number(3.2e9), human_number(2.5)
    ('0', '950', '12k', '3.2G', '2.5')
    """
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.1f}{unit}" if scaled < 10 else f"{scaled:.0f}{unit}"
    return f"{value:.1f}" if value != int(value) else f"{int(value)}"


def _x_scale(runs: Sequence[ChartRun], left: float, right: float) -> Any:
    """Start time -> x in [left, right]; a single instant is centred."""
    lo, hi = min(r.at for r in runs), max(r.at for r in runs)
    span = (hi - lo).total_seconds()
    if span <= 0:
        return lambda _at: (left + right) / 2
    return lambda at: left + (right - left) * (at - lo).total_seconds() / span


def mark_svg(run: ChartRun, x: float, y: float) -> str:
    """One run's mark at (x, y): a link to its page with a tooltip (see the module docstring)."""
    fill = TECHNIQUE_COLOURS[run.technique]
    if run.state == "FAILED":
        shape = (
            f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{fill}"'
            f' stroke="{FAILED_STROKE}" stroke-width="2.5"/>'
        )
    elif run.state == "CANCELLED":
        shape = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#ffffff" stroke="{fill}" stroke-width="2"'
            ' stroke-dasharray="2 2"/>'
        )
    else:
        shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{fill}" stroke="#ffffff" stroke-width="1"/>'
    seconds = f"{run.seconds:.1f} s" if run.seconds is not None else "unfinished"
    extra = "".join(
        f", {label} {human_number(v)}B"
        for label, v in (("estimate", run.estimate_bytes), ("read", run.bytes_read))
        if v is not None
    )
    title = f"run {run.run_id} of {run.name}: {run.technique} {run.state}, {seconds}, {run.rows} rows{extra}"
    href = f"/runs/{run.run_id}"
    return (
        f'<a href="{escape(href)}" class="mark" data-run="{run.run_id}" data-technique="{run.technique}"'
        f' data-state="{escape(run.state)}"><title>{escape(title)}</title>{shape}</a>'
    )


def _legend(y: float, runs: Sequence[ChartRun], left: float) -> str:
    """The techniques (``OTHER`` only when present), then the FAILED and CANCELLED shapes."""
    parts: list[str] = []
    x = left
    for name, colour in TECHNIQUE_COLOURS.items():
        if name == "OTHER" and not any(r.technique == "OTHER" for r in runs):
            continue
        parts.append(f'<circle cx="{x + 5:.0f}" cy="{y - 4:.0f}" r="5" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14:.0f}" y="{y:.0f}">{name}</text>')
        x += 24 + 8 * len(name)
    parts.append(
        f'<rect x="{x:.0f}" y="{y - 9:.0f}" width="10" height="10" fill="#ffffff" stroke="{FAILED_STROKE}"'
        f' stroke-width="2.5"/><text x="{x + 16:.0f}" y="{y:.0f}">failed</text>'
    )
    x += 24 + 8 * len("failed")
    parts.append(
        f'<circle cx="{x + 5:.0f}" cy="{y - 4:.0f}" r="5" fill="#ffffff" stroke="#455a64" stroke-dasharray="2 2"/>'
        f'<text x="{x + 16:.0f}" y="{y:.0f}">cancelled</text>'
    )
    return '<g class="legend">' + "".join(parts) + "</g>"


def _panel(
    key: str, label: str, runs: Sequence[ChartRun], values: list[float | None], top: float, xs: list[float]
) -> str:
    """One panel: frame, y axis from 0 to the largest value (estimates included), and a mark
    per run (at 0 for an unknown duration; in the bytes panel only where bytes were read)."""
    bottom = top + PANEL_H
    log = key != "duration"
    estimates = [float(r.estimate_bytes) for r in runs if key == "bytes" and r.estimate_bytes is not None]
    peak = max([v for v in values if v is not None] + estimates, default=0.0) or 1.0

    def y_of(v: float) -> float:
        if log:  # rows and bytes span orders of magnitude (a FULL run beside a few rows merged)
            return bottom - (PANEL_H - 8) * math.log10(1 + v) / math.log10(1 + peak)
        return bottom - (PANEL_H - 8) * v / peak

    out = [
        f'<g class="panel" data-panel="{key}">',
        f'<text class="axis" x="{LEFT}" y="{top - 8:.0f}">{escape(label)}</text>',
        f'<line x1="{LEFT}" y1="{bottom:.0f}" x2="{WIDTH - RIGHT}" y2="{bottom:.0f}" stroke="#90a4ae"/>',
        f'<line x1="{LEFT}" y1="{top + 8:.0f}" x2="{WIDTH - RIGHT}" y2="{top + 8:.0f}" stroke="#eceff1"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{top + 12:.0f}" text-anchor="end">{human_number(peak)}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{bottom + 4:.0f}" text-anchor="end">0</text>',
    ]
    for run, x, v in zip(runs, xs, values, strict=True):
        if key == "bytes" and run.estimate_bytes is not None:
            ey = y_of(run.estimate_bytes)
            out.append(
                f'<line class="estimate" data-run="{run.run_id}" x1="{x - 8:.1f}" y1="{ey:.1f}" x2="{x + 8:.1f}"'
                f' y2="{ey:.1f}" stroke="#000000" stroke-width="2"/>'
            )
        if key != "bytes" or v is not None:
            out.append(mark_svg(run, x, y_of(v or 0.0)))
    out.append("</g>")
    return "".join(out)


def _empty(svg_id: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{svg_id}" width="300" height="24">'
        '<text x="0" y="16">no finished runs</text></svg>'
    )


def _time_axis(runs: Sequence[ChartRun], left: float, height: float) -> str:
    first, last = runs[0].at, runs[-1].at
    return (
        f'<text class="tick" x="{left}" y="{height - 4}">{first:%Y-%m-%d %H:%M:%S}</text>'
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{height - 4}" text-anchor="end">{last:%Y-%m-%d %H:%M:%S} UTC</text>'
    )


def history_svg(runs: Sequence[ChartRun]) -> str:
    """The refresh history of one object (runs oldest first, see :func:`chart_runs`) as one
    ``<svg id="history">``; with no runs, a line saying ``no finished runs``."""
    if not runs:
        return _empty("history")
    panels: list[tuple[str, str, list[float | None]]] = [
        ("duration", "duration (s)", [r.seconds for r in runs]),
        ("rows", "rows written (log scale)", [float(r.rows) for r in runs]),
    ]
    if any(r.bytes_read is not None or r.estimate_bytes is not None for r in runs):
        read = [float(r.bytes_read) if r.bytes_read is not None else None for r in runs]
        panels.append(("bytes", "bytes read (mark) beside the estimate (bar), log scale", read))
    height = TOP + len(panels) * (PANEL_H + GAP) + 16
    to_x = _x_scale(runs, LEFT + 10, WIDTH - RIGHT - 10)
    xs = [to_x(r.at) for r in runs]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="history" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" role="img" aria-label="refresh history">',
        _legend(16, runs, LEFT),
    ]
    for i, (key, label, values) in enumerate(panels):
        out.append(_panel(key, label, runs, values, TOP + GAP - 10 + i * (PANEL_H + GAP), xs))
    out.append(_time_axis(runs, LEFT, height))
    out.append("</svg>")
    return "\n".join(out)


def summary_svg(runs: Sequence[ChartRun]) -> str:
    """Runs of many objects over time, one lane per object (sorted by name), as one
    ``<svg id="summary">``; x spans the runs' start times."""
    if not runs:
        return _empty("summary")
    names = sorted({r.name for r in runs})
    height = TOP + len(names) * LANE_H + 24
    to_x = _x_scale(runs, LANE_LEFT + 10, WIDTH - RIGHT - 10)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="summary" width="{WIDTH}" height="{height}"'
        f' viewBox="0 0 {WIDTH} {height}" role="img" aria-label="refresh runs over time">',
        _legend(16, runs, LANE_LEFT),
    ]
    for i, name in enumerate(names):
        y = TOP + i * LANE_H + LANE_H / 2
        out.append(f'<g class="lane" data-name="{escape(name)}">')
        out.append(
            f'<line x1="{LANE_LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#eceff1"/>'
            f'<a href="/objects/{escape(quote(name))}"><text class="lane-name" x="{LANE_LEFT - 8}" y="{y + 4:.1f}"'
            f' text-anchor="end">{escape(name if len(name) <= 26 else name[:25] + "…")}</text></a>'
        )
        out.extend(mark_svg(r, to_x(r.at), y) for r in runs if r.name == name)
        out.append("</g>")
    out.append(_time_axis(runs, LANE_LEFT, height))
    out.append("</svg>")
    return "\n".join(out)
