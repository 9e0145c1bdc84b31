"""The scheduler's expectation counters after real refreshes it ran: the rows each expectation
passed and failed, summed over the runs, equal to what ``sparkmv.expectations`` recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from sparkmv.scheduler.loop import Scheduler, SchedulerConfig
from sparkmv.scheduler.metrics import SchedulerMetrics
from tests.scheduler.conftest import add_rows

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXPECT = "CONSTRAINT positive_v EXPECT (v > 0) ON VIOLATION DROP ROW, CONSTRAINT small_k EXPECT (k < 5)"


def _sample(metrics: SchedulerMetrics, kind: str, expectation: str, action: str) -> float | None:
    labels = {"dataset": "m", "expectation": expectation, "action": action}
    return metrics.registry.get_sample_value(f"sparkmv_expectation_rows_{kind}_total", labels)


def _tick(client: Any, sched: Scheduler, mode: str) -> int:
    """Queue a refresh of ``m``, let the scheduler run it (in ``mode``); its run id."""
    run = client.execute("REFRESH MATERIALIZED VIEW m WITH ASYNC MODE").run
    assert run is not None and run.state == "PENDING"
    assert sched.tick().outcome("m") == "SUCCESS"
    [newest] = client.runs("m", 1)
    assert (newest.run_id, newest.mode) == (run.run_id, mode)
    return int(run.run_id)


def test_counters_sum_the_rows_of_each_run_the_scheduler_finished(client: Any, base: Path) -> None:
    # base: d=2026-01-01 (k 1, 2; v 10, 20) and d=2026-01-02 (k 3; v 30); d=2026-01-03 added here
    add_rows(base, "2026-01-03", [4, 5], [-7, 8], "a.parquet")
    client.sql(f"CREATE EXTERNAL TABLE t USING parquet LOCATION '{base}'")
    client.sql(
        f"CREATE MATERIALIZED VIEW m ({EXPECT}) PARTITION BY d REFRESH DEFERRED "
        "PROPERTIES ('refresh_mode' = 'PCT') AS SELECT d, k, v FROM t"
    )
    metrics = SchedulerMetrics()
    sched = Scheduler(client.runtime, SchedulerConfig(), metrics)
    assert _sample(metrics, "passed", "positive_v", "drop") is None  # no run observed yet

    full = _tick(client, sched, "FULL")  # FULL over the 5 rows: v -7 fails positive_v, k 5 fails small_k
    assert (_sample(metrics, "passed", "positive_v", "drop"), _sample(metrics, "failed", "positive_v", "drop")) == (
        4.0,
        1.0,
    )
    assert (_sample(metrics, "passed", "small_k", "warn"), _sample(metrics, "failed", "small_k", "warn")) == (4.0, 1.0)

    add_rows(base, "2026-01-03", [6, 1], [None, -3], "b.parquet")  # PCT of d=2026-01-03: its 4 rows
    pct = _tick(client, sched, "PCT")  # v -7, 8, NULL, -3: 1 passes; k 4, 5, 6, 1: 2 pass
    assert (_sample(metrics, "passed", "positive_v", "drop"), _sample(metrics, "failed", "positive_v", "drop")) == (
        5.0,
        4.0,
    )
    assert (_sample(metrics, "passed", "small_k", "warn"), _sample(metrics, "failed", "small_k", "warn")) == (6.0, 3.0)

    recorded = client.sql(
        "SELECT expectation, sum(rows_passed) AS p, sum(rows_failed) AS f FROM sparkmv.expectations "
        f"WHERE run_id IN ({full}, {pct}) GROUP BY expectation ORDER BY expectation"
    ).collect()
    assert [tuple(r) for r in recorded] == [("positive_v", 5, 4), ("small_k", 6, 3)]
    text = generate_latest(metrics.registry).decode()
    assert 'sparkmv_expectation_rows_failed_total{action="drop",dataset="m",expectation="positive_v"} 4.0' in text
    assert 'sparkmv_expectation_rows_passed_total{action="warn",dataset="m",expectation="small_k"} 6.0' in text
