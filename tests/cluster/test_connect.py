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
    assert answer["differences"] == {name: [0, 0] for name in DEMO_MVS}, answer


def test_cancel_a_refresh_running_through_connect(
    connect_target: SparkTarget, make_client: Any, tmp_path: Path
) -> None:
    cancel_a_running_refresh(connect_target, make_client, tmp_path)
