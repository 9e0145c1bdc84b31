"""Prometheus metrics of the scheduler (``sparkmv scheduler --metrics-port P``).

Each :class:`SchedulerMetrics` has its own registry, so several schedulers (tests) in one
process do not collide. Exposed:

* ``sparkmv_refresh_duration_seconds{mv,mode}``: histogram of run durations (seconds);
* ``sparkmv_rows_written_total{mv}``: rows written by finished runs;
* ``sparkmv_refresh_failures_total{mv}``: failed runs;
* ``sparkmv_staleness_seconds{mv}``: now minus the oldest unconsumed base change;
* ``sparkmv_runs{state}``: runs in the catalog by state;
* ``sparkmv_runs_finished_total{state}``: runs this scheduler finished, by state;
* ``sparkmv_scheduler_tick_lag_seconds``: how late the last tick started (seconds);
* ``sparkmv_busy_skipped_total{object}``: due work skipped because the object was busy;
* ``sparkmv_expectation_rows_passed_total{dataset,expectation,action}`` and
  ``sparkmv_expectation_rows_failed_total{dataset,expectation,action}``: rows that passed
  (condition TRUE) and failed (FALSE or NULL) each expectation in the runs this scheduler
  finished, as the catalog recorded them (``sparkmv.expectations``; action ``warn``, ``drop``
  or ``fail``; dataset: its display name).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from sparkmv.catalog import ObjectKind
from sparkmv.names import ObjectName
from sparkmv.refresh.freshness import freshness
from sparkmv.refresh.properties import MvProperties

if TYPE_CHECKING:
    from sparkmv.refresh.result import RefreshRun
    from sparkmv.refresh.runtime import Runtime

log = logging.getLogger("sparkmv.scheduler")

BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, float("inf"))


class SchedulerMetrics:
    """The scheduler's metrics and, once :meth:`serve` is called, their HTTP endpoint."""

    def __init__(self, staleness_every_seconds: float = 15.0) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.duration = Histogram(
            "sparkmv_refresh_duration_seconds", "Refresh run duration", ["mv", "mode"], registry=r, buckets=BUCKETS
        )
        self.rows = Counter("sparkmv_rows_written_total", "Rows written by refresh runs", ["mv"], registry=r)
        self.failures = Counter("sparkmv_refresh_failures_total", "Failed refresh runs", ["mv"], registry=r)
        self.staleness = Gauge("sparkmv_staleness_seconds", "Staleness of each MV", ["mv"], registry=r)
        self.runs = Gauge("sparkmv_runs", "Refresh runs in the catalog by state", ["state"], registry=r)
        self.finished = Counter(
            "sparkmv_runs_finished_total", "Runs finished by this scheduler by state", ["state"], registry=r
        )
        self.tick_lag = Gauge("sparkmv_scheduler_tick_lag_seconds", "Lateness of the last tick", registry=r)
        self.busy = Counter("sparkmv_busy_skipped_total", "Due work skipped: object busy", ["object"], registry=r)
        labels = ["dataset", "expectation", "action"]
        self.expectation_passed = Counter(
            "sparkmv_expectation_rows_passed_total", "Rows that passed an expectation", labels, registry=r
        )
        self.expectation_failed = Counter(
            "sparkmv_expectation_rows_failed_total", "Rows that failed an expectation", labels, registry=r
        )
        self._staleness_every = staleness_every_seconds
        self._staleness_at = 0.0

    def serve(self, port: int) -> None:
        """Serve ``/metrics`` on ``port`` from a daemon thread.

        Raises:
            OSError: when the port cannot be bound.
        """
        start_http_server(port, registry=self.registry)
        log.info("metrics on http://0.0.0.0:%d/metrics", port)

    def observe_run(self, run: RefreshRun, rt: Runtime) -> None:
        """Record a finished run, and the rows that passed and failed each of its expectations
        (read from ``rt``'s catalog)."""
        self.finished.labels(run.state).inc()
        if run.duration_seconds is not None:
            self.duration.labels(run.name, run.mode or "NONE").observe(run.duration_seconds)
        if run.rows_written:
            self.rows.labels(run.name).inc(run.rows_written)
        if run.state == "FAILED":
            self.failures.labels(run.name).inc()
        self._observe_expectations(rt, run.run_id)

    def _observe_expectations(self, rt: Runtime, run_id: int) -> None:
        """Add run ``run_id``'s expectation results (stored when it finished) to the counters;
        a catalog that cannot be read is logged, not raised: the run is over either way."""
        try:
            with rt.catalog.read() as s:
                results = rt.catalog.expectations.list(s, run_ids=[run_id])
        except Exception as exc:
            log.warning("expectation metrics of run %s failed: %s", run_id, exc)
            return
        for r in results:
            labels = (r.dataset or "", r.expectation, r.action)
            self.expectation_passed.labels(*labels).inc(r.rows_passed)
            self.expectation_failed.labels(*labels).inc(r.rows_failed)

    def refresh_catalog_gauges(self, rt: Runtime, force: bool = False) -> None:
        """Runs by state (every call) and staleness per MV (at most every few seconds:
        it lists base tables)."""
        counts = rt.catalog.scheduling.run_counts()
        self.runs.clear()
        for state, n in counts.items():
            self.runs.labels(state.value).set(n)
        if not force and time.monotonic() - self._staleness_at < self._staleness_every:
            return
        self._staleness_at = time.monotonic()
        try:
            with rt.catalog.read() as s:
                mvs = rt.catalog.objects.list(s, ObjectKind.MATERIALIZED_VIEW)
            for mv in mvs:
                seconds = 0.0  # never refreshed: nothing consumed to be stale against (as in status)
                if mv.last_success_run_id is not None:
                    excluded = MvProperties.parse(mv.properties or {}).excluded_refresh_tables
                    fresh = freshness(rt.catalog, rt.iceberg, mv.id, mv.base_tables or [], excluded)
                    seconds = round(fresh.staleness_seconds(), 3)
                self.staleness.labels(ObjectName(mv.namespace, mv.name).display).set(seconds)
        except Exception as exc:
            log.warning("staleness metrics failed: %s", exc)
