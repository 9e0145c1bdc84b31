"""A live-but-stalled owner: its lease expires, recovery takes the run over and finishes
it; when the stalled owner wakes up, its late writes are rejected (the compare-and-set on
the lease fails, the publish is refused) and its unrecorded staging is removed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from tests.helpers import assert_mv_matches
from tests.refresh.procs import (
    QUERY,
    STRICT_2,
    create_mv,
    object_row,
    read_log,
    reap,
    spawn,
    wait_for,
    wait_lease_expired,
    write_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize(
    ("fault", "stale_attempts"),
    [("after_chunk_staged:1", ["chunk-1-a1"]), ("before_publish", [])],
    ids=["stalled-while-refreshing", "stalled-before-publish"],
)
def test_stalled_owner_is_taken_over_and_its_late_writes_rejected(
    make_client: Any, tmp_path: Path, fault: str, stale_attempts: list[str]
) -> None:
    data = tmp_path / "events"
    write_events(data, 1)
    home = tmp_path / "home"
    client = make_client(home)
    create_mv(client, data, STRICT_2)
    write_events(data, 2)

    log = tmp_path / "stalled.log"
    proc = spawn(home, None, ["refresh", "mv"], log, fault=fault, mode="stall")
    try:
        wait_for(lambda: _stopped(proc.pid) or proc.poll() is not None, 180, "the owner to stall")
        assert proc.poll() is None, read_log(log)
        row = wait_lease_expired(client)
        run_id = int(row.current_run_id)
        assert f":{proc.pid}:" in row.lease_owner  # alive, holding an expired lease
        table_dir = Path(client.runtime.iceberg.load(ObjectName.parse("mv")).location().removeprefix("file://"))
        staging = table_dir / "data" / f"run-{run_id}"
        for name in stale_attempts:
            assert (staging / name).is_dir()

        outcomes = client.recover()
        assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "resumed")]
        assert outcomes[0].run is not None and outcomes[0].run.state == "SUCCESS"
        assert object_row(client).state == "IDLE"
        assert_mv_matches(client, "mv", QUERY)
        snapshot = client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id

        os.kill(proc.pid, signal.SIGCONT)  # the stalled owner wakes up and tries to go on
        rc = reap(proc, timeout=120)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            reap(proc, timeout=30)
    output = read_log(log)
    assert rc == 1, output
    assert "LeaseLostError" in output and "lost its lease" in output, output

    # nothing the late owner did is visible: same snapshot, same run result, state IDLE
    assert client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id == snapshot
    run = next(r for r in client.runs("mv") if r.run_id == run_id)
    assert run.state == "SUCCESS"
    assert object_row(client).state == "IDLE"
    assert_mv_matches(client, "mv", QUERY)
    for name in stale_attempts:
        assert not (staging / name).exists(), "the late owner's unrecorded staging must be removed"
    with client.runtime.catalog.transaction() as s:
        progress = client.runtime.catalog.runs.chunks(s, run_id)
    recorded = {Path(f.removeprefix("file://")) for c in progress for f in c.files}
    assert recorded and all(f.is_file() for f in recorded), "published files must stay"
