"""A ``sparkmv pipeline run`` in which every dataset is up to date decides from metadata only
(the Parquet listing, the version maps, the Iceberg metadata): a real ``sparkmv`` process
reports both MVs SKIPPED without importing pyspark, py4j, pyarrow or pandas (so no JVM is
started). Checked by the modules loaded in that process, not by the wall clock
(``bench/bench_pipeline.py`` measures it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import import_probe, write_partition
from tests.pipelines.test_pipeline_sql import SQL, SQL_TOP, states, write_project

pytestmark = [pytest.mark.spark]

# Runs the sparkmv entry point, then reports the exit code and the heavy modules imported.
PROBE = import_probe(("pyspark", "py4j", "pyarrow", "pandas"))


def test_no_change_run_imports_no_spark(client: Any, tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    for month in ("2024-01", "2024-02"):
        write_partition(sales, "m", month, {"id": [1, 2, 3], "amount": [1.5, 2.0, 4.0]})
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"a_views.sql": SQL, "b_top.sql": SQL_TOP})
    first = run_pipeline(client, load_project(spec))
    assert states(first) == {"by_month": ("SUCCESS", "FULL"), "busy_months": ("SUCCESS", "FULL")}

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    argv = ["--home", str(client.settings.home), "pipeline", "run"]
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=spec.parent, capture_output=True, text=True, env=env, timeout=120
    )
    probe = json.loads(out.stderr.strip().splitlines()[-1])
    assert probe == {"code": 0, "heavy": []}, out.stderr
    lines = out.stdout.splitlines()
    assert "by_month (sql)  SKIPPED  SKIP  rows 2  up to date" in lines[1]
    assert "busy_months (sql)  SKIPPED  SKIP  rows 2  up to date" in lines[2]
    assert lines[3] == "run is COMPLETED: 2 SKIPPED"
