"""Every dataset of a pipeline is visible after a run: ``sparkmv.pipeline_datasets`` lists the
SQL and Python ones, views and streaming tables with their outcome, and ``sparkmv status``
shows the datasets that are not sparkmv MVs beside the MVs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkmv.client.catalog_query import system_table_rows
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import monthly_sales
from tests.pipelines.test_pipeline_sql import write_project

pytestmark = [pytest.mark.spark]

PYTHON = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()
label = F.udf(lambda m: "month " + m)


@dp.materialized_view
def labelled() -> DataFrame:
    return spark.table("by_month").select(label("m").alias("label"), "n")
"""
SQL = """CREATE TEMPORARY VIEW paid AS SELECT m, amount FROM sales WHERE amount > 1;
CREATE MATERIALIZED VIEW by_month AS SELECT m, count(*) AS n FROM paid GROUP BY m;
"""


def test_pipeline_datasets_and_status(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 10)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "p", {"defs.py": PYTHON, "mvs.sql": SQL})
    result = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert result.state == "COMPLETED"
    defs = tmp_path / "p" / "transformations"

    cols, rows = system_table_rows(
        client.runtime,
        "SELECT name, kind, source, definition, is_sparkmv_object, last_state, last_technique, rows "
        "FROM sparkmv.pipeline_datasets ORDER BY name",
    ) or ([], [])
    assert cols[0] == "name"
    assert [tuple(r) for r in rows] == [
        ("by_month", "materialized view", "sql", f"{defs / 'mvs.sql'}:2", True, "SUCCESS", "FULL", 3),
        ("labelled", "materialized view", "python", f"{defs / 'defs.py'}:9", False, "SUCCESS", "FULL", 3),
        ("paid", "temporary view", "sql", f"{defs / 'mvs.sql'}:1", False, None, None, None),
    ]

    # A second project run without a dataset removes it from the registry.
    (defs / "defs.py").unlink()
    assert run_pipeline(client, load_project(spec, lambda: client.spark)).state == "COMPLETED"
    assert [d.name.name for d in client.pipeline_datasets("shop")] == ["by_month", "paid"]


def test_status_lists_python_datasets(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 2, 10)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "p", {"defs.py": PYTHON, "mvs.sql": SQL})
    assert run_pipeline(client, load_project(spec, lambda: client.spark)).state == "COMPLETED"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    home = str(client.runtime.settings.home)
    out = subprocess.run(
        [sys.executable, "-m", "sparkmv.cli.main", "--home", home, "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "materialized views" in text and "pipeline datasets" in text
    mv_part, datasets_part = text.split("pipeline datasets")
    assert "by_month" in mv_part and "labelled" not in mv_part
    assert "labelled" in datasets_part and "python materialized view" in datasets_part
    assert "by_month" not in datasets_part  # an MV has its line in the first table only

    one = subprocess.run(
        [sys.executable, "-m", "sparkmv.cli.main", "--home", home, "status", "labelled", "--format", "csv"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert one.returncode == 0, one.stderr
    assert one.stdout.splitlines()[1].startswith("labelled,shop,python materialized view,SUCCESS,FULL,2,")
