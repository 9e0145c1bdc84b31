"""The chart, run, query rewrite and base table pages over real catalog rows (written through
the stores and by pyiceberg, no Spark): exact marks, values and links."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from starlette.testclient import TestClient

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.rewrite_log import RewriteLogEntry
from sparkmv.client.client import Client
from sparkmv.names import ObjectName
from sparkmv.ui.app import create_app
from sparkmv.ui.charts import TECHNIQUE_COLOURS
from tests.ui.states import DAYS, build


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Client]:
    client = build(tmp_path / "home", tmp_path / "data")
    yield client
    client.close()


def _marks(svg: str, panel: str) -> list[tuple[str, str, str]]:
    body = svg.split(f'data-panel="{panel}">', 1)[1].split("</g>", 1)[0]
    mark = r'<a href="/runs/(\d+)" class="mark" data-run="\d+" data-technique="(\w+)" data-state="(\w+)">'
    return re.findall(mark, body)


def test_object_page_chart_one_mark_per_finished_run(catalog: Client) -> None:
    app = TestClient(create_app(catalog))
    page = app.get("/objects/mv_failed").text
    svg = page.split('<div id="history-box">', 1)[1].split("</div>", 1)[0]
    # mv_failed: run 5 SUCCESS (PCT), run 6 FAILED (PCT), as the catalog holds them
    assert _marks(svg, "duration") == [("5", "PCT", "SUCCESS"), ("6", "PCT", "FAILED")]
    assert _marks(svg, "rows") == [("5", "PCT", "SUCCESS"), ("6", "PCT", "FAILED")]
    assert svg.count(f'fill="{TECHNIQUE_COLOURS["PCT"]}"') >= 4
    assert 'data-panel="bytes"' not in svg  # no run recorded bytes
    # a running refresh is not a mark yet; its finished runs are
    running = app.get("/objects/mv_refreshing").text
    assert "no finished runs" in running
    assert 'id="answered"' in page and 'Answered <a href="/rewrite?mv=mv_failed">0 queries</a>' in page


def test_graph_page_summary_lanes(catalog: Client) -> None:
    page = TestClient(create_app(catalog)).get("/").text
    svg = page.split('<div id="summary-box">', 1)[1].split("</div>", 1)[0]
    lanes = re.findall(r'<g class="lane" data-name="(\w+)">', svg)
    assert lanes == ["dim", "mv_failed", "mv_fresh", "mv_nested", "mv_stale"]
    assert sorted(re.findall(r'class="mark" data-run="(\d+)"', svg), key=int) == ["1", "2", "5", "6", "7", "8"]


def test_run_page(catalog: Client) -> None:
    app = TestClient(create_app(catalog))
    with catalog.runtime.catalog.transaction() as s:
        catalog.runtime.catalog.runs.update(
            s, 1, estimate_bytes=4096, bytes_read=3000, plan={"plan": {"partition_reasons": {"2024-01-02": "x"}}}
        )
    page = app.get("/runs/1")
    assert page.status_code == 200
    text = page.text
    assert 'Run 1 of <a href="/objects/mv_fresh">mv_fresh</a>' in text
    assert '<td id="run-state">SUCCESS</td>' in text and '<td id="run-rows">3</td>' in text
    assert '<td id="run-estimate">4096</td>' in text and '<td id="run-bytes-read">3000</td>' in text
    assert "<tr><td>2024-01-02</td><td>x</td></tr>" in text
    assert app.get("/runs/999").status_code == 404
    body = app.get("/api/objects/mv_fresh").json()
    assert (body["runs"][0]["estimate_bytes"], body["runs"][0]["bytes_read"]) == (4096, 3000)
    svg = app.get("/objects/mv_fresh").text
    assert '<g class="panel" data-panel="bytes">' in svg and 'class="estimate" data-run="1"' in svg


def test_rewrite_page_filter_and_count(catalog: Client) -> None:
    now = utcnow()
    log = catalog.runtime.catalog.rewrite_log
    log.record([RewriteLogEntry(now, "f1", "SELECT d, n FROM events_q", "mv_fresh", "exact", 12.5, None)])
    log.record(
        [RewriteLogEntry(now, "f2", "SELECT d FROM x", None, None, 3.25, "mv_stale: stale; mv_never: never refreshed")]
    )
    log.record([RewriteLogEntry(now, "f3", "SELECT count(*) FROM events", "mv_fresh", "rollup", 7.0, None)])
    app = TestClient(create_app(catalog))
    page = app.get("/rewrite").text
    rows = re.findall(r'<tr class="rewrite" data-mv="(\w*)">', page)
    assert rows == ["mv_fresh", "", "mv_fresh"]
    assert '<td class="class">rollup</td><td>7.0</td>' in page
    assert "mv_stale: stale<br>mv_never: never refreshed<br>" in page and "(none)" in page
    assert '<a href="/rewrite" id="nav-rewrite">' in page
    filtered = app.get("/rewrite?mv=mv_fresh").text
    assert re.findall(r'<tr class="rewrite" data-mv="(\w*)">', filtered) == ["mv_fresh", "mv_fresh"]
    assert "SELECT count(*) FROM events" in filtered and "SELECT d FROM x" not in filtered
    assert "2 rows of <code>sparkmv.rewrite_log</code> answered by mv_fresh" in filtered
    assert 'Answered <a href="/rewrite?mv=mv_fresh">2 queries</a>' in app.get("/objects/mv_fresh").text
    assert app.get("/api/objects/mv_stale").json()["answered"] == 0


def test_file_table_page(catalog: Client, tmp_path: Path) -> None:
    page = TestClient(create_app(catalog)).get("/objects/events")
    assert page.status_code == 200
    text = page.text
    newest = max((tmp_path / "data" / "events" / f"d={d}" / "part-0.parquet").stat().st_mtime_ns for d in DAYS)
    assert '<td id="table-kind">external parquet files</td>' in text
    assert f'<td id="table-location">{tmp_path / "data" / "events"}</td>' in text
    assert '<td id="table-partition-columns">d</td>' in text and '<td id="table-partitions">3</td>' in text
    seen = datetime.fromtimestamp(newest / 1e9, UTC).isoformat()
    assert f'<td id="table-last-change">{seen}</td>' in text
    readers = re.findall(r'<a href="/objects/(\w+)">\1</a> ', text.split("<h2>Read by</h2>")[1])
    assert readers == ["mv_failed", "mv_fresh", "mv_inactive", "mv_never", "mv_paused", "mv_refreshing", "mv_stale"]


def test_external_catalog_table_page(catalog: Client, tmp_path: Path) -> None:
    warehouse = tmp_path / "lake"
    warehouse.mkdir()
    uri = f"sqlite:///{tmp_path / 'lake.db'}"
    lake = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    lake.create_namespace("db")
    schema = Schema(NestedField(1, "k", StringType(), required=False), NestedField(2, "v", LongType(), required=False))
    spec = PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "k"))
    table = lake.create_table(("db", "events"), schema=schema, partition_spec=spec)
    arrow = pa.schema([("k", pa.string()), ("v", pa.int64())])
    table.append(pa.Table.from_pylist([{"k": "a", "v": 1}, {"k": "b", "v": 2}], schema=arrow))
    table = lake.load_table(("db", "events"))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    catalog.execute(
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )
    with catalog.runtime.catalog.transaction() as s:
        catalog.runtime.catalog.objects.insert(
            s,
            ObjectName.parse("mv_lake"),
            ObjectKind.MATERIALIZED_VIEW,
            definition="SELECT k, sum(v) AS v FROM lake.db.events GROUP BY k",
            partition_by="k",
            base_tables=["lake.db.events"],
        )
    app = TestClient(create_app(catalog))
    page = app.get("/objects/lake.db.events")
    assert page.status_code == 200, page.text
    text = page.text
    assert '<td id="table-kind">table of external catalog &#39;lake&#39;</td>' in text
    assert '<td id="table-format">iceberg</td>' in text and '<td id="table-partition-columns">k</td>' in text
    assert '<td id="table-partitions">2</td>' in text
    seen = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC).isoformat()
    assert f'<td id="table-last-change">{seen}</td>' in text
    assert f"<tr><th>snapshot / version</th><td>{snapshot.snapshot_id}</td></tr>" in text
    assert '<a href="/objects/mv_lake">mv_lake</a>' in text.split("<h2>Read by</h2>")[1]
    assert app.get("/api/objects/lake.db.events").json()["table"]["partitions"] == 2


def test_pipelines_page_lists_every_dataset(catalog: Client) -> None:
    from sparkmv.catalog.pipelines import PipelineDataset

    store = catalog.runtime.catalog.pipelines
    mv, py = ObjectName("default", "mv_fresh"), ObjectName("default", "py_totals")
    store.register(
        "shop",
        [
            PipelineDataset("shop", mv, "materialized view", "sql", "/p/t/a.sql", 3),
            PipelineDataset("shop", py, "materialized view", "python", "/p/t/defs.py", 9),
        ],
    )
    done = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC).replace(tzinfo=None)
    store.record("shop", PipelineDataset("shop", py, "", "", "", 1, "SUCCESS", "FULL", "recomputed", 4, done, done))
    page = TestClient(create_app(catalog)).get("/pipelines").text
    assert re.findall(r'<tr class="dataset" data-name="(\w+)">', page) == ["mv_fresh", "py_totals"]
    assert '<a href="/objects/mv_fresh">mv_fresh</a>' in page  # a sparkmv MV links to its page
    assert "<td>py_totals</td>" in page and '<td class="kind">python materialized view</td>' in page
    assert '<td class="state">SUCCESS</td><td class="technique">FULL</td>\n<td>4</td>' in page
    assert "<code>/p/t/defs.py:9</code>" in page and "2 datasets of <code>sparkmv.pipeline_datasets</code>" in page
    assert '<a href="/pipelines" id="nav-pipelines">' in page
