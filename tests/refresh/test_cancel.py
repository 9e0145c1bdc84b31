"""Control of a running refresh from another process: cancel during a long chunk,
pause/resume between chunks, and a throttle changed while the run goes on."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sparkmv.catalog.clock import utcnow
from sparkmv.names import ObjectName
from sparkmv.refresh.lifecycle import chunk_job_group
from tests.helpers import assert_mv_matches, rows_of
from tests.refresh.procs import (
    QUERY,
    STRICT_2,
    cli,
    create_mv,
    mv_before_a_long_refresh,
    object_row,
    set_properties,
    wait_for,
    write_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAYS_8 = [f"2024-01-0{d}" for d in range(1, 9)]

# A self-join: with one key, every chunk of two big partitions produces ~2e9 join rows.


def _in_background(client: Any) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["run"] = client.refresh("mv")
        except Exception as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _current_run(client: Any) -> int | None:
    row = object_row(client)
    return int(row.current_run_id) if row.state != "IDLE" and row.current_run_id else None


def test_cancel_during_a_long_chunk(make_client: Any, tmp_path: Path) -> None:
    client, home, before, snapshot = mv_before_a_long_refresh(make_client, tmp_path)

    thread, result = _in_background(client)
    run_id = wait_for(lambda: _current_run(client), 60, "the refresh to start")
    group = chunk_job_group(run_id, 0)
    wait_for(lambda: _tasks_running(client.runtime.spark, group), 120, f"tasks of Spark job group {group} to run")
    assert not any(c["is_completed"] for c in client.chunks(run_id)), "chunk 0 must still be running"

    answer = cli(home, None, "cancel", "mv")  # another process records the CANCEL command
    requested = time.monotonic()  # (the CLI's own start-up is not part of the latency)
    assert answer.returncode == 0, answer.stderr
    assert f"cancel requested for run {run_id}" in answer.stdout
    thread.join(timeout=60)
    elapsed = time.monotonic() - requested
    assert not thread.is_alive()
    assert elapsed < 10, f"the refresh returned {elapsed:.1f} s after the cancel"

    run = result["run"]
    assert run.state == "CANCELLED" and run.chunks_done == 0, run
    assert object_row(client).state == "IDLE"
    assert client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id == snapshot
    assert rows_of(client.table("mv")) == before, "a cancelled refresh leaves the MV unchanged"
    location = client.runtime.iceberg.load(ObjectName.parse("mv")).location()
    staging = Path(location.removeprefix("file://")) / "data" / f"run-{run_id}"
    assert not staging.exists(), "a cancelled run's staging is discarded"


def _tasks_running(spark: Any, group: str) -> bool:
    """True while a Spark job of job group ``group`` runs tasks (classic SparkContext)."""
    tracker = spark.sparkContext.statusTracker()
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        if job is None or job.status != "RUNNING":
            continue
        stages = (tracker.getStageInfo(stage) for stage in job.stageIds)
        if any(stage is not None and stage.numActiveTasks > 0 for stage in stages):
            return True
    return False


def _starts(client: Any, run_id: int) -> dict[int, float]:
    """Start time of each completed chunk (checkpoint minus duration), in seconds."""
    return {
        c["chunk_id"]: c["last_checkpoint"].timestamp() - c["duration_seconds"]
        for c in client.chunks(run_id)
        if c["is_completed"]
    }


def _started(client: Any, run_id: int) -> int:
    """Chunks of the run that began an attempt (recorded in the progress table at start)."""
    return sum(1 for c in client.chunks(run_id) if c["attempts"])


def test_pause_resume_and_throttle_while_running(
    make_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sparkmv.refresh")
    data = tmp_path / "events"
    write_events(data, 1, days=DAYS_8)
    home = tmp_path / "home"
    client = make_client(home)
    create_mv(client, data, {**STRICT_2, "partition_refresh_number": "1"})  # eight chunks
    set_properties(client, throttle_chunks_per_minute="40")  # a chunk every 1.5 s at most
    write_events(data, 2, days=DAYS_8)

    thread, result = _in_background(client)
    run_id = wait_for(lambda: _current_run(client), 60, "the refresh to start")
    wait_for(lambda: len(_starts(client, run_id)) >= 1, 60, "the first chunk")
    answer = cli(home, None, "pause", "mv")
    assert answer.returncode == 0 and f"pause requested for run {run_id}" in answer.stdout, answer.stderr
    paused = f"run {run_id} paused: no chunk starts until RESUME or CANCEL"
    wait_for(lambda: paused in caplog.messages, 60, "the run to hold at its pause", interval=0.05)
    # Held between chunks: every chunk it started is recorded, none is running.
    held = len(_starts(client, run_id))
    assert _started(client, run_id) == held < 7, "a paused run holds between chunks"
    assert thread.is_alive()

    shown = cli(home, None, "runs", "mv", "--format", "csv")  # seconds in which the run stays paused
    assert shown.returncode == 0, shown.stderr
    assert "chunk,partitions,completed,rows,files,bytes,attempts,seconds,checkpoint" in shown.stdout
    assert str(run_id) in shown.stdout and "RUNNING" in shown.stdout
    assert _started(client, run_id) == held, "a paused run starts no chunk"

    set_properties(client, throttle_chunks_per_minute="20")  # slower, changed while running
    before_resume = utcnow().timestamp()
    answer = cli(home, None, "resume", "mv")
    assert answer.returncode == 0, answer.stderr
    thread.join(timeout=120)
    assert not thread.is_alive() and result["run"].state == "SUCCESS", result
    assert result["run"].chunks_done == 8

    assert f"run {run_id} resumed" in caplog.messages
    starts = _starts(client, run_id)
    assert all(starts[c] >= before_resume for c in sorted(starts)[held:]), (starts, before_resume)
    order = sorted(starts)
    gaps = [starts[b] - starts[a] for a, b in itertools.pairwise(order)]
    assert all(g >= 1.4 for g in gaps[: held - 1]), gaps  # 40 per minute before the pause
    after = gaps[held:]  # between chunks started after the resume
    assert after and all(g >= 2.9 for g in after), gaps  # 20 per minute after the change
    assert_mv_matches(client, "mv", QUERY)
