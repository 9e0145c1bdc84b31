"""sparkmv on a Spark standalone cluster (``--master spark://...``): the TPC-H demo MVs equal
their queries, a running refresh is cancelled (its jobs on the cluster killed), and a refresh
whose driver process is killed is recovered by a second process on the same cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.demo.data import DEMO_MVS, TpchLayout
from tests.cluster.scenarios import SparkTarget, cancel_a_running_refresh
from tests.helpers import assert_mv_matches
from tests.refresh.procs import FAST_LEASE, QUERY, create_mv, object_row, read_log, wait_lease_expired, write_events

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]


@pytest.mark.long  # `make test-slow`: the cluster's refresh and recovery stay in `make test` below
def test_demo_mvs_refreshed_on_the_cluster_equal_their_queries(
    cluster_target: SparkTarget, tpch: TpchLayout, tmp_path: Path
) -> None:
    data_dir = tpch.root.parent.parent  # prepare() finds the data there and reuses it
    answer = cluster_target.worker(tmp_path / "home", "demo", str(data_dir))
    assert answer["master"] == cluster_target.options[1] and not answer["connect"], answer
    assert answer["refreshes"] == {name: ["SUCCESS", "FULL", None] for name in DEMO_MVS}, answer
    assert answer["differences"] == {name: "" for name in DEMO_MVS}, answer


def test_cancel_a_refresh_running_on_the_cluster(cluster_target: SparkTarget, make_client: Any, tmp_path: Path) -> None:
    cancel_a_running_refresh(cluster_target, make_client, tmp_path)


def test_refresh_whose_driver_is_killed_is_recovered_on_the_cluster(
    cluster_target: SparkTarget, make_client: Any, tmp_path: Path
) -> None:
    data, home = tmp_path / "events", tmp_path / "home"
    write_events(data, 1)
    client = make_client(home)
    strict = {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2", **FAST_LEASE}
    create_mv(client, data, strict)  # six days: three chunks of two partitions
    write_events(data, 2)

    log = tmp_path / "refresh.log"
    fault = {"SPARKMV_FAULT": "after_progress_recorded:1", "SPARKMV_FAULT_MODE": "kill"}
    proc = cluster_target.spawn(home, ["sql", "REFRESH MATERIALIZED VIEW mv"], log, **fault)
    try:
        code = proc.wait(timeout=300)
    finally:
        _kill_group(proc.pid)
    assert code == -9, read_log(log)  # SIGKILL at the fault point, after chunk 1 was recorded
    row = wait_lease_expired(client)
    run_id = int(row.current_run_id)
    assert row.state == "REFRESHING"
    assert [c["is_completed"] for c in client.chunks(run_id)] == [True, True, False]

    answer = cluster_target.cli(home, "recover")
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert f"mv: run {run_id} resumed: SUCCESS" in answer.stdout, answer.stdout
    assert object_row(client).state == "IDLE"
    assert [c["attempts"] for c in client.chunks(run_id)] == [1, 1, 1], "recorded chunks are not computed again"
    assert_mv_matches(client, "mv", QUERY)


def _kill_group(pid: int) -> None:
    import os
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)  # the driver JVM of the killed process
    except ProcessLookupError:
        pass
