"""Crashes simulated inside the test process (cheap, no extra JVM): the executor is stopped
at a fault point by an exception no handler catches, so the run is left REFRESHING with a
lease that expires, exactly as after a process death.

- ``publish = per_chunk``: a chunk recorded but not yet committed when the crash came is
  committed by the resumed run (the MV never keeps stale partitions).
- ``max_refresh_attempts``, for both job kinds: a run that keeps crashing is abandoned:
  FAILED, staging removed, the object IDLE with its previous contents.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.refresh.faults import FaultInjector
from tests.helpers import assert_mv_matches, rows_of
from tests.refresh.kinds import KIND_IDS, KINDS, JobKindCase
from tests.refresh.procs import QUERY, STRICT_2, create_mv, object_row, wait_lease_expired, write_events

pytestmark = [pytest.mark.spark]


class SimulatedCrash(BaseException):
    """Not an Exception: no handler of the executor catches it, like a process death."""


@dataclass(frozen=True)
class CrashAt(FaultInjector):
    """Raise :class:`SimulatedCrash` at the configured point."""

    def hit(self, point: str, chunk: int | None = None) -> None:
        """Crash here when configured for ``point`` (and ``chunk``)."""
        if self.point == point and (self.chunk is None or chunk == self.chunk):
            raise SimulatedCrash(f"{point}:{chunk}")


def _setup(make_client: Any, tmp_path: Path, **props: str) -> Any:
    data = tmp_path / "events"
    write_events(data, 1)
    client = make_client(tmp_path / "home")
    create_mv(client, data, {**STRICT_2, **props})
    write_events(data, 2)
    return client


def _crash(client: Any, point: str, chunk: int | None = None) -> int:
    client.runtime.faults = CrashAt(point, chunk)
    with pytest.raises(SimulatedCrash):
        client.refresh("mv")
    row = object_row(client)
    assert row.state != "IDLE"
    return int(row.current_run_id)


def test_per_chunk_publish_resumes_a_recorded_but_uncommitted_chunk(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, publish="per_chunk")
    run_id = _crash(client, "after_progress_recorded", 1)  # chunk 0 committed, chunk 1 recorded only
    chunks = client.chunks(run_id)
    assert [c["is_completed"] for c in chunks] == [True, True, False]
    client.runtime.faults = FaultInjector()
    wait_lease_expired(client)
    outcomes = client.recover()
    assert outcomes[0].run is not None and outcomes[0].run.state == "SUCCESS", outcomes
    assert [c["attempts"] for c in client.chunks(run_id)] == [1, 1, 1]
    assert_mv_matches(client, "mv", QUERY)
    run = client.runtime.catalog.runs
    with client.runtime.catalog.transaction() as s:
        assert run.get(s, run_id).publish == "per_chunk"
        assert all(c.published for c in run.chunks(s, run_id))


@pytest.mark.parametrize("case", KINDS, ids=KIND_IDS)
def test_a_run_that_keeps_crashing_is_abandoned(make_client: Any, tmp_path: Path, case: JobKindCase) -> None:
    client, _home = case.setup(make_client, tmp_path, {"max_refresh_attempts": "2"})
    old = case.contents(client)
    client.runtime.faults = CrashAt("after_chunk_staged", 1)
    with pytest.raises(SimulatedCrash):
        case.refresh(client)
    row = object_row(client, case.name)
    assert row.state == "REFRESHING"
    run_id, failures = int(row.current_run_id), row.consecutive_failures
    wait_lease_expired(client, case.name)
    with pytest.raises(SimulatedCrash):
        client.recover()  # attempt 2 crashes at the same point
    wait_lease_expired(client, case.name)
    client.runtime.faults = FaultInjector()
    outcomes = client.recover()  # attempt 3 > max_refresh_attempts: abandoned
    assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "abandoned")]
    run = next(r for r in client.runs(case.name) if r.run_id == run_id)
    assert run.state == "FAILED" and run.error == "abandoned after 2 attempts"
    row = object_row(client, case.name)
    assert (row.state, row.consecutive_failures) == ("IDLE", failures + 1)
    assert case.contents(client) == old, "the previous contents stay"
    assert not any(root.exists() for root in case.staging_roots(client, run_id)), "staging removed"
    again = case.refresh(client)  # and the object can be refreshed again
    assert again.state == "SUCCESS", again.error
    case.assert_matches(client, again.run_id)


def test_vacuum_after_a_crash_keeps_the_live_run_and_the_current_snapshot(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, snapshot_retention_hours="0")
    first_files = _data_files(client)
    assert client.refresh("mv").state == "SUCCESS"  # every partition replaced: the first files are history
    current = rows_of(client.table("mv"))
    write_events(tmp_path / "events", 3)
    run_id = _crash(client, "after_progress_recorded", 0)  # a live run with chunk 0 staged and recorded
    with client.runtime.catalog.transaction() as s:
        progress = client.runtime.catalog.runs.chunks(s, run_id)
    staged = [Path(f.removeprefix("file://")) for c in progress for f in c.files]
    assert staged

    from sparkmv.refresh.vacuum import vacuum

    report = vacuum(client.runtime)
    assert any(line.startswith("mv: expired") for line in report), report
    assert all(f.is_file() for f in staged), "files of a live run are never deleted"
    assert not any(f.exists() for f in first_files), "files only old snapshots referenced are deleted"
    assert rows_of(client.table("mv")) == current, "the current snapshot stays readable"

    client.runtime.faults = FaultInjector()
    wait_lease_expired(client)
    assert client.recover()[0].run.state == "SUCCESS"
    assert_mv_matches(client, "mv", QUERY)


def _data_files(client: Any) -> list[Path]:
    table = client.runtime.iceberg.load(ObjectName.parse("mv"))
    return [Path(t.file.file_path.removeprefix("file://")) for t in table.scan().plan_files()]


@pytest.mark.parametrize("point", ["after_publish", "after_progress_recorded"])
def test_a_crash_is_recovered_with_one_event_per_state_change(make_client: Any, tmp_path: Path, point: str) -> None:
    """A crash after the publish (before the catalog finishes the run) or between chunks is
    completed by recovery; the event log then holds each state change of the run once."""
    client = _setup(make_client, tmp_path)
    run_id = _crash(client, point, 0 if point == "after_progress_recorded" else None)
    client.runtime.faults = FaultInjector()
    wait_lease_expired(client)
    outcomes = client.recover()
    assert outcomes[0].run is not None and outcomes[0].run.state == "SUCCESS", outcomes
    with client.runtime.catalog.read() as s:
        events = [e.event_type for e in client.runtime.catalog.events.list(s, run_id=run_id)]
    assert events == ["run_started", "run_planned", "run_recovered", "run_succeeded"], events
    assert_mv_matches(client, "mv", QUERY)
