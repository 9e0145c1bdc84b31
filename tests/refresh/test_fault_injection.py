"""Crash a real refresh process at every fault point, recover, and check the MV.

Each case: an MV over six daily partitions cut into three STRICT chunks of two, base data
rewritten, a subprocess ``refresh`` (its own JVM) killed at the fault point by
``SPARKMV_FAULT`` (``os._exit`` or ``SIGKILL``), the lease left to expire (2 s), then
recovery in another process. Afterwards the MV equals its query from scratch (no missing,
no duplicated row), the run is SUCCESS, and chunks completed before the crash were not
computed again: their progress row says one attempt and the recovering process ran no
Spark job in their job group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.refresh.lifecycle import chunk_job_group
from sparkmv.storage.iceberg import RUN_ID_PROPERTY
from tests.helpers import assert_mv_matches, rows_of
from tests.refresh.procs import (
    QUERY,
    STRICT_2,
    cli,
    create_mv,
    object_row,
    read_log,
    reap,
    spawn,
    wait_lease_expired,
    write_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _setup(make_client: Any, tmp_path: Path, catalog_url: str | None = None) -> tuple[Any, Path]:
    data = tmp_path / "events"
    write_events(data, 1)
    home = tmp_path / "home"
    client = make_client(home, catalog_url)
    create_mv(client, data, STRICT_2)
    write_events(data, 2)  # every partition changed: three chunks to refresh
    return client, home


def _crash(client: Any, home: Path, catalog_url: str | None, tmp_path: Path, fault: str, mode: str) -> int:
    """Run a refresh in a subprocess that dies at ``fault``; returns the run id."""
    log = tmp_path / f"refresh-{fault.replace(':', '-')}.log"
    rc = reap(spawn(home, catalog_url, ["refresh", "mv"], log, fault=fault, mode=mode))
    assert rc == (17 if mode == "exit" else -9), read_log(log)
    row = object_row(client)
    assert row.state != "IDLE", "the killed refresh must leave its run behind"
    return int(row.current_run_id)


def _group_jobs(client: Any, run_id: int, chunks: int) -> dict[int, set[int]]:
    tracker = client.spark.sparkContext.statusTracker()
    return {k: set(tracker.getJobIdsForGroup(chunk_job_group(run_id, k))) for k in range(chunks)}


def _check(client: Any, run_id: int, before_crash: set[int], recomputed_here: bool, jobs_before: Any) -> None:
    """MV correct, run SUCCESS, completed chunks not recomputed."""
    assert object_row(client).state == "IDLE"
    run = next(r for r in client.runs("mv") if r.run_id == run_id)
    assert run.state == "SUCCESS", run
    assert_mv_matches(client, "mv", QUERY)
    mv_rows = rows_of(client.table("mv"))
    assert len(mv_rows) == len({(r[0], r[1]) for r in mv_rows}) == 6 * 7  # no duplicate, none missing
    chunks = client.chunks(run_id)
    assert len(chunks) == 3 and all(c["is_completed"] for c in chunks)
    for c in chunks:
        if c["chunk_id"] in before_crash:
            assert c["attempts"] == 1, c
    if recomputed_here:
        jobs_after = _group_jobs(client, run_id, 3)
        for k in range(3):
            new_jobs = jobs_after[k] - jobs_before[k]
            if k in before_crash:
                assert not new_jobs, f"chunk {k} was completed before the crash but recomputed"
            else:
                assert new_jobs, f"chunk {k} should have been computed by the recovery"
    table = client.runtime.iceberg.load(_name("mv"))
    tagged = [s for s in table.snapshots() if s.summary is not None and s.summary.get(RUN_ID_PROPERTY) == str(run_id)]
    # one commit: a delete snapshot and an append snapshot in one transaction, never twice
    assert 1 <= len(tagged) <= 2 and tagged[-1].parent_snapshot_id in (None, tagged[0].snapshot_id), tagged


CASES = [
    # fault, mode, chunks recorded before the crash, chunks the recovery must compute
    ("before_progress_recorded:1", "kill", {0}),
    ("after_progress_recorded:1", "exit", {0, 1}),
    ("before_publish", "kill", {0, 1, 2}),
    ("after_publish", "exit", {0, 1, 2}),
]


def test_crash_at_each_point_then_recover(make_client: Any, tmp_path: Path) -> None:
    """One MV per fault point; the four refresh processes run (and die) side by side."""
    cases = []
    for fault, mode, before_crash in CASES:
        case_dir = tmp_path / fault.replace(":", "-")
        client, home = _setup(make_client, case_dir)
        log = case_dir / "refresh.log"
        proc = spawn(home, None, ["refresh", "mv"], log, fault=fault, mode=mode)
        cases.append((fault, mode, before_crash, client, proc, log))
    for fault, mode, _before, _client, proc, log in cases:
        rc = reap(proc)
        assert rc == (17 if mode == "exit" else -9), f"{fault}: {read_log(log)}"

    for fault, _mode, before_crash, client, _proc, _log in cases:
        row = object_row(client)
        assert row.state != "IDLE", f"{fault}: the killed refresh must leave its run behind"
        run_id = int(row.current_run_id)
        chunks = client.chunks(run_id)
        assert {c["chunk_id"] for c in chunks if c["is_completed"]} == before_crash, fault
        wait_lease_expired(client)
        jobs_before = _group_jobs(client, run_id, 3)
        outcomes = client.recover()
        assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "resumed")], fault
        # after_publish: the commit had landed, so recovery completed the catalog side only
        # (_check asserts that one commit is tagged with the run id).
        _check(client, run_id, before_crash, True, jobs_before)


def test_crash_after_staged_then_crash_during_cleanup(make_client: Any, tmp_path: Path) -> None:
    """Die after chunk 1 is staged; recover with ``sparkmv recover`` in a process that dies
    during cleanup; a later ``recover`` removes the orphan staging the cleanup left."""
    client, home = _setup(make_client, tmp_path)
    run_id = _crash(client, home, None, tmp_path, "after_chunk_staged:1", "exit")
    staging = Path(client.runtime.iceberg.load(_name("mv")).location().removeprefix("file://")) / "data"
    orphan = staging / f"run-{run_id}" / "chunk-1-a1"
    assert orphan.is_dir(), "chunk 1 was staged but not recorded"
    wait_lease_expired(client)

    log = tmp_path / "recover.log"
    rc = reap(spawn(home, None, ["recover"], log, fault="during_cleanup", mode="exit", cli=True))
    assert rc == 17, read_log(log)
    assert object_row(client).state == "IDLE", "the catalog side finished before the cleanup crash"
    assert orphan.is_dir(), "the crash during cleanup left the orphan attempt"

    _check(client, run_id, {0}, False, None)
    attempts = {c["chunk_id"]: c["attempts"] for c in client.chunks(run_id)}
    assert attempts == {0: 1, 1: 2, 2: 1}

    result = cli(home, None, "recover")
    assert result.returncode == 0, result.stderr
    assert f"run {run_id} cleaned" in result.stdout
    assert not orphan.exists()
    assert_mv_matches(client, "mv", QUERY)  # nothing the MV references was removed


def _name(text: str) -> Any:
    from sparkmv.names import ObjectName

    return ObjectName.parse(text)
