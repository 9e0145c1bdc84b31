"""The web UI's path loads neither pyarrow, pandas, numpy nor pyspark, also over real Iceberg
tables (an MV's partition metadata, an MV over that MV pinned for its freshness): they would
take ~130 MB of the UI process (the target is under 150 MB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from sparkmv.names import ObjectName
from tests.ui.server import env
from tests.ui.states import DAYS, build

SERVE = """
import json, sys
from pathlib import Path
from starlette.testclient import TestClient
from sparkmv.client.client import Client
from sparkmv.ui.app import create_app

app = TestClient(create_app(Client(home=Path(sys.argv[1]), recover=False)))
pages = ["/", "/runs", "/rewrite", "/runs/1", "/objects/events", "/objects/mv_fresh", "/objects/mv_nested"]
statuses = [app.get(p).status_code for p in pages]
fresh = app.get("/api/objects/mv_fresh").json()
nested = app.get("/api/objects/mv_nested").json()
print(json.dumps({
    "statuses": statuses,
    "partitions": [(p["value"], p["rows"]) for p in fresh["partitions"]],
    "nested": nested["object"]["state"],
    "loaded": [m for m in ("pyarrow", "pandas", "numpy", "pyspark") if m in sys.modules],
}))
"""


def test_ui_path_loads_no_pyarrow_pandas_numpy_or_pyspark(tmp_path: Path) -> None:
    client = build(tmp_path / "home", tmp_path / "data")
    rt = client.runtime
    table = rt.iceberg.create_table(
        ObjectName.parse("mv_fresh"), pa.schema([("d", pa.string()), ("n", pa.int64())]), "d"
    )
    table.append(pa.table({"d": list(DAYS), "n": pa.array([1, 2, 3], pa.int64())}))
    with rt.catalog.transaction() as s:
        nested = rt.catalog.objects.get(s, ObjectName.parse("mv_nested"))
        run_id = rt.catalog.runs.list(s, nested.id, 1)[0].run_id
        rt.catalog.objects.set_fields(s, nested.id, last_success_run_id=run_id)
    client.close()
    out = subprocess.run(
        [sys.executable, "-c", SERVE, str(tmp_path / "home")], capture_output=True, text=True, env=env(), check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["statuses"] == [200] * 7
    assert got["partitions"] == [[d, 1] for d in DAYS]  # read from the manifests
    assert got["nested"] == "stale"  # mv_fresh's partitions appeared since: pinned as Iceberg
    assert got["loaded"] == []
