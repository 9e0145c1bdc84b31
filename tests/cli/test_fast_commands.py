"""Catalog-only commands answer without importing pyspark (nor starting a JVM): ``runs``,
``status``, ``cancel``, ``pause``, ``resume``, ``SHOW``, SELECTs of system tables and
``EXPLAIN <select>`` (with and without ``--no-rewrite``). Checked by the modules loaded in
a real ``sparkmv`` process, not by the wall clock (``bench/bench_cli.py`` measures that)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkmv.client.client import Client
from tests.helpers import import_probe, write_partition

pytestmark = [pytest.mark.spark]

# Runs the sparkmv entry point, then reports the exit code and whether pyspark was imported.
# pandas is not counted: pyarrow.dataset, which pyiceberg's FileIO imports, loads it whenever it
# is installed, and Spark Connect's client needs it installed.
PROBE = import_probe(("pyspark", "py4j"))
ROLLUP = "SELECT sum(amount) AS t FROM sales"
ROLLUP_DETAIL = "grouping by no keys"
ROLLUP_SQL = "SELECT CAST(SUM(default__by_month.t) AS DOUBLE) AS t FROM default.by_month AS default__by_month"
DISABLED = "(disabled in this session: queries run as written)"


@pytest.fixture(scope="module")
def home(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with a Parquet base table and a built MV."""
    root = tmp_path_factory.mktemp("fast")
    sales = root / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "amount": [1.5, 2.0]})
    write_partition(sales, "m", "2024-02", {"id": [3], "amount": [10.0]})
    with Client(home=root / "home", spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        client.sql(
            "CREATE MATERIALIZED VIEW by_month PARTITION BY m AS SELECT m, sum(amount) AS t FROM sales GROUP BY m"
        )
    return root / "home"


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["runs", "by_month", "--format", "csv"], 0, "1,MANUAL,"),
        (["status", "--format", "csv"], 0, "by_month,IDLE,2,2,SUCCESS,"),
        (["status", "by_month"], 0, "fresh"),
        (["sql", "SHOW MATERIALIZED VIEWS", "--format", "csv"], 0, "by_month,IDLE,True,m,MANUAL"),
        (["sql", "SHOW TABLES", "--format", "csv"], 0, "sales,EXTERNAL_TABLE,"),
        (
            ["sql", "SELECT name, state, rows FROM sparkmv.materialized_views", "--format", "csv"],
            0,
            "name,state,rows\nby_month,IDLE,2\n",
        ),
        (
            [
                "sql",
                "SELECT run_id, state FROM sparkmv.task_runs WHERE state = 'SUCCESS' ORDER BY run_id",
                "--format",
                "csv",
            ],
            0,
            "run_id,state\n1,SUCCESS\n",
        ),
        (
            ["sql", "--no-rewrite", f"EXPLAIN {ROLLUP}"],
            0,
            f"rewrite: by_month: aggregate rollup ({ROLLUP_DETAIL}) {DISABLED}\n"
            f"SQL: {ROLLUP_SQL}\nrejected MVs: (none)\n",
        ),
        (["--no-rewrite", "sql", f"EXPLAIN {ROLLUP}"], 0, f"({ROLLUP_DETAIL}) {DISABLED}\n"),
        (
            ["sql", f"EXPLAIN {ROLLUP}"],
            0,
            f"rewrite: by_month: aggregate rollup ({ROLLUP_DETAIL})\nSQL: {ROLLUP_SQL}\n",
        ),
        (["sql", "SELECT count(*) AS n FROM sparkmv.rewrite_log", "--format", "csv"], 0, "n\n0\n"),
        (["cancel", "by_month"], 1, "error: 'by_month' is not being refreshed"),
        (["pause", "by_month"], 1, "error: 'by_month' is not being refreshed"),
        (["resume", "by_month"], 1, "error: 'by_month' is not being refreshed"),
    ],
    ids=[
        "runs",
        "status",
        "status_one",
        "show_mvs",
        "show_tables",
        "mv_table",
        "runs_table",
        "explain_no_rewrite",
        "explain_global_no_rewrite",
        "explain_rewrite",
        "empty_rewrite_log",
        "cancel",
        "pause",
        "resume",
    ],
)
def test_catalog_only_commands_do_not_import_pyspark(home: Path, argv: list[str], code: int, expected: str) -> None:
    env = {**os.environ}
    env.pop("SPARKMV_CATALOG_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(home), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report == {"code": code, "heavy": []}, done.stderr
    assert expected in done.stdout + done.stderr
    assert not (home / "logs" / "spark.log").exists(), "no JVM was started"
