"""Executing a queued (PENDING) reload of a refreshable table in this process.

``REFRESH TABLE name WITH ASYNC MODE`` queues a PENDING run
(:func:`sparkmv.scheduler.requests.enqueue_table`); the scheduler executes that same run:
:func:`sparkmv.catalog.scheduling.start_pending` moves it to RUNNING and takes the table's
lease in one transaction, then the reload lifecycle runs it exactly as ``REFRESH TABLE`` would.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from sparkmv.catalog import RefreshState, Trigger
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import BusyError, LeaseLostError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.scheduler.metrics import SchedulerMetrics
from sparkmv.scheduler.report import NodeResult, qualified
from sparkmv.scheduler.runner import run_pending

log = logging.getLogger("sparkmv.scheduler")


class TableReloads:
    """The refreshable-table part of :class:`sparkmv.scheduler.loop.Scheduler`: queued
    reloads and ``refresh_interval_sec``."""

    rt: Runtime
    metrics: SchedulerMetrics | None
    _running: dict[int, int]
    _running_lock: threading.Lock
    stop_event: threading.Event

    def _process_table(self, row: ObjectRow, now: datetime) -> NodeResult:
        """Execute a queued reload (``REFRESH TABLE ... WITH ASYNC MODE``) of a refreshable
        table, or reload it when its ``refresh_interval_sec`` passed."""
        from sparkmv.refresh.run_now import reload_table

        name = qualified(row)
        display = ObjectName(row.namespace, row.name).display
        if self.stop_event.is_set():
            return NodeResult(name, "IDLE")
        pending = self.rt.catalog.scheduling.pending_runs(row.id)
        if pending:
            run_id = pending[0].run_id
            log.info("%s: starting queued reload run %s (%s)", display, run_id, pending[0].trigger)
            return self._reload(row, lambda: run_pending(self.rt, run_id), run_id)
        raw = (row.options or {}).get("refresh_interval_sec")
        if not raw:
            return NodeResult(name, "IDLE")
        interval = float(raw)
        if row.last_trigger_time is not None and row.last_trigger_time + timedelta(seconds=interval) > now:
            return NodeResult(name, "IDLE")
        if row.state != RefreshState.IDLE:
            log.info("%s: reload due but busy (%s, run %s); skipped", display, row.state, row.current_run_id)
            if self.metrics is not None:
                self.metrics.busy.labels(display).inc()
            return NodeResult(name, "BUSY", row.current_run_id)
        if not self.rt.catalog.scheduling.claim_reload(row.id, row.last_trigger_time):
            log.info("%s: reload claimed by another scheduler", display)
            return NodeResult(name, "CLAIMED")
        log.info("%s: refresh_interval_sec %s passed; reloading", display, raw)
        return self._reload(row, lambda: reload_table(self.rt, ObjectName(row.namespace, row.name), Trigger.SCHEDULED))

    def _reload(
        self, row: ObjectRow, execute: Callable[[], RefreshRun | None], run_id: int | None = None
    ) -> NodeResult:
        """Run one reload of a refreshable table and report its outcome."""
        name = qualified(row)
        display = ObjectName(row.namespace, row.name).display
        if run_id is not None:
            with self._running_lock:
                self._running[run_id] = row.id
        try:
            result = execute()
        except BusyError as exc:
            log.info("%s: busy, reload skipped: %s", display, exc)
            if self.metrics is not None:
                self.metrics.busy.labels(display).inc()
            return NodeResult(name, "BUSY", run_id, str(exc))
        except LeaseLostError as exc:
            log.warning("%s: reload run %s lost its lease: %s", display, run_id, exc)
            return NodeResult(name, "LEASE_LOST", run_id, str(exc))
        except SparkMvError as exc:
            log.error("%s: reload failed: %s", display, exc)
            return NodeResult(name, "FAILED", run_id, str(exc))
        finally:
            if run_id is not None:
                with self._running_lock:
                    self._running.pop(run_id, None)
        if result is None:
            log.info("%s: reload run %s was started by another scheduler", display, run_id)
            return NodeResult(name, "CLAIMED", run_id)
        if self.metrics is not None:
            self.metrics.observe_run(result, self.rt)
        log.info(
            "%s: reload run %s %s%s", display, result.run_id, result.state, f": {result.error}" if result.error else ""
        )
        return NodeResult(name, result.state, result.run_id, result.error or result.reason or "")
