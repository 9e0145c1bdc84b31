"""The scheduler driven tick by tick in-process (one SparkSession, SQLite catalog)."""

from __future__ import annotations

import socket
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sparkmv.catalog.clock import utcnow
from sparkmv.errors import AnalysisError
from sparkmv.scheduler.loop import Scheduler, SchedulerConfig
from sparkmv.scheduler.metrics import SchedulerMetrics
from tests.helpers import assert_mv_matches
from tests.scheduler.conftest import add_rows, runs_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOTALS = "SELECT d, sum(v) AS total, count(*) AS n FROM t GROUP BY d"


def _row(client: Any, name: str) -> Any:
    from sparkmv.names import ObjectName

    rt = client.runtime
    with rt.catalog.transaction() as s:
        return rt.catalog.objects.get(s, ObjectName.parse(name))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _scheduler(client: Any, **kw: Any) -> Scheduler:
    return Scheduler(client.runtime, SchedulerConfig(retry_backoff_seconds=0.0, **kw))


def test_scheduled_mv_fires_on_time_then_downstream(client: Any, base: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE MATERIALIZED VIEW up PARTITION BY d REFRESH ASYNC EVERY (INTERVAL 2 SECOND) AS {TOTALS}")
    client.sql("CREATE MATERIALIZED VIEW down REFRESH ASYNC AS SELECT sum(total) AS grand FROM up")
    first = _row(client, "up").next_fire_time
    created = _row(client, "up").created_at
    assert first is not None and timedelta(seconds=1.5) <= first - created <= timedelta(seconds=2.5)
    tasks = {r.mv_name: r for r in client.sql("SELECT * FROM sparkmv.tasks").collect()}
    assert tasks["up"].next_fire_time == first and tasks["up"].schedule.endswith("EVERY (INTERVAL 2 SECOND)")

    sched = _scheduler(client, max_concurrent=2)  # DAG order holds with parallel workers too
    add_rows(base, "2026-01-02", [4], [40], "b.parquet")
    early = sched.tick(first - timedelta(milliseconds=300))
    assert early.outcome("up") == "IDLE"  # not before its time
    report = sched.tick(first + timedelta(milliseconds=100))
    assert report.outcome("up") == "SUCCESS" and report.outcome("down") == "SUCCESS"
    up_run, down_run = runs_of(client, "up")[-1], runs_of(client, "down")[-1]
    assert up_run.trigger == "SCHEDULED" and down_run.trigger == "ON_BASE_TABLE_CHANGE"
    assert up_run.finished <= down_run.started
    assert_mv_matches(client, "up", TOTALS)
    assert_mv_matches(client, "down", "SELECT sum(v) AS grand FROM t")
    row = _row(client, "up")
    assert row.last_fire_time == first and row.next_fire_time == first + timedelta(seconds=2)

    # The same due time is never claimed twice; the next one fires exactly 2 s later.
    assert sched.tick(first + timedelta(seconds=1)).outcome("up") == "IDLE"
    again = sched.tick(first + timedelta(seconds=2, milliseconds=50))
    assert again.outcome("up") == "SKIPPED" and again.outcome("down") == "IDLE"
    assert [r.trigger for r in runs_of(client, "up")].count("SCHEDULED") == 2

    # Missed fires while no scheduler ran coalesce into one run.
    late = first + timedelta(seconds=2 + 21.5)
    assert sched.tick(late).outcome("up") == "SKIPPED"
    scheduled = [r for r in runs_of(client, "up") if r.trigger == "SCHEDULED"]
    assert len(scheduled) == 3
    row = _row(client, "up")
    assert row.next_fire_time == first + timedelta(seconds=24)
    assert row.last_fire_time == first + timedelta(seconds=22)


def test_on_change_and_excluded_trigger_table(client: Any, base: Path, tmp_path: Path) -> None:
    dim = tmp_path / "data" / "dim"
    add_rows(dim, "2026-01-01", [1, 2, 3, 4], [100, 200, 300, 400], "a.parquet")
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE EXTERNAL TABLE dim USING parquet LOCATION '{dim}'")
    query = "SELECT t.d AS d, sum(t.v + dim.v) AS s FROM t JOIN dim ON t.k = dim.k GROUP BY t.d"
    client.sql(
        "CREATE MATERIALIZED VIEW j PARTITION BY d REFRESH ASYNC "
        f"PROPERTIES ('excluded_trigger_tables' = 'dim') AS {query}"
    )
    sched = _scheduler(client)
    assert sched.tick().outcome("j") == "IDLE"  # nothing changed: no run
    assert len(runs_of(client, "j")) == 1

    add_rows(dim, "2026-01-01", [4], [1], "b.parquet")  # excluded: does not trigger
    assert sched.tick().outcome("j") == "IDLE"
    assert len(runs_of(client, "j")) == 1

    add_rows(base, "2026-01-03", [4], [40], "a.parquet")  # an outside writer adds a file
    report = sched.tick()
    assert report.outcome("j") == "SUCCESS"
    last = runs_of(client, "j")[-1]
    assert last.trigger == "ON_BASE_TABLE_CHANGE"
    assert_mv_matches(client, "j", query)  # picked up the excluded table's change too
    assert sched.tick().outcome("j") == "IDLE"


def test_async_requests_merge_and_run_once(client: Any, base: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE MATERIALIZED VIEW m PARTITION BY d AS {TOTALS}")
    first = client.execute("REFRESH MATERIALIZED VIEW m FORCE WITH ASYNC MODE").run
    second = client.execute("REFRESH MATERIALIZED VIEW m WITH ASYNC MODE").run
    assert first is not None and second is not None
    assert first.state == "PENDING" and second.state == "MERGED"
    assert str(first.run_id) in (second.reason or "")
    tasks = {r.mv_name: r for r in client.sql("SELECT * FROM sparkmv.tasks").collect()}
    assert tasks["m"].pending_requests == 1
    metrics = SchedulerMetrics()
    port = _free_port()
    metrics.serve(port)
    sched = Scheduler(client.runtime, SchedulerConfig(), metrics)
    report = sched.tick()
    assert report.outcome("m") == "SUCCESS" and report.results["default.m"].run_id == first.run_id
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'sparkmv_refresh_duration_seconds_count{mode="PCT",mv="m"} 1.0' in text
    assert 'sparkmv_runs{state="MERGED"} 1.0' in text
    assert 'sparkmv_staleness_seconds{mv="m"} 0.0' in text
    assert "sparkmv_rows_written_total" in text and "sparkmv_scheduler_tick_lag_seconds" in text
    states = [r.state for r in runs_of(client, "m")]
    assert states == ["SUCCESS", "SUCCESS", "MERGED"]  # build, the forced request, the merged one
    assert _scheduler(client).tick().outcome("m") == "IDLE"


def test_chain_refreshes_in_order_and_stops_at_failed_link(client: Any, base: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE MATERIALIZED VIEW a PARTITION BY d REFRESH ASYNC AS {TOTALS}")
    client.sql(
        "CREATE MATERIALIZED VIEW b PARTITION BY d REFRESH ASYNC "
        "PROPERTIES ('max_consecutive_failures' = '2', 'max_refresh_attempts' = '5') AS "
        "SELECT d, CASE WHEN total > 1000 THEN raise_error('total too big') ELSE total END AS total FROM a"
    )
    client.sql("CREATE MATERIALIZED VIEW c REFRESH ASYNC AS SELECT sum(total) AS grand FROM b")
    sched = _scheduler(client)
    add_rows(base, "2026-01-02", [5], [50], "b.parquet")
    report = sched.tick()
    assert [report.outcome(n) for n in "abc"] == ["SUCCESS", "SUCCESS", "SUCCESS"]
    started = [runs_of(client, n)[-1].started for n in "abc"]
    finished = [runs_of(client, n)[-1].finished for n in "abc"]
    assert finished[0] <= started[1] and finished[1] <= started[2]
    assert_mv_matches(client, "c", "SELECT sum(v) AS grand FROM t")

    add_rows(base, "2026-01-02", [6], [5000], "c.parquet")  # makes b fail
    report = sched.tick()
    assert [report.outcome(n) for n in "abc"] == ["SUCCESS", "FAILED", "UPSTREAM_FAILED"]
    assert runs_of(client, "c")[-1].state == "UPSTREAM_FAILED"
    assert "upstream 'b'" in (runs_of(client, "c")[-1].error or "")
    # A retry was queued with backoff; the second failure in a row suspends b's schedule.
    report = sched.tick(utcnow() + timedelta(seconds=1))
    assert report.outcome("b") == "FAILED" and report.outcome("c") == "UPSTREAM_FAILED"
    row = _row(client, "b")
    assert row.suspended and "2 consecutive failed runs" in (row.refresh_state_reason or "")
    mv = {r.name: r for r in client.sql("SELECT * FROM sparkmv.materialized_views").collect()}
    assert "RESUME SCHEDULE" in mv["b"].refresh_state_reason
    tasks = {r.mv_name: r for r in client.sql("SELECT * FROM sparkmv.tasks").collect()}
    assert tasks["b"].suspended and tasks["b"].consecutive_failures == 2
    # Suspended: the failed run queued no retry, and no base change queues one.
    runs_before = [r.run_id for r in runs_of(client, "b")]
    assert sched.tick().outcome("b") == "IDLE"
    assert [r.run_id for r in runs_of(client, "b")] == runs_before

    client.sql("ALTER MATERIALIZED VIEW b RESUME SCHEDULE")
    assert not _row(client, "b").suspended


def test_cycle_rejected_at_create(client: Any, base: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(f"CREATE MATERIALIZED VIEW a REFRESH DEFERRED AS {TOTALS}")
    client.sql("CREATE MATERIALIZED VIEW b REFRESH DEFERRED AS SELECT d, total FROM a")
    client.sql("DROP MATERIALIZED VIEW a")
    with pytest.raises(AnalysisError, match="cycle: a -> b -> a"):
        client.sql("CREATE MATERIALIZED VIEW a REFRESH DEFERRED AS SELECT d, total FROM b")
