"""A real browser (Debian's chromium through Playwright) on ``sparkmv ui`` over the TPC-H SF
0.01 demo catalog: the graph shows every demo MV with its state text and the summary chart
one mark per run; the query rewrite page the queries rewritten; an external table's page its
kind, partitions and readers; the page of an MV with an expectation its newest counts (the
rows it kept passed, none failed) and a chart mark for its run; after an outside writer
appends to one ``lineitem`` partition, the partition tables of an MV over it (PCT) and of
one whose non-reference table it is (``segment_revenue``) list exactly what ``EXPLAIN
REFRESH`` lists, and the header agrees; the refresh history chart has one mark per run
coloured by technique, each a link to its run; a node opens the MV's page, and a refresh
started by another process shows its progress bar advancing and the run ending SUCCESS.
Screenshots are saved in the test's tmp directory (and, with ``SPARKMV_UI_SCREENSHOT_DIR``
set, there too: docs/ui-graph.png and docs/ui-mv-page.png come from it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from sparkmv.catalog import RunState
from sparkmv.client.client import Client
from sparkmv.demo.data import DEMO_EXPECTATION_MVS, DEMO_EXPECTATIONS, DEMO_MVS, TpchLayout
from sparkmv.ui.charts import TECHNIQUE_COLOURS
from tests.ui.server import env, running_ui, sparkmv_argv

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
MV = "q1_pricing_summary"
EXPECT_MV = next(iter(DEMO_EXPECTATION_MVS))  # DROP ROW of the lines with a quantity <= 0
PCT_MV = "revenue_by_shipmode"  # over lineitem partitioned by ship month: one partition goes stale
NON_REFERENCE_MV = "segment_revenue"  # partitioned by order month: lineitem is no reference table
MONTH = "1995-06"
WAIT_MS = 240_000  # the refreshing process starts its own Spark session

# True once the progress box saw the new run RUNNING part-way (0 < done < planned) and the
# bar's width matched; marks are "run:state:done:planned".
SAW_PROGRESS = """([oldRun]) => {
  const seen = (document.getElementById("progress").dataset.seen || "").split(",");
  return seen.some(m => { const [run, state, done, planned] = m.split(":");
    return Number(run) > oldRun && state === "RUNNING" && Number(done) > 0 && Number(done) < Number(planned); });
}"""
ENDED = """([oldRun]) => { const d = document.getElementById("progress").dataset;
  return Number(d.runId) > oldRun && ["SUCCESS", "FAILED", "CANCELLED"].includes(d.runState); }"""


def _demo_home(
    make_client: Callable[..., Client], tpch: TpchLayout, home: Path, data: Path
) -> tuple[int, int, TpchLayout]:
    """The demo's catalog over a copy of the TPC-H data (``data``: the test appends to it),
    every MV of :data:`DEMO_MVS` and ``EXPECT_MV`` refreshed, the query of ``PCT_MV``
    answered through query rewrite (recorded in the rewrite log); ``PCT_MV`` planned PCT
    (``EXPLAIN REFRESH`` then lists its partitions); the MV refreshed in the test paced to
    one chunk a second so its progress is observable. Returns the newest run id of that MV,
    the rows of ``EXPECT_MV`` and the copy's layout."""
    from sparkmv.demo.run import create_objects

    shutil.copytree(tpch.root, data)
    layout = TpchLayout(data)
    client = make_client(home=home, rewrite=True)
    create_objects(client, layout)
    for name in [*DEMO_MVS, EXPECT_MV]:
        assert client.refresh(name).state == RunState.SUCCESS, name
    kept = int(client.sql(f"SELECT count(*) AS n FROM {EXPECT_MV}").collect()[0].n)
    client.sql(DEMO_MVS[PCT_MV][1])  # rewritten: an exact match of the fresh MV
    client.sql(f"ALTER MATERIALIZED VIEW {PCT_MV} SET PROPERTIES ('refresh_mode' = 'PCT')")
    client.sql(f"ALTER MATERIALIZED VIEW {MV} SET PROPERTIES ('throttle_chunks_per_minute' = '60')")
    run_id = client.runs(MV, 1)[0].run_id
    client.close()
    return run_id, kept, layout


def _explained(client: Client, mv: str) -> dict[str, str]:
    """``EXPLAIN REFRESH``'s MV partitions to refresh: partition -> reason."""
    text = client.execute(f"EXPLAIN REFRESH MATERIALIZED VIEW {mv}").message or ""
    lines = text.splitlines()
    start = lines.index("MV partitions to refresh:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("  "))
    return dict(line.strip().split(": ", 1) for line in lines[start:end])


def _page_partitions(page: Page) -> tuple[dict[str, str], int]:
    """The object page's partitions the next refresh recomputes (partition -> why), and all."""
    rows = page.locator("#partitions tr[data-partition]")
    stale = rows.evaluate_all(
        "rs => rs.filter(r => r.dataset.stale === 'true')"
        ".map(r => [r.dataset.partition, r.querySelector('.why').textContent])"
    )
    return dict(stale), rows.count()


def _chart_marks(page: Page) -> list[tuple[str, str, str, str]]:
    """(run id, technique, state, fill) of each mark of the duration panel, left to right."""
    return page.locator('svg#history g[data-panel="duration"] a.mark').evaluate_all(
        "ms => ms.map(m => [m.dataset.run, m.dataset.technique, m.dataset.state,"
        " m.querySelector('circle, rect').getAttribute('fill')])"
    )


def _check_rewrite_and_table_pages(page: Page, url: str, layout: TpchLayout) -> None:
    page.locator("#nav-rewrite").click()
    page.wait_for_url(f"{url}rewrite")
    row = page.locator(f'#rewrites tr.rewrite[data-mv="{PCT_MV}"]')
    expect(row).to_have_count(1)
    expect(row.locator(".class")).to_have_text("exact")
    page.goto(f"{url}objects/lineitem")
    expect(page.locator("#table-kind")).to_have_text("external parquet files")
    expect(page.locator("#table-location")).to_have_text(str(layout.lineitem))
    expect(page.locator("#table-partition-columns")).to_have_text("l_shipmonth")
    months = len([p for p in layout.lineitem.iterdir() if p.name.startswith("l_shipmonth=")])
    expect(page.locator("#table-partitions")).to_have_text(str(months))
    readers = page.locator("#readers a").all_text_contents()
    assert readers == sorted([*DEMO_MVS, *DEMO_EXPECTATION_MVS])


def _check_expectations(page: Page, url: str, kept: int) -> None:
    """``EXPECT_MV``'s page: its expectation's counts of its one run, and one chart mark."""
    [(expectation, condition)] = DEMO_EXPECTATIONS[EXPECT_MV]
    page.goto(f"{url}objects/{EXPECT_MV}")
    row = page.locator(f'#expectations tr[data-expectation="{expectation}"]')
    expect(row.locator(".action")).to_have_text("drop row")
    expect(row.locator("code")).to_have_text(condition)
    expect(row.locator(".passed")).to_have_text(str(kept))  # TPC-H has no quantity <= 0: all kept
    expect(row.locator(".failed")).to_have_text("0")
    marks = page.locator(f'svg#expectations-chart g.series[data-expectation="{expectation}"] a.point')
    expect(marks).to_have_count(1)
    expect(marks).to_have_attribute("data-failed", "0")


def _check_staleness_as_explain(page: Page, url: str, make_client: Callable[..., Client], home: Path) -> None:
    """Each MV's partition table and header agree with ``EXPLAIN REFRESH`` after an append."""
    client = make_client(home=home)
    for mv, expected_scope in ((PCT_MV, "1 of"), (NON_REFERENCE_MV, "every MV partition")):
        explained = _explained(client, mv)
        page.goto(f"{url}objects/{mv}")
        shown, total = _page_partitions(page)
        assert shown == explained, mv
        expect(page.locator("#state")).to_have_text("stale")
        expect(page.locator("#detail")).to_contain_text(f"recomputes {expected_scope}")
        if mv == PCT_MV:
            assert shown == {MONTH: f"default.lineitem partition l_shipmonth={MONTH} changed"}
        else:
            assert len(shown) == total and set(shown.values()) == {"non-reference table default.lineitem changed"}
    # A PCT refresh of the stale MV: its history shows a FULL mark, then a PCT one.
    run = client.refresh(PCT_MV)
    assert (run.state, run.mode) == (RunState.SUCCESS, "PCT")
    page.goto(f"{url}objects/{PCT_MV}")
    marks = _chart_marks(page)
    runs = [r.run_id for r in reversed(client.runs(PCT_MV, 10))]
    assert [m[0] for m in marks] == [str(r) for r in runs]
    assert [(m[1], m[2], m[3]) for m in marks] == [
        ("FULL", "SUCCESS", TECHNIQUE_COLOURS["FULL"]),
        ("PCT", "SUCCESS", TECHNIQUE_COLOURS["PCT"]),
    ]
    expect(page.locator("#state")).to_have_text("fresh")
    client.close()


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (make install-dev)")
def test_graph_object_page_and_live_progress(
    make_client: Callable[..., Client], tpch: TpchLayout, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    home = tmp_path / "home"
    old_run, kept, layout = _demo_home(make_client, tpch, home, tmp_path / "tpch")
    shots = Path(os.environ.get("SPARKMV_UI_SCREENSHOT_DIR") or tmp_path)
    with running_ui(home) as (url, _line), sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        for name in DEMO_MVS:
            node = page.locator(f'svg#graph a.node[data-name="{name}"]')
            expect(node).to_have_attribute("data-state", "fresh")
            expect(node.locator("text.s")).to_have_text("fresh")
            expect(page.locator(f'#objects tr[data-name="{name}"] .state')).to_have_text("fresh")
        for table in ("lineitem", "orders", "customer"):
            expect(page.locator(f'svg#graph a.node[data-name="{table}"] text.k')).to_have_text("base table")
        page.locator("svg#graph").screenshot(path=str(shots / "ui-graph.png"))
        for name in DEMO_MVS:  # the summary chart: one lane per MV, one mark per run (its first refresh)
            expect(page.locator(f'svg#summary g.lane[data-name="{name}"] a.mark')).to_have_count(1)
            expect(page.locator(f'svg#summary g.lane[data-name="{name}"] a.mark')).to_have_attribute(
                "data-technique", "FULL"
            )
        _check_rewrite_and_table_pages(page, url, layout)
        _check_expectations(page, url, kept)
        # An outside writer appends to one lineitem partition.
        month = layout.lineitem / f"l_shipmonth={MONTH}"
        shutil.copy(sorted(month.glob("*.parquet"))[0], month / "browser-test-append.parquet")
        _check_staleness_as_explain(page, url, make_client, home)
        page.locator("#history-box").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "ui-mv-page.png"))
        page.locator('svg#history g[data-panel="duration"] a.mark').last.click()  # a mark opens its run
        expect(page.locator("#run-mode")).to_have_text("PCT")
        page.goto(url)

        page.locator(f'svg#graph a.node[data-name="{MV}"]').click()
        page.wait_for_url(f"{url}objects/{MV}")
        expect(page.locator("h1#name")).to_have_text(MV)
        expect(page.locator("#definition")).to_contain_text("l_returnflag")
        expect(page.locator("#progress-text")).to_contain_text(f"run {old_run}: SUCCESS")

        refresh = subprocess.Popen(
            sparkmv_argv(home, "sql", f"REFRESH MATERIALIZED VIEW {MV} FORCE"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
        try:
            page.wait_for_function(SAW_PROGRESS, arg=[old_run], timeout=WAIT_MS)
            bar = page.locator("#bar").evaluate("e => parseFloat(e.style.width)")
            page.screenshot(path=str(tmp_path / "ui-progress.png"), full_page=False)
            page.wait_for_function(ENDED, arg=[old_run], timeout=WAIT_MS)
            out, err = refresh.communicate(timeout=120)
        finally:
            if refresh.poll() is None:
                refresh.kill()
                refresh.wait()
        assert refresh.returncode == 0, err
        assert "SUCCESS" in out
        expect(page.locator("#progress")).to_have_attribute("data-run-state", "SUCCESS")
        expect(page.locator("#bar")).to_have_attribute("style", "width: 100%;")
        expect(page.locator("#state")).to_have_text("fresh")  # re-read from the status service
        marks = [m.split(":") for m in page.locator("#progress").get_attribute("data-seen").split(",")]
        done = [int(m[2]) for m in marks if int(m[0]) > old_run and m[1] == "RUNNING"]
        assert done == sorted(done) and 0 <= bar < 100  # the bar only moves forward
        page.screenshot(path=str(tmp_path / "ui-object.png"), full_page=True)
        browser.close()
    if shots != tmp_path:
        shutil.copy(shots / "ui-graph.png", tmp_path / "ui-graph.png")
        shutil.copy(shots / "ui-mv-page.png", tmp_path / "ui-mv-page.png")
    assert (tmp_path / "ui-graph.png").stat().st_size > 1000
    assert (tmp_path / "ui-mv-page.png").stat().st_size > 1000
