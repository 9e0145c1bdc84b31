"""The web app's pages and JSON endpoints over a catalog holding objects in every display
state (written through the stores, no Spark); escaping; actions only with the token."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from sparkmv.catalog.models import ControlRow, TaskRunRow
from sparkmv.client.client import Client
from sparkmv.ui.app import create_app
from tests.ui.states import SCRIPT_ERROR, SCRIPT_PROPERTY, build

TOKEN = "t0ken-for-tests"


@pytest.fixture
def catalog(tmp_path: Path, catalog_url: str) -> Iterator[Client]:
    """The catalog in every state, once on SQLite and once on PostgreSQL."""
    client = build(tmp_path / "home", tmp_path / "data", catalog_url)
    yield client
    client.close()


def _app(client: Client, allow_actions: bool = False) -> TestClient:
    return TestClient(create_app(client, allow_actions=allow_actions, token=TOKEN))


def _counts(client: Client) -> tuple[int, int]:
    with client.runtime.catalog.read() as s:
        runs = s.query(TaskRunRow).count()
        controls = s.query(ControlRow).count()
    return runs, controls


def test_api_objects_every_state(catalog: Client) -> None:
    body = _app(catalog).get("/api/objects").json()
    got = {o["name"]: (o["kind"], o["state"], o["detail"]) for o in body["objects"]}
    assert got == {
        "dim": ("refreshable table", "fresh", "loaded by run 8"),
        "events": ("base table", "base table", "base table"),
        "mv_failed": ("materialized view", "failed", f"failed: run 6: {SCRIPT_ERROR}"),
        "mv_fresh": ("materialized view", "fresh", "fresh"),
        "mv_inactive": ("materialized view", "inactive", "inactive: base table 'gone' was dropped"),
        "mv_nested": ("materialized view", "stale", "stale: never refreshed"),
        "mv_never": ("materialized view", "stale", "stale: never refreshed"),
        "mv_paused": ("materialized view", "paused", "paused: run 4, chunk 2 of 5"),
        "mv_refreshing": ("materialized view", "refreshing", "refreshing: run 3, chunk 2 of 5"),
        "mv_stale": ("materialized view", "stale", got["mv_stale"][2]),
    }
    stale = next(o for o in body["objects"] if o["name"] == "mv_stale")
    assert (stale["state"], stale["stale_partitions"]) == ("stale", 1)
    assert stale["detail"].startswith("stale ") and stale["detail"].endswith(", 1 stale base partition")
    assert stale["staleness_seconds"] > 0
    refreshing = next(o for o in body["objects"] if o["name"] == "mv_refreshing")
    assert (refreshing["chunks_done"], refreshing["chunks_planned"], refreshing["run_id"]) == (2, 5, 3)
    nested = next(o for o in body["objects"] if o["name"] == "mv_nested")
    assert nested["base_tables"] == ["mv_fresh"]


def test_graph_page_shows_every_node_with_state_text(catalog: Client) -> None:
    page = _app(catalog).get("/")
    assert page.status_code == 200
    for name, state in [
        ("mv_fresh", "fresh"),
        ("mv_stale", "stale"),
        ("mv_refreshing", "refreshing"),
        ("mv_paused", "paused"),
        ("mv_failed", "failed"),
        ("mv_inactive", "inactive"),
        ("events", "base table"),
    ]:
        assert f'<a href="/objects/{name}" class="node" data-name="{name}" data-state="{state}">' in page.text
    assert 'class="bar"' in page.text  # the refreshing node's progress bar
    svg = _app(catalog).get("/graph.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml") and svg.text.startswith("<svg")


def test_object_page_and_api(catalog: Client) -> None:
    app = _app(catalog)
    page = app.get("/objects/mv_stale")
    assert page.status_code == 200
    assert "SELECT d, count(*) AS n FROM events GROUP BY d" in page.text
    assert "d=2024-01-02" in page.text  # the changed base partition
    body = app.get("/api/objects/mv_stale").json()
    assert body["definition"] == "SELECT d, count(*) AS n FROM events GROUP BY d"
    assert body["refresh_mode"] == "AUTO"
    assert body["base_tables"][0]["changed_partitions"] == ["d=2024-01-02"]
    assert [p["version"] for p in body["base_tables"][0]["consumed_partitions"]][1] == "old"
    assert [(r["run_id"], r["state"], r["mode"], r["mode_reason"]) for r in body["runs"]] == [
        (2, "SUCCESS", "PCT", "2 changed")
    ]
    assert app.get("/api/objects/events").json()["readers"] == [
        "mv_failed",
        "mv_fresh",
        "mv_inactive",
        "mv_never",
        "mv_paused",
        "mv_refreshing",
        "mv_stale",
    ]
    progress = app.get("/api/objects/mv_paused/progress").json()
    assert (progress["refresh_state"], progress["paused"], progress["current_run"]["chunks_done"]) == (
        "REFRESHING",
        True,
        2,
    )


def test_unknown_object_is_404(catalog: Client) -> None:
    app = _app(catalog)
    page = app.get("/objects/nope")
    assert page.status_code == 404 and "table or view &#39;nope&#39; does not exist" in page.text
    assert app.get("/api/objects/nope").json() == {"error": "table or view 'nope' does not exist"}
    assert app.get("/api/objects/nope").status_code == 404
    assert app.get("/api/runs?name=nope").status_code == 404


def test_runs_filter_and_pages(catalog: Client) -> None:
    app = _app(catalog)
    body = app.get("/api/runs?per_page=3").json()
    assert ([r["run_id"] for r in body["runs"]], body["total"], body["pages"]) == ([8, 7, 6], 8, 3)
    assert [r["run_id"] for r in app.get("/api/runs?per_page=3&page=3").json()["runs"]] == [2, 1]
    failed = app.get("/api/runs?state=failed").json()
    assert [(r["run_id"], r["name"], r["error"]) for r in failed["runs"]] == [(6, "mv_failed", SCRIPT_ERROR)]
    assert [r["run_id"] for r in app.get("/api/runs?name=mv_failed").json()["runs"]] == [6, 5]
    assert app.get("/api/runs?state=bogus").status_code == 400
    page = app.get("/runs?state=RUNNING")
    assert page.status_code == 200 and '<tr data-run="4">' in page.text and '<tr data-run="5">' not in page.text


def test_script_in_error_and_property_is_shown_as_text(catalog: Client) -> None:
    app = _app(catalog)
    for path in ("/", "/objects/mv_failed", "/runs", "/graph.svg"):
        text = app.get(path).text
        assert "<script>window.__pwned" not in text, path
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in text, path
    page = app.get("/objects/mv_failed").text
    assert "d &lt;&gt; &#39;&lt;script&gt;window.__pwned = 2&lt;/script&gt;&#39;" in page
    assert app.get("/api/objects/mv_failed").json()["properties"]["partition_retention_condition"] == SCRIPT_PROPERTY


@pytest.mark.parametrize("allow", [False, True])
def test_actions_without_token_or_when_off_are_403_and_write_nothing(catalog: Client, allow: bool) -> None:
    app = _app(catalog, allow_actions=allow)
    before = _counts(catalog)
    for verb in ("refresh", "cancel", "pause", "resume"):
        assert app.post(f"/objects/mv_refreshing/{verb}", data={}).status_code == 403
        assert app.post(f"/objects/mv_refreshing/{verb}", data={"token": "wrong"}).status_code == 403
        if not allow:  # actions off: even the right token is refused
            assert app.post(f"/objects/mv_refreshing/{verb}", data={"token": TOKEN}).status_code == 403
    assert app.get("/objects/mv_refreshing/refresh").status_code == 405  # state changes are POST only
    assert _counts(catalog) == before
    assert "do-refresh" not in app.get("/objects/mv_refreshing").text


def test_actions_with_token_write_the_cli_rows(catalog: Client) -> None:
    app = _app(catalog, allow_actions=True)
    page = app.get(f"/objects/mv_refreshing?token={TOKEN}")
    assert 'id="do-cancel"' in page.text  # the token came in the URL: the forms carry it
    runs, controls = _counts(catalog)
    r = app.post("/objects/mv_refreshing/pause", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and "pause%20requested%20for%20run%203" in r.headers["location"]
    r = app.post("/objects/mv_refreshing/cancel", headers={"X-Sparkmv-Token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    with catalog.runtime.catalog.read() as s:
        assert catalog.runtime.catalog.control.commands(s, 3) == ["PAUSE", "CANCEL"]
    r = app.post("/objects/mv_fresh/refresh", data={"token": TOKEN})
    assert r.status_code == 200 and "refresh of &#39;mv_fresh&#39; queued as run 9 (the scheduler runs it)" in r.text
    with catalog.runtime.catalog.read() as s:
        queued = catalog.runtime.catalog.runs.get(s, 9)
        assert (queued.object_name, queued.state, queued.trigger) == ("mv_fresh", "PENDING", "MANUAL")
    r = app.post("/objects/mv_fresh/cancel", data={"token": TOKEN})
    assert "error: &#39;mv_fresh&#39; is not being refreshed" in r.text
    assert _counts(catalog) == (runs + 1, controls + 2)


def test_importing_the_app_imports_no_pyspark() -> None:
    code = "import sys, sparkmv.ui.app, sparkmv.ui.server; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
