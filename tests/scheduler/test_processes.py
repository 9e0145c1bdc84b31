"""Real ``sparkmv scheduler`` processes: several on one PostgreSQL catalog, and SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from tests.helpers import assert_mv_matches, rows_of
from tests.scheduler.conftest import add_rows, runs_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
TOTALS = "SELECT d, sum(v) AS total, count(*) AS n FROM t GROUP BY d"
SLOW = (
    "'partition_refresh_strategy' = 'STRICT', 'partition_refresh_number' = '1', "
    "'throttle_chunks_per_minute' = '60', 'lease_renew_seconds' = '1', 'lease_timeout_seconds' = '4'"
)


def _start(home: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        SPARKMV,
        "--home",
        str(home),
        "--catalog-url",
        url,
        "--master",
        "local[1]",
        "--conf",
        "spark.sql.shuffle.partitions=1",
        "--conf",
        "spark.ui.enabled=false",
        "scheduler",
        "--poll-seconds",
        "0.5",
    ]
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, "CI": ""})


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def _wait(what: str, cond: Callable[[], Any], timeout: float, logs: list[Path], interval: float = 0.3) -> Any:
    """Poll ``cond`` every ``interval`` seconds until it is truthy; fail after ``timeout``
    seconds showing the tails of ``logs``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    tails = "\n".join(f"--- {p}\n" + p.read_text(errors="replace")[-3000:] for p in logs if p.exists())
    raise AssertionError(f"timed out waiting for {what}\n{tails}")


def _obj(client: Any, name: str) -> Any:
    rt = client.runtime
    with rt.catalog.transaction() as s:
        return rt.catalog.objects.get(s, ObjectName.parse(name))


def _four_days(base: Path) -> None:
    for day in ("2026-01-03", "2026-01-04"):
        add_rows(base, day, [7], [70], "a.parquet")


@pytest.mark.postgres
def test_two_schedulers_share_postgres_and_take_over(
    make_client: Any, pg_url: str, base: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    home = tmp_path / "home"
    client = make_client(home=home, catalog_url=pg_url)
    _four_days(base)
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    for name in ("s1", "s2"):
        client.sql(
            f"CREATE MATERIALIZED VIEW {name} PARTITION BY d REFRESH ASYNC EVERY (INTERVAL 2 SECOND) "
            f"PROPERTIES ('lease_renew_seconds' = '1', 'lease_timeout_seconds' = '4') AS {TOTALS}"
        )
    client.sql(f"CREATE MATERIALIZED VIEW slow PARTITION BY d PROPERTIES ({SLOW}) AS {TOTALS}")
    logs = [tmp_path / "sched-a.log", tmp_path / "sched-b.log"]
    procs.extend(_start(home, pg_url, log) for log in logs)

    def scheduled_count() -> int:
        return sum(1 for n in ("s1", "s2") for r in client.runs(n) if r.trigger == "SCHEDULED")

    _wait("scheduled runs", lambda: scheduled_count() >= 6, 120, logs)

    # A long refresh: kill whichever scheduler runs it; the other takes it over.
    queued = client.execute("REFRESH MATERIALIZED VIEW slow FORCE WITH ASYNC MODE").run
    assert queued is not None
    obj = _wait("the slow run to record a chunk", lambda: _busy_with_chunk(client, queued.run_id), 90, logs)
    victim_pid = int(obj.lease_owner.split(":")[1])
    victim = next(p for p in procs if p.pid == victim_pid)
    victim.send_signal(signal.SIGKILL)
    victim.wait(30)
    survivor = next(p for p in procs if p.pid != victim_pid)
    run = _wait(
        "the survivor to finish the run",
        lambda: next((r for r in client.runs("slow") if r.run_id == queued.run_id and r.state == "SUCCESS"), None),
        90,
        logs,
    )
    rt = client.runtime
    with rt.catalog.transaction() as s:
        row = rt.catalog.runs.get(s, run.run_id)
        assert row.attempts >= 2 and f":{survivor.pid}:" in (row.owner or "")
    assert_mv_matches(client, "slow", TOTALS)
    assert survivor.poll() is None

    # Exactly one run per MV and due time, whichever scheduler claimed it.
    with rt.catalog.transaction() as s:
        dues: Counter[tuple[str, str]] = Counter()
        owners = set()
        for n in ("s1", "s2"):
            for r in rt.catalog.runs.list(s, _obj(client, n).id):
                if r.trigger == "SCHEDULED":
                    dues[(n, (r.request_options or {})["due"])] += 1
                    owners.add(r.owner)
    assert dues and max(dues.values()) == 1, dues
    assert len(dues) >= 6
    assert any(o and f":{survivor.pid}:" in o for o in owners)

    def survivor_fired_after_takeover() -> bool:
        with rt.catalog.transaction() as s:
            return any(
                r.trigger == "SCHEDULED"
                and r.finished
                and run.finished
                and r.finished > run.finished
                and f":{survivor.pid}:" in (r.owner or "")
                for r in rt.catalog.runs.list(s, _obj(client, "s1").id, limit=5)
            )

    _wait("the survivor to keep firing schedules", survivor_fired_after_takeover, 60, logs)


def _busy_with_chunk(client: Any, run_id: int) -> Any:
    obj = _obj(client, "slow")
    if obj.state != "REFRESHING" or obj.current_run_id != run_id:
        return None
    run = next((r for r in client.runs("slow") if r.run_id == run_id), None)
    return obj if run is not None and run.chunks_done >= 1 else None


def _logged_at(log: Path, message: str) -> float:
    """Seconds since the epoch of the first line of the scheduler's ``log`` holding
    ``message`` (lines start ``2026-01-01 12:00:00,123``)."""
    line = next((ln for ln in log.read_text().splitlines() if message in ln), None)
    assert line is not None, f"{message!r} not logged:\n{log.read_text()[-3000:]}"
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_sigterm_during_refresh_leaves_nothing_half_done(
    make_client: Any, base: Path, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    home = tmp_path / "home"
    client = make_client(home=home)
    _four_days(base)
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE MATERIALIZED VIEW slow PARTITION BY d PROPERTIES ({SLOW}) AS {TOTALS}")
    # Thirty seconds between the next run's chunks: the second signal lands while chunks
    # remain, so the one outcome the scheduler promises (a second signal cancels at once) is
    # the one seen; the run never waits that long, it is cancelled.
    client.sql("ALTER MATERIALIZED VIEW slow SET PROPERTIES ('throttle_chunks_per_minute' = '2')")
    before = rows_of(client.table("slow"))
    add_rows(base, "2026-01-01", [9], [90], "b.parquet")
    add_rows(base, "2026-01-04", [9], [90], "b.parquet")
    queued = client.execute("REFRESH MATERIALIZED VIEW slow FORCE WITH ASYNC MODE").run
    assert queued is not None
    log = tmp_path / "sched.log"
    proc = _start(home, client.runtime.settings.catalog_url, log)
    procs.append(proc)
    # (the scheduler starts its own JVM first: minutes on a loaded machine)
    _wait("the run to record a chunk", lambda: _busy_with_chunk(client, queued.run_id), 300, [log])
    proc.send_signal(signal.SIGTERM)
    # Two signals sent before the handler ran would reach it as one: the second is sent
    # once the scheduler logged the first (then it lets the run go on for its grace time).
    _wait("the first SIGTERM handled", lambda: "received SIGTERM: stopping" in log.read_text(), 30, [log], 0.05)
    assert _obj(client, "slow").current_run_id == queued.run_id, "the grace time lets the run go on"
    proc.send_signal(signal.SIGTERM)  # a second signal cancels the running refresh at once
    assert proc.wait(60) == 0, log.read_text()[-3000:]
    # The cancel comes from the second signal, not from the first one's grace time (30 s).
    now_at = _logged_at(log, "received SIGTERM: stopping now")
    sent_at = _logged_at(log, f"stopping: cancel sent to run {queued.run_id}")
    assert 0 <= sent_at - now_at < 10, (now_at, sent_at)

    obj = _obj(client, "slow")
    assert obj.state == "IDLE" and obj.lease_owner is None and obj.current_run_id is None
    run = next(r for r in client.runs("slow") if r.run_id == queued.run_id)
    assert (run.state, run.chunks_done) == ("CANCELLED", 1), run
    staging = Path(client.runtime.iceberg.load(ObjectName.parse("slow")).location().removeprefix("file://"))
    assert not (staging / "data" / f"run-{run.run_id}").exists()
    assert rows_of(client.table("slow")) == before  # the MV is exactly as before
    assert runs_of(client, "slow")[-1].state == "PENDING"  # the work is queued again
