"""The expectations chart: one series per expectation, exact marks, links, positions, escaping."""

from __future__ import annotations

import re
from datetime import datetime

from sparkmv.ui.expectation_chart import (
    SERIES_COLOURS,
    ExpectationCount,
    ExpectationRun,
    expectation_runs,
    expectations_svg,
)


def _result(expectation: str, passed: int, failed: int) -> dict[str, object]:
    action, condition = {"has_k": ("drop", "k IS NOT NULL"), "small_v": ("warn", "v < 9")}[expectation]
    return {
        "expectation": expectation,
        "action": action,
        "condition": condition,
        "rows_passed": passed,
        "rows_failed": failed,
    }


HISTORY = [  # object_detail's "expectations", oldest first; run_id None: a pipeline's refresh
    {
        "run_id": 3,
        "recorded_at": "2026-01-01T10:00:00",
        "results": [_result("has_k", 90, 9), _result("small_v", 99, 0)],
    },
    {"run_id": 5, "recorded_at": "2026-01-01T10:05:00", "results": [_result("has_k", 2, 0), _result("small_v", 1, 1)]},
    {"run_id": None, "recorded_at": "2026-01-01T10:09:00", "results": [_result("has_k", 0, 99)]},
]
POINT = (
    r'<(a|g)(?: href="([^"]*)")? class="point" data-expectation="(\w+)" data-run="(\d*)" data-failed="(\d+)">'
    r"<title>([^<]*)</title><circle cx=\"([\d.]+)\" cy=\"([\d.]+)\" r=\"4\" fill=\"(#\w+)\""
)


def _series(svg: str, name: str) -> list[tuple[str, ...]]:
    body = svg.split(f'<g class="series" data-expectation="{name}">', 1)[1].split("</g>\n", 1)[0]
    return [tuple(m) for m in re.findall(POINT, body)]


def test_expectation_runs_from_the_page_json() -> None:
    runs = expectation_runs(HISTORY)
    assert [(r.run_id, r.at, r.label) for r in runs] == [
        (3, datetime(2026, 1, 1, 10, 0), "run 3"),
        (5, datetime(2026, 1, 1, 10, 5), "run 5"),
        (None, datetime(2026, 1, 1, 10, 9), "refresh at 2026-01-01 10:09:00"),
    ]
    assert runs[1].counts == (ExpectationCount("has_k", "drop", 2, 0), ExpectationCount("small_v", "warn", 1, 1))


def test_one_series_per_expectation_with_a_mark_per_run_linked_to_it() -> None:
    svg = expectations_svg(expectation_runs(HISTORY))
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" id="expectations-chart"') and "<script" not in svg
    assert re.findall(r'<g class="series" data-expectation="(\w+)">', svg) == ["has_k", "small_v"]
    # x: the runs evenly spaced from 88 to 734; y: 184 - 132 * log10(1 + failed) / log10(1 + 99) (log scale)
    blue, red = SERIES_COLOURS[0], SERIES_COLOURS[1]
    assert _series(svg, "has_k") == [
        ("a", "/runs/3", "has_k", "3", "9", "run 3: has_k (drop): 9 of 99 rows failed", "88.0", "118.0", blue),
        ("a", "/runs/5", "has_k", "5", "0", "run 5: has_k (drop): 0 of 2 rows failed", "411.0", "184.0", blue),
        ("g", "", "has_k", "", "99", "refresh at 2026-01-01 10:09:00: has_k (drop): 99 of 99 rows failed", "734.0",
         "52.0", blue),
    ]  # fmt: skip
    assert _series(svg, "small_v") == [
        ("a", "/runs/3", "small_v", "3", "0", "run 3: small_v (warn): 0 of 99 rows failed", "88.0", "184.0", red),
        ("a", "/runs/5", "small_v", "5", "1", "run 5: small_v (warn): 1 of 2 rows failed", "411.0", "164.1", red),
    ]
    assert '<polyline points="88.0,118.0 411.0,184.0 734.0,52.0" fill="none" stroke="#1d5fbf"' in svg
    assert '<text class="tick" x="72" y="56" text-anchor="end">99</text>' in svg  # the peak, 8 px below the top
    assert ">run 3</text>" in svg and ">refresh at 2026-01-01 10:09:00</text>" in svg  # first and last run
    legend = svg.split('<g class="legend">')[1].split("</g>")[0]
    assert re.findall(r">(\w+)</text>", legend) == ["has_k", "small_v"]


def test_single_run_is_centred_and_names_are_escaped() -> None:
    run = ExpectationRun(7, datetime(2026, 1, 1), (ExpectationCount("<b>x</b>", "fail", 3, 0),))
    svg = expectations_svg([run])
    assert "<b>" not in svg and 'data-expectation="&lt;b&gt;x&lt;/b&gt;"' in svg
    assert '<circle cx="411.0" cy="184.0"' in svg and "<polyline" not in svg  # nothing failed: on the axis
    assert '<text class="tick" x="72" y="56" text-anchor="end">1</text>' in svg


def test_no_runs() -> None:
    assert "no expectation results" in expectations_svg([])
