"""The scheduler: ticks that find due work and refresh it in dependency order.

Each :meth:`Scheduler.tick`:

1. recovers runs whose lease expired (another scheduler, or an earlier life of this one,
   died in the middle of a refresh);
2. orders materialized views and refreshable tables upstream first (:mod:`.dag`);
3. for each object, once every upstream object of this tick is done, decides whether it is
   due: a scheduled fire passed (claimed by CAS on ``next_fire_time``; missed fires
   coalesce), a non-excluded base table changed (ASYNC without EVERY), a request or a
   retry is pending, or a refreshable table's ``refresh_interval_sec`` passed; every due
   item becomes one PENDING run (:mod:`.claims`);
4. executes the pending run; when an upstream object failed in this tick, its automatic
   downstream runs end ``UPSTREAM_FAILED`` instead of running on stale input;
5. a failed run is retried with exponential backoff up to ``max_refresh_attempts``; after
   ``max_consecutive_failures`` failed runs in a row the schedule is suspended and
   ``refresh_state_reason`` says why (``ALTER MATERIALIZED VIEW ... RESUME SCHEDULE``).

Every decision is logged on the ``sparkmv.scheduler`` logger. :meth:`Scheduler.run` loops
until SIGTERM/SIGINT: it then starts no new work, lets the running refresh finish for
``stop_grace_seconds`` and otherwise cancels it (staging discarded, the MV unchanged, the
lease released, the run queued again for the next scheduler).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta
from typing import Any

from sparkmv.catalog import ControlCommand, ObjectKind, RefreshState, RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import BusyError, LeaseLostError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.freshness import freshness
from sparkmv.refresh.pass_context import in_pass
from sparkmv.refresh.passes import pass_of
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.recovery import RecoveryOutcome, expired_runs, recover
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.scheduler import claims
from sparkmv.scheduler.dag import topological_order
from sparkmv.scheduler.due import check_due, initial_fire_time, retry_delay
from sparkmv.scheduler.metrics import SchedulerMetrics
from sparkmv.scheduler.report import FAILED_OUTCOMES, NodeResult, SchedulerConfig, TickReport, is_async, qualified
from sparkmv.scheduler.runner import run_pending
from sparkmv.scheduler.table_runner import TableReloads

__all__ = ["NodeResult", "Scheduler", "SchedulerConfig", "TickReport", "run_scheduler"]

log = logging.getLogger("sparkmv.scheduler")


class Scheduler(TableReloads):
    """Finds due work and refreshes it; :meth:`tick` is one pass, :meth:`run` the loop.

    Args:
        runtime: the process's services (catalog, Iceberg store, Spark).
        config: tuning.
        metrics: Prometheus metrics to update (optional).
    """

    def __init__(
        self, runtime: Runtime, config: SchedulerConfig | None = None, metrics: SchedulerMetrics | None = None
    ) -> None:
        self.rt = runtime
        self.config = config or SchedulerConfig()
        self.metrics = metrics
        self.stop_event = threading.Event()
        self._running: dict[int, int] = {}  # run id -> object id, runs this process executes
        self._running_lock = threading.Lock()
        self._cancelled_for_stop: set[int] = set()
        self._signals = 0

    # -- one tick ----------------------------------------------------------------------------------
    def tick(self, now: datetime | None = None) -> TickReport:
        """One pass over every object; ``now`` (naive UTC) is the time due checks use."""
        now = now or utcnow()
        report = TickReport(now)
        if self.config.recover and not self.stopping:
            report.recovered = self.recover_expired()
        with self.rt.catalog.read() as s:
            rows = [
                r
                for r in self.rt.catalog.objects.list(s)
                if r.kind in (ObjectKind.MATERIALIZED_VIEW, ObjectKind.REFRESHABLE_TABLE)
            ]
        by_name = {qualified(r): r for r in rows}
        deps = {n: [b for b in (r.base_tables or []) if b in by_name] for n, r in by_name.items()}
        order, cyclic = topological_order(deps)
        report.cyclic = cyclic
        for name in sorted(cyclic):
            log.error("%s: not scheduled: it is part of (or reads) a dependency cycle", name)
        self._walk(order, deps, by_name, report)
        if self.metrics is not None:
            try:
                self.metrics.refresh_catalog_gauges(self.rt)
            except Exception as exc:
                log.warning("metrics update failed: %s", exc)
        return report

    def _walk(
        self, order: list[str], deps: dict[str, list[str]], rows: dict[str, ObjectRow], report: TickReport
    ) -> None:
        """Process ``order`` so that each object starts after its upstream objects ended."""
        index = {n: i for i, n in enumerate(order)}
        # One pass: a change read by several due MVs is read and netted once for all.
        shared = pass_of(self.rt, [ObjectName(rows[n].namespace, rows[n].name) for n in order])

        def process(name: str) -> NodeResult:
            try:
                return in_pass(shared, self._process)(rows[name], deps[name], report)
            except Exception as exc:
                log.exception("%s: scheduler error", name)
                return NodeResult(name, "FAILED", detail=f"scheduler error: {exc}")

        if self.config.max_concurrent <= 1:
            for name in order:
                report.results[name] = process(name)
            return
        remaining = list(order)
        running: dict[Future[NodeResult], str] = {}
        with ThreadPoolExecutor(self.config.max_concurrent, thread_name_prefix="sparkmv-sched") as pool:
            while remaining or running:
                ready = [n for n in remaining if all(d in report.results for d in deps[n])]
                ready.sort(key=lambda n: (-_priority(rows[n]), index[n]))
                while ready and len(running) < self.config.max_concurrent:
                    n = ready.pop(0)
                    remaining.remove(n)
                    running[pool.submit(process, n)] = n
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    report.results[running.pop(fut)] = fut.result()

    def _process(self, seen: ObjectRow, upstream: list[str], report: TickReport) -> NodeResult:
        name = qualified(seen)
        with self.rt.catalog.read() as s:
            row = s.get(ObjectRow, seen.id)
        if row is None:
            return NodeResult(name, "IDLE", detail="dropped")
        if row.kind == ObjectKind.REFRESHABLE_TABLE:
            return self._process_table(row, report.now)
        if self.stopping:
            return NodeResult(name, "STOPPING")
        if not row.is_active:
            log.debug("%s: inactive (%s), not refreshed", name, row.inactive_reason)
            return NodeResult(name, "INACTIVE", detail=row.inactive_reason or "")
        failed_up = [u for u in upstream if (r := report.results.get(u)) is not None and r.outcome in FAILED_OUTCOMES]
        props = MvProperties.parse(row.properties or {})
        self._check_schedule(row, report.now, props)
        if failed_up:
            return self._upstream_failed(row, failed_up, report)
        if is_async(row) and row.schedule_every_seconds is None and not row.suspended:
            self._check_base_changes(row, props)
        return self._run_pending(row, report.now, props)

    # -- due checks ---------------------------------------------------------------------------------
    def _check_schedule(self, row: ObjectRow, now: datetime, props: MvProperties) -> None:
        """Queue a SCHEDULED run when the fire time passed (claimed by CAS)."""
        every = row.schedule_every_seconds
        name = ObjectName(row.namespace, row.name).display
        if not every or not is_async(row):
            return
        if row.suspended:
            log.debug("%s: schedule suspended (%s)", name, row.refresh_state_reason)
            return
        if row.next_fire_time is None:
            first = initial_fire_time(row.schedule_start, every, now)
            if self.rt.catalog.scheduling.init_fire_time(row.id, first):
                log.info("%s: schedule %s: first fire at %s", name, row.refresh_scheme, first)
            return
        fire = check_due(row.next_fire_time, every, now)
        if fire is None:
            log.debug("%s: not due until %s", name, row.next_fire_time)
            return
        opts = {"due": fire.due_time.isoformat(), "missed": fire.missed}
        queued = self.rt.catalog.scheduling.claim_fire(
            row.id, row.next_fire_time, fire.next_fire_time, fire.due_time, opts, props.task_priority
        )
        if queued is None:
            log.info("%s: fire at %s claimed by another scheduler", name, fire.due_time)
            return
        run, merged = queued.run, queued.merged
        coalesced = f" ({fire.missed} missed fires coalesced)" if fire.missed > 1 else ""
        if merged:
            log.info("%s: due at %s%s; coalesced into pending run %s", name, fire.due_time, coalesced, run.run_id)
        else:
            log.info(
                "%s: due at %s%s; queued run %s; next fire %s",
                name,
                fire.due_time,
                coalesced,
                run.run_id,
                fire.next_fire_time,
            )

    def changed_base_tables(self, row: ObjectRow, props: MvProperties) -> list[str]:
        """Base tables of ``row`` whose current partitions differ from its version map,
        leaving out ``excluded_trigger_tables`` and ``excluded_refresh_tables``."""
        excluded = set(props.excluded_trigger_tables) | set(props.excluded_refresh_tables)
        return freshness(self.rt.catalog, self.rt.iceberg, row.id, row.base_tables or [], excluded).changed_tables

    def _check_base_changes(self, row: ObjectRow, props: MvProperties) -> None:
        """Queue an ON_BASE_TABLE_CHANGE run when a non-excluded base table changed."""
        name = ObjectName(row.namespace, row.name).display
        if row.state != RefreshState.IDLE:
            log.debug("%s: %s, base changes are checked after the run", name, row.state)
            return
        if self.rt.catalog.scheduling.pending_runs(row.id):
            return
        try:
            changed = self.changed_base_tables(row, props)
        except SparkMvError as exc:
            log.warning("%s: cannot check base tables: %s", name, exc)
            return
        if not changed:
            log.debug("%s: base tables unchanged", name)
            return
        reason = "changed: " + ", ".join(changed)
        # Checked under the row lock: a run that finished meanwhile consumed the changes.
        queued = self.rt.catalog.scheduling.enqueue_on_change(row.id, row.last_run_id, props.task_priority, reason)
        if queued is None:
            log.info("%s: base changes seen while another run went on; checked again next tick", name)
            return
        how = "coalesced into" if queued.merged else "queued"
        log.info("%s: base table %s; %s run %s", name, reason, how, queued.run.run_id)

    # -- execution ----------------------------------------------------------------------------------
    def _run_pending(self, row: ObjectRow, now: datetime, props: MvProperties) -> NodeResult:
        name = qualified(row)
        display = ObjectName(row.namespace, row.name).display
        pending = self.rt.catalog.scheduling.pending_runs(row.id)
        if not pending:
            return NodeResult(name, "IDLE")
        run = pending[0]
        if row.suspended and run.trigger != Trigger.MANUAL:
            self.rt.catalog.scheduling.finish_pending(
                run.run_id, RunState.SKIPPED, f"schedule suspended: {row.refresh_state_reason}"
            )
            log.info("%s: schedule suspended; automatic run %s skipped", display, run.run_id)
            return NodeResult(name, "SUSPENDED", run.run_id)
        start_at = run.not_before
        if start_at is not None and start_at > now:
            log.info("%s: retry run %s waits until %s", display, run.run_id, start_at)
            return NodeResult(name, "WAITING", run.run_id)
        log.info("%s: starting run %s (%s)", display, run.run_id, run.trigger)
        with self._running_lock:
            self._running[run.run_id] = row.id
        try:
            result = run_pending(self.rt, run.run_id)
        except BusyError as exc:
            log.info("%s: busy, run %s stays queued: %s", display, run.run_id, exc)
            if self.metrics is not None:
                self.metrics.busy.labels(display).inc()
            return NodeResult(name, "BUSY", run.run_id, str(exc))
        except LeaseLostError as exc:
            log.warning("%s: run %s lost its lease: %s", display, run.run_id, exc)
            return NodeResult(name, "LEASE_LOST", run.run_id, str(exc))
        finally:
            with self._running_lock:
                self._running.pop(run.run_id, None)
        if result is None:
            log.info("%s: run %s was started by another scheduler", display, run.run_id)
            return NodeResult(name, "CLAIMED", run.run_id)
        if self.metrics is not None:
            self.metrics.observe_run(result, self.rt)
        log.info(
            "%s: run %s %s%s%s",
            display,
            result.run_id,
            result.state,
            f" ({result.mode}: {result.reason})" if result.mode else "",
            f": {result.error}" if result.error else "",
        )
        if result.state == RunState.FAILED:
            self._after_failure(row, run.run_id, run.trigger, dict(run.options), result, props)
        elif result.state == RunState.CANCELLED and run.run_id in self._cancelled_for_stop:
            self._requeue(row, run.trigger, dict(run.options), props, f"run {run.run_id} cancelled at shutdown")
        return NodeResult(name, result.state, result.run_id, result.error or result.reason or "")

    def _after_failure(
        self, row: ObjectRow, run_id: int, trigger: str, opts: dict[str, Any], result: RefreshRun, props: MvProperties
    ) -> None:
        """Retry with backoff, or suspend the schedule after too many failures in a row."""
        display = ObjectName(row.namespace, row.name).display
        sched = self.rt.catalog.scheduling
        with self.rt.catalog.read() as s:
            failures = self.rt.catalog.objects.by_id(s, row.id).consecutive_failures
        if failures >= props.max_consecutive_failures:
            reason = (
                f"schedule suspended after {failures} consecutive failed runs (last: run {run_id}: "
                f"{result.error}); ALTER MATERIALIZED VIEW {display} RESUME SCHEDULE resumes it"
            )
            sched.suspend_schedule(row.id, reason)
            log.error("%s: %s", display, reason)
            return
        attempt = int(opts.get("attempt", 1)) + 1
        if attempt > props.max_refresh_attempts:
            log.error("%s: run %s failed; no retry left (%d attempts)", display, run_id, attempt - 1)
            return
        delay = retry_delay(attempt, self.config.retry_backoff_seconds)
        when = utcnow() + timedelta(seconds=delay)
        new_opts = claims.with_not_before({**opts, "attempt": attempt, "retry_of": run_id}, when)
        queued = sched.enqueue_run(
            row.id, Trigger(trigger), new_opts, props.task_priority, f"retry {attempt} of run {run_id}"
        )
        if queued.merged:
            log.info("%s: run %s failed; a run is already queued (%s)", display, run_id, queued.run.run_id)
        else:
            log.info(
                "%s: run %s failed; retry %d as run %s in %.1f s", display, run_id, attempt, queued.run.run_id, delay
            )

    def _requeue(self, row: ObjectRow, trigger: str, opts: dict[str, Any], props: MvProperties, why: str) -> None:
        queued = self.rt.catalog.scheduling.enqueue_run(row.id, Trigger(trigger), opts, props.task_priority, why)
        log.info("%s: %s; queued again as run %s", ObjectName(row.namespace, row.name).display, why, queued.run.run_id)

    def _upstream_failed(self, row: ObjectRow, failed_up: list[str], report: TickReport) -> NodeResult:
        """Mark automatic runs of ``row`` UPSTREAM_FAILED instead of running them."""
        name = qualified(row)
        display = ObjectName(row.namespace, row.name).display
        ups = ", ".join(
            f"'{ObjectName.parse(u, allow_reserved=True).display}'"
            + (f" (run {report.results[u].run_id})" if report.results[u].run_id else "")
            for u in failed_up
        )
        error = f"upstream {ups} failed"
        # An on-change MV records the upstream refresh it would have followed but did not.
        on_change = is_async(row) and row.schedule_every_seconds is None and not row.suspended
        marked = self.rt.catalog.scheduling.mark_upstream_failed(row.id, error, on_change)
        if not marked:
            return NodeResult(name, "IDLE", detail=error)
        log.warning("%s: %s; run %s marked UPSTREAM_FAILED", display, error, ", ".join(map(str, marked)))
        return NodeResult(name, "UPSTREAM_FAILED", marked[0], error)

    # -- recovery, stop, loop -------------------------------------------------------------------------
    def recover_expired(self) -> list[RecoveryOutcome]:
        """Take over and resume runs whose lease expired (cheap when there are none)."""
        expired = expired_runs(self.rt)
        if not expired:
            return []
        for row in expired:
            log.warning(
                "%s: lease of run %s held by %s expired at %s; taking over",
                ObjectName(row.namespace, row.name).display,
                row.current_run_id,
                row.lease_owner,
                row.lease_expires,
            )
        with self._running_lock:
            self._running.update({r.current_run_id: r.id for r in expired if r.current_run_id is not None})
        try:
            outcomes = recover(self.rt)
        finally:
            with self._running_lock:
                for r in expired:
                    self._running.pop(r.current_run_id or 0, None)
        by_id = {r.current_run_id: r for r in expired}
        for o in outcomes:
            log.info("recovery: %s run %s %s%s", o.name, o.run_id, o.action, f": {o.run.state}" if o.run else "")
            if o.run is not None and self.metrics is not None:
                self.metrics.observe_run(o.run, self.rt)
            obj = by_id.get(o.run_id)
            if o.run is not None and o.run.state == RunState.CANCELLED and o.run_id in self._cancelled_for_stop and obj:
                if obj.kind == ObjectKind.MATERIALIZED_VIEW:
                    props = MvProperties.parse(obj.properties or {})
                    self._requeue(obj, o.run.trigger, {}, props, f"recovered run {o.run_id} cancelled at shutdown")
        return outcomes

    @property
    def stopping(self) -> bool:
        """True once a stop was requested."""
        return self.stop_event.is_set()

    def request_stop(self, cancel_now: bool = False) -> None:
        """Stop after the running work: no new runs start; running refreshes are cancelled
        after ``stop_grace_seconds`` (at once with ``cancel_now``)."""
        first = not self.stop_event.is_set()
        self.stop_event.set()
        if cancel_now or self.config.stop_grace_seconds <= 0:
            self.cancel_running()
        elif first:
            timer = threading.Timer(self.config.stop_grace_seconds, self.cancel_running)
            timer.daemon = True
            timer.start()

    def cancel_running(self) -> None:
        """Send CANCEL to every run this process executes (they stop within seconds, the
        MV unchanged, the lease released)."""
        with self._running_lock:
            running = dict(self._running)
        owner = str(self.rt.owner)
        for run_id, object_id in running.items():
            with self.rt.catalog.transaction() as s:
                row = s.get(ObjectRow, object_id)
                if row is None or row.current_run_id != run_id or row.lease_owner != owner:
                    continue  # not (or no longer) ours: never cancel another scheduler's run
                self._cancelled_for_stop.add(run_id)
                self.rt.catalog.control.send(s, object_id, run_id, ControlCommand.CANCEL)
            log.warning("stopping: cancel sent to run %s", run_id)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signals += 1
        log.warning("received %s: stopping%s", signal.Signals(signum).name, " now" if self._signals > 1 else "")
        self.request_stop(cancel_now=self._signals > 1)

    def install_signal_handlers(self) -> None:
        """Stop cleanly on SIGTERM and SIGINT (call from the main thread)."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def run(self, once: bool = False, on_tick: Callable[[TickReport], None] | None = None) -> None:
        """Tick every ``poll_seconds`` until a stop is requested (or once)."""
        log.info(
            "scheduler %s started (max %d concurrent, poll %.1f s)",
            self.rt.owner,
            self.config.max_concurrent,
            self.config.poll_seconds,
        )
        planned = time.monotonic()
        while not self.stopping:
            lag = max(0.0, time.monotonic() - planned)
            if self.metrics is not None:
                self.metrics.tick_lag.set(lag)
            report = self.tick()
            if on_tick is not None:
                on_tick(report)
            if once:
                break
            planned = max(planned + self.config.poll_seconds, time.monotonic())
            self.stop_event.wait(max(0.0, planned - time.monotonic()))
        log.info("scheduler %s stopped", self.rt.owner)


def _priority(row: ObjectRow) -> int:
    try:
        return MvProperties.parse(row.properties or {}).task_priority
    except SparkMvError:
        return 0


def run_scheduler(
    client: Any, once: bool, max_concurrent: int, poll_seconds: float, metrics_port: int | None, console: Any
) -> None:
    """Run the scheduler in the foreground (``sparkmv scheduler``).

    Starts Spark first (PySpark installs its own SIGINT handler), then installs SIGTERM
    and SIGINT handlers, serves metrics when ``metrics_port`` is given, and ticks.

    Raises:
        SparkMvError: for a non-positive ``max_concurrent`` or ``poll_seconds``.
        OSError: when the metrics port cannot be bound.
    """
    if max_concurrent < 1:
        raise SparkMvError("--max-concurrent-refreshes must be at least 1")
    if poll_seconds <= 0:
        raise SparkMvError("--poll-seconds must be positive")
    if not logging.getLogger().handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)
    rt: Runtime = client.runtime
    rt.spark  # noqa: B018 - start Spark before installing signal handlers
    metrics = SchedulerMetrics() if metrics_port is not None else None
    if metrics is not None and metrics_port is not None:
        metrics.serve(metrics_port)
    scheduler = Scheduler(rt, SchedulerConfig(max_concurrent=max_concurrent, poll_seconds=poll_seconds), metrics)
    scheduler.install_signal_handlers()
    scheduler.run(once=once)
    if console is not None:
        console.print("scheduler stopped")
