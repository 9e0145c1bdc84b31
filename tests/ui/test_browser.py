"""A real browser (Debian's chromium through Playwright) on ``sparkmv ui`` over the TPC-H
SF 0.01 demo catalog: the graph shows every demo MV with its state text, a node opens the
MV's page, and a refresh started by another process shows its progress bar advancing and the
run ending SUCCESS. Screenshots are saved in the test's tmp directory (and, with
``SPARKMV_UI_SCREENSHOT_DIR`` set, there too: docs/ui-graph.png comes from it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkmv.catalog import RunState
from sparkmv.client.client import Client
from sparkmv.demo.data import DEMO_MVS, TpchLayout
from tests.ui.server import env, running_ui, sparkmv_argv

pytestmark = [pytest.mark.browser, pytest.mark.spark, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
MV = "q1_pricing_summary"
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


def _demo_home(make_client: Callable[..., Client], tpch: TpchLayout, home: Path) -> int:
    """The demo's catalog, every MV refreshed; the MV refreshed in the test paced to one chunk
    a second so its progress is observable. Returns the newest run id of that MV."""
    from sparkmv.demo.run import create_objects

    client = make_client(home=home)
    create_objects(client, tpch)
    for name in DEMO_MVS:
        assert client.refresh(name).state == RunState.SUCCESS, name
    client.sql(f"ALTER MATERIALIZED VIEW {MV} SET PROPERTIES ('throttle_chunks_per_minute' = '60')")
    run_id = client.runs(MV, 1)[0].run_id
    client.close()
    return run_id


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (make install)")
def test_graph_object_page_and_live_progress(
    make_client: Callable[..., Client], tpch: TpchLayout, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    home = tmp_path / "home"
    old_run = _demo_home(make_client, tpch, home)
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
    assert (tmp_path / "ui-graph.png").stat().st_size > 1000
