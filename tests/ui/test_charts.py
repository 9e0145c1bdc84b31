"""The refresh history charts: exact marks, colours, shapes, links and axes."""

from __future__ import annotations

import re
from datetime import datetime

from sparkmv.ui.charts import (
    FAILED_STROKE,
    TECHNIQUE_COLOURS,
    ChartRun,
    chart_runs,
    history_svg,
    summary_svg,
)


def _run(
    run_id: int, mode: str | None, state: str, minute: int, seconds: float | None, rows: int, **kw: object
) -> dict[str, object]:
    return {
        "run_id": run_id,
        "name": kw.pop("name", "mv"),
        "mode": mode,
        "state": state,
        "created": f"2026-01-01T10:{minute:02d}:00",
        "started": f"2026-01-01T10:{minute:02d}:00" if state != "PENDING" else None,
        "duration_seconds": seconds,
        "rows_written": rows,
        **kw,
    }


RUNS = [
    _run(5, "PCT", "SUCCESS", 40, 4.0, 100, estimate_bytes=2000, bytes_read=1500),
    _run(4, "INCREMENTAL", "CANCELLED", 30, 2.0, 0),
    _run(3, None, "SKIPPED", 20, 0.5, 0),
    _run(2, "PCT", "FAILED", 10, 8.0, 0),
    _run(1, "FULL", "SUCCESS", 0, 10.0, 400),
    _run(6, None, "RUNNING", 50, None, 0),
    _run(7, None, "PENDING", 55, None, 0),
]


def _marks(svg: str, panel: str) -> list[tuple[str, str, str, str, str]]:
    """(href, run, technique, state, shape element) of each mark of one panel."""
    body = svg.split(f'data-panel="{panel}">', 1)[1].split("</g>", 1)[0]
    found = re.findall(
        r'<a href="([^"]+)" class="mark" data-run="(\d+)" data-technique="(\w+)" data-state="(\w+)">'
        r"<title>[^<]*</title>(<\w+[^>]*>)",
        body,
    )
    return [tuple(m) for m in found]  # type: ignore[misc]


def test_chart_runs_keeps_finished_runs_oldest_first() -> None:
    runs = chart_runs(RUNS)
    assert [(r.run_id, r.technique, r.state) for r in runs] == [
        (1, "FULL", "SUCCESS"),
        (2, "PCT", "FAILED"),
        (3, "SKIP", "SKIPPED"),
        (4, "INCREMENTAL", "CANCELLED"),
        (5, "PCT", "SUCCESS"),
    ]
    assert runs[0].at == datetime(2026, 1, 1, 10, 0) and runs[4].bytes_read == 1500


def test_history_one_mark_per_run_coloured_by_technique_with_links() -> None:
    svg = history_svg(chart_runs(RUNS))
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" id="history"') and "<script" not in svg
    for panel in ("duration", "rows"):
        marks = _marks(svg, panel)
        assert [(m[0], m[1], m[2], m[3]) for m in marks] == [
            ("/runs/1", "1", "FULL", "SUCCESS"),
            ("/runs/2", "2", "PCT", "FAILED"),
            ("/runs/3", "3", "SKIP", "SKIPPED"),
            ("/runs/4", "4", "INCREMENTAL", "CANCELLED"),
            ("/runs/5", "5", "PCT", "SUCCESS"),
        ]
        shapes = [m[4] for m in marks]
        assert f'fill="{TECHNIQUE_COLOURS["FULL"]}"' in shapes[0] and shapes[0].startswith("<circle")
        assert shapes[1].startswith("<rect") and f'stroke="{FAILED_STROKE}"' in shapes[1]  # failed: red square
        assert f'fill="{TECHNIQUE_COLOURS["PCT"]}"' in shapes[1]
        assert f'fill="{TECHNIQUE_COLOURS["SKIP"]}"' in shapes[2]
        assert 'fill="#ffffff"' in shapes[3] and 'stroke-dasharray="2 2"' in shapes[3]  # cancelled: hollow
        assert f'stroke="{TECHNIQUE_COLOURS["INCREMENTAL"]}"' in shapes[3]
        assert f'fill="{TECHNIQUE_COLOURS["PCT"]}"' in shapes[4]
    # x by start time: the first run at the left end, the last at the right end (10 px inside).
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg.split('data-panel="duration">')[1])[:1]]
    assert xs == [88.0]
    # duration panel: run 1 (10 s) at the top of the scale, run 3 (0.5 s) near the axis.
    duration = svg.split('data-panel="duration">')[1].split("</g>")[0]
    # the panel spans y 58..168: its peak (10 s) is drawn 8 px below the top, 0 on the axis
    assert '<text class="tick" x="72" y="70" text-anchor="end">10</text>' in duration
    assert 'data-run="1"' in duration and '<circle cx="88.0" cy="66.0"' in duration  # 168 - 102 * 10 / 10
    # run 2 (8 s, 10 of 40 minutes): x 88 + 646 / 4 = 249.5, y 168 - 81.6 = 86.4; a square of 10 px around it
    assert '<rect x="244.5" y="81.4" width="10" height="10"' in duration
    assert "run 2 of mv: PCT FAILED, 8.0 s, 0 rows" in svg


def test_bytes_panel_marks_runs_that_read_and_bars_for_estimates() -> None:
    svg = history_svg(chart_runs(RUNS))
    marks = _marks(svg, "bytes")
    assert [m[1] for m in marks] == ["5"]  # only run 5 recorded bytes read
    bytes_panel = svg.split('data-panel="bytes">')[1].split("</g>")[0]
    assert bytes_panel.count('class="estimate"') == 1 and 'data-run="5"' in bytes_panel
    assert ">2.0k</text>" in bytes_panel  # the scale reaches the estimate (2000 > 1500 read)
    assert "estimate 2.0kB, read 1.5kB" in svg
    assert 'data-panel="bytes"' not in history_svg(chart_runs(RUNS[1:5]))  # none recorded: no panel


def test_legend_and_escaping() -> None:
    runs = [ChartRun(1, "<b>x</b>", "PCT", "SUCCESS", datetime(2026, 1, 1), 1.0, 2)]
    svg = summary_svg(runs)
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    legend = svg.split('<g class="legend">')[1].split("</g>")[0]
    assert re.findall(r">(\w+)</text>", legend) == ["FULL", "PCT", "INCREMENTAL", "SKIP", "failed", "cancelled"]
    assert '<circle cx="467.0" cy="45.0"' in svg  # a single run is centred: (200 + 734) / 2


def test_summary_one_lane_per_object() -> None:
    runs = chart_runs([*RUNS, _run(8, "FULL", "SUCCESS", 45, 1.0, 9, name="other")])
    svg = summary_svg(runs)
    lanes = re.findall(r'<g class="lane" data-name="(\w+)">', svg)
    assert lanes == ["mv", "other"]
    other = svg.split('data-name="other">')[1].split("</g>")[0]
    assert re.findall(r'data-run="(\d+)"', other) == ["8"] and '<a href="/objects/other">' in other
    assert svg.count('class="mark"') == 6


def test_empty_history() -> None:
    assert "no finished runs" in history_svg([]) and 'id="summary"' in summary_svg([])
