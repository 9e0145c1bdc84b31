"""A live-but-stalled owner, for every job kind: its lease expires, recovery takes the run
over and finishes it; when the stalled owner wakes up (and fails, or goes on), nothing it
does is kept: the run's state and attempts, the object's state and failure count, the
published snapshots and the staging that recovery used stay exactly as recovery left them;
only the owner's own unrecorded staging is removed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.refresh.kinds import JobKindCase, kinds_reload_long, staged_files
from tests.refresh.procs import object_row, read_log, reap, spawn, wait_for, wait_lease_expired

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CASES = [
    # fault point, mode, attempt directories the stalled owner staged but never recorded
    ("after_chunk_staged:1", "stall-fail", ["chunk-1-a1"]),  # wakes up and fails while REFRESHING
    ("before_publish", "stall", []),  # wakes up in FINISHING and tries to publish
]


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def _state(client: Any, name: str, run_id: int) -> tuple[Any, ...]:
    """What a late owner must not change: the run row and the object's lifecycle fields."""
    rt = client.runtime
    with rt.catalog.read() as s:
        run = rt.catalog.runs.get(s, run_id)
        row = object_row(client, name)
        return (
            run.state,
            run.attempts,
            run.error,
            run.finished,
            run.snapshot_id,
            row.state,
            row.current_run_id,
            row.consecutive_failures,
            row.last_success_run_id,
        )


@pytest.mark.parametrize("case", kinds_reload_long())
def test_stalled_owner_is_taken_over_and_leaves_the_run_untouched(
    make_client: Any, tmp_path: Path, case: JobKindCase
) -> None:
    """Both stall points of one job kind, the stalled workers side by side."""
    running = []
    for fault, mode, stale in CASES:
        case_dir = tmp_path / fault.replace(":", "-")
        client, home = case.setup(make_client, case_dir)
        log = case_dir / "stalled.log"
        proc = spawn(home, None, case.worker, log, fault=fault, mode=mode)
        running.append((fault, stale, client, proc, log))
    try:
        for fault, stale, client, proc, log in running:
            _take_over_then_wake(case, fault, stale, client, proc, log)
    finally:
        for *_, proc, _log in running:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                reap(proc, timeout=30)


def _take_over_then_wake(case: JobKindCase, fault: str, stale: list[str], client: Any, proc: Any, log: Path) -> None:
    wait_for(lambda: _stopped(proc.pid) or proc.poll() is not None, 240, f"{fault}: the owner to stall")
    assert proc.poll() is None, read_log(log)
    row = wait_lease_expired(client, case.name)
    run_id = int(row.current_run_id)
    assert f":{proc.pid}:" in row.lease_owner  # alive, holding an expired lease
    roots = case.staging_roots(client, run_id)
    for name in stale:
        # (a reload with ON CONFLICT OVERWRITE publishes its staged source as table files,
        # so its merge attempts hold changelog files only)
        assert any((root / name).is_dir() for root in roots), f"{fault}: {name} staged in {roots}"

    outcomes = client.recover()
    assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "resumed")], fault
    assert outcomes[0].run is not None and outcomes[0].run.state == "SUCCESS", outcomes[0].run
    case.assert_matches(client, run_id)
    recovered = _state(client, case.name, run_id)
    assert recovered[:2] == ("SUCCESS", 2) and recovered[5:8] == ("IDLE", None, 0), recovered
    snapshots = case.snapshots(client)
    staging = staged_files(roots)
    assert staging, "the published files live in the run's staging"

    os.kill(proc.pid, signal.SIGCONT)  # the stalled owner wakes up and tries to go on
    rc = reap(proc, timeout=180)
    output = read_log(log)
    assert rc == 1, output
    assert "LeaseLostError" in output and "lost its lease" in output, output

    # nothing the late owner did is visible
    assert _state(client, case.name, run_id) == recovered, fault
    assert case.snapshots(client) == snapshots, fault
    assert staged_files(roots) == staging, f"{fault}: the late owner touched the run's staging"
    case.assert_matches(client, run_id)
    for name in stale:
        assert not any((root / name).exists() for root in roots), "the late owner's unrecorded staging must go"
    with client.runtime.catalog.read() as s:
        progress = client.runtime.catalog.runs.chunks(s, run_id)
    recorded = {Path(f.removeprefix("file://")) for c in progress for f in c.files}
    assert recorded and all(f.is_file() for f in recorded), "published files must stay"
