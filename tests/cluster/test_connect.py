"""sparkmv through Spark Connect (``--remote sc://...``, ``Client(spark=<Connect session>)``):
the TPC-H demo MVs equal their queries, and a running refresh is cancelled (its operation
interrupted on the server through its tag)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.demo.data import DEMO_MVS, TpchLayout
from tests.cluster.scenarios import SparkTarget, cancel_a_running_refresh

pytestmark = [pytest.mark.connect, pytest.mark.spark, pytest.mark.slow]


def test_demo_mvs_refreshed_through_connect_equal_their_queries(
    connect_target: SparkTarget, tpch: TpchLayout, tmp_path: Path
) -> None:
    data_dir = tpch.root.parent.parent
    answer = connect_target.worker(tmp_path / "home", "demo", str(data_dir))
    assert answer["connect"] and answer["master"] == "local[2]", answer  # the server's master
    assert answer["refreshes"] == {name: ["SUCCESS", "FULL", None] for name in DEMO_MVS}, answer
    assert answer["differences"] == {name: "" for name in DEMO_MVS}, answer


def test_cancel_a_refresh_running_through_connect(
    connect_target: SparkTarget, make_client: Any, tmp_path: Path
) -> None:
    cancel_a_running_refresh(connect_target, make_client, tmp_path)


def test_a_spark_error_through_connect_is_one_line_and_the_details_go_to_the_log(
    connect_target: SparkTarget, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    done = connect_target.cli(home, "sql", "SELECT nope")
    log = home / "logs" / "spark.log"
    assert done.returncode == 1 and done.stdout == "", done.stdout + done.stderr
    first, second = done.stderr.splitlines()  # nothing else: no traceback, no JSON record
    assert first.startswith("error: ") and "`nope` cannot be resolved" in first, first
    assert second == f"Spark's log: {log}"
    assert "UNRESOLVED_COLUMN" in log.read_text()


STREAMING_PROJECT = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
dp.create_streaming_table("events")


@dp.append_flow(target="events")
def from_json() -> DataFrame:
    return spark.readStream.format("json").schema("id BIGINT").load("{src}")
"""


def test_a_python_streaming_table_through_connect(connect_target: SparkTarget, tmp_path: Path) -> None:
    """The flow's micro-batches are written by Connect's server-side foreachBatch worker."""
    src, project = tmp_path / "src", tmp_path / "p"
    src.mkdir()
    (src / "a.json").write_text('{"id": 1}\n{"id": 2}\n')
    (project / "defs").mkdir(parents=True)
    spec = project / "spark-pipeline.yml"
    spec.write_text(f"name: p\nstorage: {project / 'storage'}\nlibraries:\n  - glob:\n      include: defs/**\n")
    (project / "defs" / "events.py").write_text(STREAMING_PROJECT.replace("{src}", str(src)))
    first = connect_target.cli(tmp_path / "home", "pipeline", "run", "--spec", str(spec))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "events (python streaming table)  SUCCESS  FULL  rows 2  flows from_json: created" in first.stdout
    (src / "b.json").write_text('{"id": 3}\n')
    second = connect_target.cli(tmp_path / "home", "pipeline", "run", "--spec", str(spec))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "SUCCESS  INCREMENTAL  rows 3  flows from_json: appended 1 rows (from_json 1)" in second.stdout
