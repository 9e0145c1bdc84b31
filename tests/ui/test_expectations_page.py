"""An MV's page shows its expectations after real refreshes: the newest run's counts in a
table and a chart mark per run and expectation, with the rows failed of each run; a table a
pipeline keeps outside the catalog's objects has a page with its results too."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from sparkmv.catalog.expectations import ExpectationResult
from sparkmv.ui.app import create_app
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

EXPECT = "CONSTRAINT has_k EXPECT (k IS NOT NULL) ON VIOLATION DROP ROW, CONSTRAINT positive_v EXPECT (v > 0)"
ROW = (
    r'<tr data-expectation="(\w+)" data-action="(\w+)"><td>\w+</td>\s*<td class="action">([^<]+)</td>\s*'
    r'<td><code>([^<]+)</code></td><td class="passed">(\d+)</td><td class="failed">(\d+)</td></tr>'
)
POINT = r'class="point" data-expectation="(\w+)" data-run="(\d*)" data-failed="(\d+)"'


def _refreshed(make_client: Any, tmp_path: Path) -> tuple[Any, list[int]]:
    """MV ``clean`` over ``t``: a FULL run over partition d=1 (k NULL once; v -5, 30, NULL,
    10), a PCT run of the new partition d=2 (k NULL twice; v -1, 2, 3), then a SKIPPED run
    (nothing changed: no results). Returns the client and the three run ids."""
    data = tmp_path / "t"
    write_partition(data, "d", "1", {"k": [1, 2, None, 4], "v": [-5, 30, None, 10]})
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{data}'")
    client.sql(
        f"CREATE MATERIALIZED VIEW clean ({EXPECT}) PARTITION BY d REFRESH DEFERRED "
        "PROPERTIES ('refresh_mode' = 'PCT') AS SELECT d, k, v FROM t"
    )
    full = client.refresh("clean")
    write_partition(data, "d", "2", {"k": [5, None, None], "v": [-1, 2, 3]})
    pct = client.refresh("clean")
    skipped = client.refresh("clean")
    assert [(r.state, r.mode) for r in (full, pct, skipped)] == [
        ("SUCCESS", "FULL"),
        ("SUCCESS", "PCT"),
        ("SKIPPED", "SKIP"),
    ]
    return client, [full.run_id, pct.run_id, skipped.run_id]


def test_mv_page_shows_the_newest_counts_and_failed_rows_per_run(make_client: Any, tmp_path: Path) -> None:
    client, (full, pct, _skipped) = _refreshed(make_client, tmp_path)
    app = TestClient(create_app(client))
    page = app.get("/objects/clean")
    assert page.status_code == 200
    section = page.text.split("<h2>Expectations</h2>", 1)[1].split('<div id="expectations-box">', 1)[0]
    assert f'in the newest run, <a href="/runs/{pct}">run {pct}</a>' in section
    assert re.findall(ROW, section) == [  # the PCT run: the 3 rows of d=2
        ("has_k", "drop", "drop row", "k IS NOT NULL", "1", "2"),
        ("positive_v", "warn", "warn (row kept)", "v &gt; 0", "2", "1"),
    ]
    chart = page.text.split('<div id="expectations-box">', 1)[1].split("</div>", 1)[0]
    assert chart.startswith('<svg xmlns="http://www.w3.org/2000/svg" id="expectations-chart"')
    assert re.findall(POINT, chart) == [  # one mark per run that counted (not the SKIPPED one)
        ("has_k", str(full), "1"),
        ("has_k", str(pct), "2"),
        ("positive_v", str(full), "2"),
        ("positive_v", str(pct), "1"),
    ]
    assert f'<a href="/runs/{full}" class="point" data-expectation="positive_v"' in chart
    assert f"run {full}: positive_v (warn): 2 of 4 rows failed" in chart
    # The JSON agrees with the system table, run by run.
    body = app.get("/api/objects/clean").json()["expectations"]
    shown = [(r["run_id"], e["expectation"], e["rows_passed"], e["rows_failed"]) for r in body for e in r["results"]]
    table = client.sql(
        "SELECT run_id, expectation, rows_passed, rows_failed FROM sparkmv.expectations "
        "WHERE dataset = 'clean' ORDER BY run_id, expectation"
    ).collect()
    assert (
        shown
        == [tuple(r) for r in table]
        == [
            (full, "has_k", 3, 1),
            (full, "positive_v", 2, 2),
            (pct, "has_k", 1, 2),
            (pct, "positive_v", 2, 1),
        ]
    )
    assert [r["recorded_at"] is not None for r in body] == [True, True]


def test_page_of_a_pipeline_table_with_results_and_none_without(make_client: Any, tmp_path: Path) -> None:
    client = make_client(tmp_path / "home")
    catalog = client.runtime.catalog
    with catalog.transaction() as s:  # as a pipeline's Python table records them: no run id
        catalog.expectations.record(s, None, "py_events", [ExpectationResult("has_id", "fail", "id IS NOT NULL", 7, 0)])
    app = TestClient(create_app(client))
    page = app.get("/objects/py_events")
    assert page.status_code == 200
    section = page.text.split("<h2>Expectations</h2>", 1)[1].split('<div id="expectations-box">', 1)[0]
    assert "in the newest refresh, recorded" in section
    assert re.findall(ROW, section) == [("has_id", "fail", "fail update", "id IS NOT NULL", "7", "0")]
    assert re.findall(POINT, page.text) == [("has_id", "", "0")]
    assert app.get("/objects/py_other").status_code == 404
