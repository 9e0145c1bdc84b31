"""Crash a real refresh process at every fault point of the lifecycle, recover, and check
the object, for both job kinds (MV refresh, table reload; see :mod:`tests.refresh.kinds`).

Each case: an object whose refresh is cut into several chunks (MV: three STRICT chunks of
two partitions; table: four vnodes merged one per batch), its input changed, a subprocess
refresh (its own JVM) killed at the fault point by ``SPARKMV_FAULT`` (``os._exit`` or
``SIGKILL``), the lease left to expire (2 s), then recovery in another process. Afterwards
the object equals its input recomputed (no missing, no duplicated row), the run is
SUCCESS, one commit is tagged with the run id, and chunks completed before the crash were
not computed again: their progress row says one attempt and the recovering process ran
no Spark job in their job group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.refresh.lifecycle import chunk_job_group
from sparkmv.storage.iceberg import RUN_ID_PROPERTY
from tests.refresh.kinds import JobKindCase, kinds_reload_long
from tests.refresh.procs import cli, object_row, read_log, reap, spawn, wait_lease_expired

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _group_jobs(client: Any, run_id: int, chunks: int) -> dict[int, set[int]]:
    tracker = client.spark.sparkContext.statusTracker()
    return {k: set(tracker.getJobIdsForGroup(chunk_job_group(run_id, k))) for k in range(chunks)}


def _check(
    case: JobKindCase, client: Any, run_id: int, before_crash: set[int], recomputed_here: bool, jobs_before: Any
) -> None:
    """Object correct, run SUCCESS, completed chunks not recomputed, one tagged commit."""
    assert object_row(client, case.name).state == "IDLE"
    run = next(r for r in client.runs(case.name) if r.run_id == run_id)
    assert run.state == "SUCCESS", run
    case.assert_matches(client, run_id)
    chunks = client.chunks(run_id)
    assert len(chunks) == case.chunks and all(c["is_completed"] for c in chunks)
    for c in chunks:
        if c["chunk_id"] in before_crash:
            assert c["attempts"] == 1, c
    if recomputed_here:
        jobs_after = _group_jobs(client, run_id, case.chunks)
        for k in range(case.chunks):
            new_jobs = jobs_after[k] - jobs_before[k]
            if k in before_crash:
                assert not new_jobs, f"chunk {k} was completed before the crash but recomputed"
            else:
                assert new_jobs, f"chunk {k} should have been computed by the recovery"
    table = client.runtime.iceberg.load(ObjectName.parse(case.name))
    tagged = [s for s in table.snapshots() if s.summary is not None and s.summary.get(RUN_ID_PROPERTY) == str(run_id)]
    # one commit (one snapshot replacing the refreshed partitions), never twice
    assert len(tagged) == 1, tagged


def _cases(case: JobKindCase) -> list[tuple[str, str, set[int]]]:
    every = set(range(case.chunks))
    return [
        # fault, mode, chunks recorded before the crash
        ("before_progress_recorded:1", "kill", {0}),
        ("after_progress_recorded:1", "exit", {0, 1}),
        ("before_publish", "kill", every),
        ("after_publish", "exit", every),
    ]


@pytest.mark.parametrize("case", kinds_reload_long())
def test_crash_at_each_point_then_recover(make_client: Any, tmp_path: Path, case: JobKindCase) -> None:
    """One object per fault point; the four refresh processes run (and die) side by side."""
    running = []
    for fault, mode, before_crash in _cases(case):
        case_dir = tmp_path / fault.replace(":", "-")
        client, home = case.setup(make_client, case_dir)
        log = case_dir / "refresh.log"
        proc = spawn(home, None, case.worker, log, fault=fault, mode=mode)
        running.append((fault, mode, before_crash, client, proc, log))
    for fault, mode, _before, _client, proc, log in running:
        rc = reap(proc)
        assert rc == (17 if mode == "exit" else -9), f"{fault}: {read_log(log)}"

    for fault, _mode, before_crash, client, _proc, _log in running:
        row = object_row(client, case.name)
        assert row.state != "IDLE", f"{fault}: the killed refresh must leave its run behind"
        run_id = int(row.current_run_id)
        chunks = client.chunks(run_id)
        assert {c["chunk_id"] for c in chunks if c["is_completed"]} == before_crash, fault
        wait_lease_expired(client, case.name)
        jobs_before = _group_jobs(client, run_id, case.chunks)
        outcomes = client.recover()
        assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "resumed")], fault
        # after_publish: the commit had landed, so recovery completed the catalog side only
        # (_check asserts that one commit is tagged with the run id).
        _check(case, client, run_id, before_crash, True, jobs_before)


@pytest.mark.parametrize("case", kinds_reload_long())
def test_crash_after_staged_then_crash_during_cleanup(make_client: Any, tmp_path: Path, case: JobKindCase) -> None:
    """Die after chunk 1 is staged; recover with ``sparkmv recover`` in a process that dies
    during cleanup; a later ``recover`` removes the orphan staging the cleanup left."""
    client, home = case.setup(make_client, tmp_path)
    log = tmp_path / "refresh.log"
    rc = reap(spawn(home, None, case.worker, log, fault="after_chunk_staged:1", mode="exit"))
    assert rc == 17, read_log(log)
    row = object_row(client, case.name)
    assert row.state != "IDLE", "the killed refresh must leave its run behind"
    run_id = int(row.current_run_id)
    orphans = [root / "chunk-1-a1" for root in case.staging_roots(client, run_id) if (root / "chunk-1-a1").is_dir()]
    assert orphans, "chunk 1 was staged but not recorded"
    wait_lease_expired(client, case.name)

    log = tmp_path / "recover.log"
    rc = reap(spawn(home, None, ["recover"], log, fault="during_cleanup", mode="exit", cli=True))
    assert rc == 17, read_log(log)
    assert object_row(client, case.name).state == "IDLE", "the catalog side finished before the cleanup crash"
    assert all(o.is_dir() for o in orphans), "the crash during cleanup left the orphan attempt"

    _check(case, client, run_id, {0}, False, None)
    attempts = {c["chunk_id"]: c["attempts"] for c in client.chunks(run_id)}
    assert attempts == {k: 2 if k == 1 else 1 for k in range(case.chunks)}

    result = cli(home, None, "recover")
    assert result.returncode == 0, result.stderr
    assert f"run {run_id} cleaned" in result.stdout
    assert not any(o.exists() for o in orphans)
    case.assert_matches(client, run_id)  # nothing the object references was removed
