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
