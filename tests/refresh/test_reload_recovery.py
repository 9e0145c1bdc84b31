"""Refreshable tables: crash during load / merge, recovery, abandonment, busy."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from sparkmv.catalog.clock import utcnow
from sparkmv.errors import BusyError
from sparkmv.names import ObjectName
from tests.refresh.reload_helpers import contents, refresh, run_counts, write_csv

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHILD = """
import sys
from sparkmv.client.client import Client
c = Client(home=sys.argv[1], master="local[1]", recover=False,
           conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g"})
c.sql("REFRESH TABLE t")
"""


def _setup(client, tmp_path: Path, batch_rows: str = "4000000") -> Path:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write_csv(src, "a.csv", [(i, f"a{i}") for i in range(1, 21)])
    client.sql(
        f"CREATE TABLE t (id int, v string, PRIMARY KEY (id)) "
        f"WITH (connector = 'files', path = '{src}', format = 'csv', refresh_mode = 'FULL_RELOAD', "
        f"vnode_count = '4', lease_timeout_seconds = '2', lease_renew_seconds = '1', merge_batch_rows = '{batch_rows}')"
    )
    refresh(client, "t")
    # the next refresh: 5 updates, 5 deletes, 5 inserts
    write_csv(src, "a.csv", [(i, f"a{i}" if i > 5 else f"new{i}") for i in range(1, 16)])
    write_csv(src, "b.csv", [(i, f"b{i}") for i in range(21, 26)])
    return src


EXPECTED = sorted([(i, f"a{i}" if i > 5 else f"new{i}") for i in range(1, 16)] + [(i, f"b{i}") for i in range(21, 26)])
BEFORE = sorted((i, f"a{i}") for i in range(1, 21))


def _crash(client, fault: str, mode: str) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SPARKMV_FAULT": fault, "SPARKMV_FAULT_MODE": mode}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(client.settings.home)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == (-9 if mode == "kill" else 17), proc.stderr[-3000:]


def _state(client):  # type: ignore[no-untyped-def]
    rt = client.runtime
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, ObjectName.parse("t"))
        return row.state, row.current_run_id


def _expire(client) -> None:  # type: ignore[no-untyped-def]
    rt = client.runtime
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, ObjectName.parse("t"))
        rt.catalog.objects.set_fields(s, row.id, lease_expires=utcnow() - timedelta(seconds=1))


def test_kill_during_load_then_recover(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(client, tmp_path)
    _crash(client, "during_load", "kill")
    state, run_id = _state(client)
    assert state == "REFRESHING"
    assert contents(client, "SELECT * FROM t") == BEFORE  # nothing published
    _expire(client)
    [outcome] = client.recover()
    assert outcome.action == "resumed" and outcome.run is not None
    assert outcome.run.state == "SUCCESS", outcome.run.error
    assert contents(client, "SELECT * FROM t") == EXPECTED
    assert run_counts(client, run_id) == (5, 5, 5)
    assert _state(client) == ("IDLE", None)
    with client.runtime.catalog.transaction() as s:
        plan = client.runtime.catalog.runs.get(s, run_id).plan
    assert plan["load"]["directory"].endswith("load-a2")  # staging was incomplete: reloaded


def test_exit_during_merge_resumes_from_first_incomplete_vnode(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(client, tmp_path, batch_rows="1")
    _crash(client, "during_merge:1", "exit")
    state, run_id = _state(client)
    assert state == "REFRESHING"
    done_before = {c["chunk_id"] for c in client.chunks(run_id) if c["is_completed"]}
    assert 0 < len(done_before) < 4
    assert contents(client, "SELECT * FROM t") == BEFORE
    _expire(client)
    [outcome] = client.recover()
    assert outcome.run is not None and outcome.run.state == "SUCCESS", outcome.run
    assert contents(client, "SELECT * FROM t") == EXPECTED
    assert run_counts(client, run_id) == (5, 5, 5)
    ops = client.sql(f"SELECT op, count(*) AS n FROM t__changelog WHERE run_id = {run_id} GROUP BY op").collect()
    assert {r["op"]: r["n"] for r in ops} == {"I": 5, "U": 5, "UB": 5, "D": 5}
    chunks = {c["chunk_id"]: c for c in client.chunks(run_id)}
    assert all(c["is_completed"] for c in chunks.values())
    assert all(chunks[v]["attempts"] <= 1 for v in done_before)  # recorded vnodes were not merged again
    with client.runtime.catalog.transaction() as s:
        plan = client.runtime.catalog.runs.get(s, run_id).plan
    assert plan["load"]["directory"].endswith("load-a1")  # staging was complete: no reload


class _Die(BaseException):
    """Stands in for a process death inside this test process."""


def test_interrupted_twice_is_abandoned_and_table_unchanged(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # (real process deaths are covered above; here both deaths are simulated in-process)
    _setup(client, tmp_path, batch_rows="1")
    rt = client.runtime
    real = rt.faults

    class Dying:
        die_at = 1  # merge batch (0-based within one execution)

        def hit(self, point: str, chunk: int | None = None) -> None:
            if point == "during_merge" and chunk == self.die_at:
                raise _Die()

    dying = Dying()
    rt.faults = dying  # type: ignore[assignment]
    try:
        with pytest.raises(_Die):  # interruption 1: the refreshing process dies in the merge
            client.sql("REFRESH TABLE t")
        _, run_id = _state(client)
        _expire(client)
        dying.die_at = 0
        with pytest.raises(_Die):  # interruption 2: the recovering process dies too
            client.recover()
    finally:
        rt.faults = real
    assert _state(client)[0] == "REFRESHING"
    _expire(client)
    [outcome] = client.recover()
    assert outcome.run is not None and outcome.run.state == "FAILED"
    assert "abandoned" in (outcome.run.error or "")
    assert _state(client) == ("IDLE", None)
    assert contents(client, "SELECT * FROM t") == BEFORE
    location = rt.iceberg.load(ObjectName.parse("t")).location().removeprefix("file://")
    assert not (Path(location) / "data" / f"run-{run_id}").exists()
    assert client.sql(f"SELECT * FROM t__changelog WHERE run_id = {run_id}").count() == 0
    # the table works again afterwards
    refresh(client, "t")
    assert contents(client, "SELECT * FROM t") == EXPECTED


def test_concurrent_refresh_one_runs(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _setup(client, tmp_path)
    barrier = threading.Barrier(8)
    results: list[object] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        started = time.monotonic()
        try:
            out: object = client.execute("REFRESH TABLE t").run
        except BusyError as exc:
            out = (exc, time.monotonic() - started)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    runs = [r for r in results if not isinstance(r, tuple)]
    busy = [r for r in results if isinstance(r, tuple)]
    assert len(runs) == 1 and len(busy) == 7
    run_id = runs[0].run_id  # type: ignore[attr-defined]
    for exc, seconds in busy:
        assert str(exc) == f"Table 't' is not in idle state (current state REFRESHING, run {run_id})"
        assert seconds < 5  # failed at the CAS, before any Spark work
    assert runs[0].state == "SUCCESS"  # type: ignore[attr-defined]
    assert contents(client, "SELECT * FROM t") == EXPECTED
