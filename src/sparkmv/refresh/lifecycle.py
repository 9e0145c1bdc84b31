"""The one refresh run lifecycle of DESIGN.md, for every job kind.

``IDLE -(CAS)-> REFRESHING``: the job kind plans (the typed plan is stored in the run),
stages shared input (recorded in the plan only while holding the lease), and computes
each batch of chunks into staging; a chunk is recorded in the progress table only after
its files are written, and only while holding the lease. ``-(CAS)-> FINISHING``: the job
kind publishes with commits tagged with the run id; then one catalog transaction stores
the run result and ``IDLE``. A failure or cancel discards staging and returns the object
to ``IDLE`` with its previous contents. A process whose lease was taken over touches
neither the run nor its staging: it removes only its own unrecorded attempts and raises
:class:`~sparkmv.errors.LeaseLostError`. A crash leaves the lease to expire;
:mod:`sparkmv.refresh.recovery` takes the run over and calls :meth:`RunLifecycle.resume`,
which continues from the progress table, completes a FINISHING run, or abandons a run
beyond the job kind's attempt limit.

Fault points (:mod:`sparkmv.refresh.faults`) hit here: ``after_chunk_staged``,
``before_progress_recorded``, ``after_progress_recorded`` (with the chunk id),
``before_publish``, ``after_publish``, ``during_cleanup``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.orm import Session

from sparkmv.catalog import RefreshState, RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.expectations import ExpectationResult
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import LeaseLostError, RefreshCancelledError, RefreshError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh import run_events, timing
from sparkmv.refresh.expectations import ExpectationFailedError, summed
from sparkmv.refresh.jobs.base import ChunkOutcome, ChunkRecord, Job, RunContext
from sparkmv.refresh.monitor import RunMonitor
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.run_claims import JobType, NewRun, RunClaim, chunk_job_group, job_tag
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage import warehouse
from sparkmv.storage.files import remove_unreferenced
from sparkmv.storage.spark_log import spark_error_text

log = logging.getLogger("sparkmv.refresh")

ProgressCallback = Callable[[int, int, int], None]
"""Called after each recorded batch with (chunks done, chunks planned, rows written)."""


class RunLifecycle:
    """Runs refresh runs of any job kind in this process."""

    def __init__(self, runtime: Runtime, progress: ProgressCallback | None = None) -> None:
        self.rt = runtime
        self.catalog = runtime.catalog
        self.owner = str(runtime.owner)
        self.progress = progress
        self._chunk_running = False

    # -- entry points ---------------------------------------------------------------------
    def refresh(
        self,
        job_type: JobType,
        name: ObjectName,
        trigger: Trigger = Trigger.MANUAL,
        request: RefreshRequest | None = None,
        claim: RunClaim | None = None,
    ) -> RefreshRun | None:
        """Refresh ``name`` now, in this process, and return the finished run.

        ``claim`` (default :class:`NewRun` with ``trigger``) creates or claims the run;
        the scheduler passes one that starts a queued run. Returns None only when the
        claim found the run taken by another process.

        Raises:
            ObjectNotFoundError, InactiveError, RefreshError: from ``job_type.open``.
            BusyError: when the object is not IDLE (names its state, run and owner);
                raised before any Spark work.
            LeaseLostError: when this process stalled, its lease expired and recovery took
                the run over; nothing this process wrote afterwards was kept.
        A failure during the run does not raise: the run is returned with state FAILED.
        """
        request = request or RefreshRequest()
        claim = claim or NewRun(trigger)
        with self.catalog.transaction() as s:
            job = job_type.open(self.rt, s, name)
            run_id = claim(s, job, request, self.owner)
        if run_id is None:
            return None
        return self._execute(job, run_id, request, None)

    def resume(self, run_id: int, job_for: Callable[[Runtime, ObjectRow], Job[Any]]) -> tuple[str, RefreshRun]:
        """Continue run ``run_id`` whose lease this process has just taken over.

        Returns ``("resumed", run)`` or, beyond the job kind's attempt limit (unless the
        run's commit already landed), ``("abandoned", run)``: FAILED, staging removed,
        the object IDLE with its previous contents.

        ``job_for`` opens the run's object as its job kind (:func:`sparkmv.refresh.jobs.job_for`;
        given by the caller, so the lifecycle does not depend on the job kinds it runs).

        Raises:
            SparkMvError: when completing a FINISHING run failed (it stays to recovery).
        """
        with self.catalog.read() as s:
            run = self.catalog.runs.get(s, run_id)
            row = self.catalog.objects.by_id(s, run.object_id)
            stored, attempts, options = run.plan, run.attempts, run.request_options
        job = job_for(self.rt, row)
        state = RefreshState(row.state)
        finishing = state == RefreshState.FINISHING
        if attempts > job.settings.max_attempts and not (finishing and job.committed(run_id)):
            log.warning("run %s of %s abandoned after %d attempts", run_id, job.name, attempts - 1)
            self._abandon(job, run_id, state, f"abandoned after {attempts - 1} attempts")
            return "abandoned", self._result(run_id)
        request = RefreshRequest.from_json(options)
        if not finishing:
            return "resumed", self._execute(job, run_id, request, stored or None)
        monitor = self._monitor(job, run_id)
        try:
            job.plan_from_json(stored or {})
            self._publish_and_finish(job, self._context(job, run_id, request, monitor), recovering=True)
        finally:
            monitor.stop()
        return "resumed", self._result(run_id)

    # -- the lifecycle ----------------------------------------------------------------------
    def _execute(
        self, job: Job[Any], run_id: int, request: RefreshRequest, stored: dict[str, Any] | None
    ) -> RefreshRun:
        with timing.recording():
            return self._execute_recorded(job, run_id, request, stored)

    def _execute_recorded(
        self, job: Job[Any], run_id: int, request: RefreshRequest, stored: dict[str, Any] | None
    ) -> RefreshRun:
        monitor = self._monitor(job, run_id)
        ctx = self._context(job, run_id, request, monitor)
        try:
            if stored:
                job.plan_from_json(stored)
            elif not self._plan(job, ctx):
                return self._result(run_id)
            monitor.checkpoint()
            self._prepare(job, ctx)
            self._run_chunks(job, ctx, monitor)
            monitor.checkpoint()
            self._to_finishing(job, run_id)
            self._publish_and_finish(job, ctx, recovering=False)
            return self._result(run_id)
        except LeaseLostError as exc:
            log.warning("run %s: %s", run_id, exc)
            self._discard_own(ctx)
            raise
        except RefreshCancelledError:
            self._abort(job, ctx, RunState.CANCELLED, "cancelled")
            return self._result(run_id)
        except Exception as exc:
            if monitor.lease_lost:
                self._discard_own(ctx)
                raise LeaseLostError(f"run {run_id} lost its lease") from exc
            if monitor.cancelled:
                self._abort(job, ctx, RunState.CANCELLED, "cancelled")
            else:
                msg = str(exc) if isinstance(exc, SparkMvError) else spark_error_text(exc)
                log.info("run %s failed: %s", run_id, msg, exc_info=not isinstance(exc, SparkMvError))
                results = exc.results if isinstance(exc, ExpectationFailedError) else []
                self._abort(job, ctx, RunState.FAILED, msg, results)
            return self._result(run_id)
        finally:
            monitor.stop()

    def _monitor(self, job: Job[Any], run_id: int) -> RunMonitor:
        """Start the lease heartbeat and control-command reader of a run."""
        return RunMonitor(
            self.catalog,
            job.object_id,
            run_id,
            self.owner,
            job.settings.lease_renew_seconds,
            job.settings.lease_timeout_seconds,
            on_stop=lambda: self._cancel_jobs(run_id),
            running=lambda: self._chunk_running,
        ).start()

    def _context(self, job: Job[Any], run_id: int, request: RefreshRequest, monitor: RunMonitor) -> RunContext:
        with self.catalog.read() as s:
            attempt = self.catalog.runs.get(s, run_id).attempts

        @contextmanager
        def scope(what: str) -> Iterator[None]:
            with self._spark_scope(monitor, run_id, f"sparkmv-run-{run_id}-{what}", f"{job.name} run {run_id}: {what}"):
                yield

        return RunContext(run_id, attempt, request, lambda what: self._require_lease(job, run_id, what), scope)

    def _plan(self, job: Job[Any], ctx: RunContext) -> bool:
        """Plan and store the plan with one progress row per chunk; False when SKIPPED."""
        with timing.phase("plan"):
            plan = job.make_plan(ctx)
        log.info("run %s of %s: mode %s (%s)", ctx.run_id, job.name, plan.mode, plan.reason)
        chunks = plan.chunk_partitions()
        with timing.phase("catalog"), self.catalog.transaction() as s:
            self.catalog.objects.require_lease(
                s, job.object_id, ctx.run_id, self.owner, job.settings.lease_timeout_seconds, "recording the plan"
            )
            self.catalog.runs.update(
                s,
                ctx.run_id,
                plan=plan.to_json(),
                mode=plan.mode,
                mode_reason=plan.reason,
                candidates=plan.candidate_rows,
                estimate_bytes=plan.estimate_bytes,
                partitions_planned=plan.partitions_planned,
                chunks_planned=len(chunks),
            )
            if plan.mode == "SKIP":
                self._finish(s, job, ctx.run_id, RunState.SKIPPED, None, RefreshState.REFRESHING, [])
                return False
            run_events.planned(s, self.catalog, job.name, ctx.run_id, plan.mode, plan.reason, len(chunks))
            if not self.catalog.runs.chunks(s, ctx.run_id):
                self.catalog.runs.add_chunks(s, ctx.run_id, chunks)
        return True

    def _prepare(self, job: Job[Any], ctx: RunContext) -> None:
        """Stage the job's shared input; its plan is recorded only with the lease."""
        prepared = job.prepare(ctx)
        if prepared is None:
            return
        plan, directories = prepared
        ctx.own_attempts.extend(directories)
        with timing.phase("catalog"), self.catalog.transaction() as s:
            self.catalog.objects.require_lease(
                s, job.object_id, ctx.run_id, self.owner, job.settings.lease_timeout_seconds, "recording staged input"
            )
            self.catalog.runs.update(s, ctx.run_id, plan=plan.to_json())
        for directory in directories:  # recorded: the run's, no longer this process's own
            ctx.own_attempts.remove(directory)

    def _run_chunks(self, job: Job[Any], ctx: RunContext, monitor: RunMonitor) -> None:
        records = self._records(ctx.run_id)
        job.publish_recorded(ctx, [r for r in records if r.completed])
        last_start = 0.0
        for batch in job.batches([r for r in records if not r.completed]):
            monitor.checkpoint()
            throttle = job.throttle_per_minute()
            if throttle > 0:
                self._sleep_checked(monitor, 60.0 / throttle - (time.monotonic() - last_start))
            last_start = started = time.monotonic()
            with timing.phase("catalog"), self.catalog.transaction() as s:
                attempt = max(self.catalog.runs.start_chunk_attempt(s, ctx.run_id, c) for c in batch)
            attempt_name = f"chunk-{batch[0]}-a{attempt}"
            ctx.own_attempts.extend(warehouse.join(root, attempt_name) for root in job.staging_roots(ctx.run_id))
            what = f"{job.name} run {ctx.run_id} chunk {batch[0]}" + (f"..{batch[-1]}" if len(batch) > 1 else "")
            group = chunk_job_group(ctx.run_id, batch[0])
            with timing.phase("compute"), self._spark_scope(monitor, ctx.run_id, group, f"sparkmv {what}"):
                outcomes = job.compute(ctx, batch, attempt_name)
            for point in ("after_chunk_staged", "before_progress_recorded"):
                for chunk_id in batch:
                    self.rt.faults.hit(point, chunk_id)
            recorded = self._record(job, ctx.run_id, outcomes, (time.monotonic() - started) / len(batch))
            for chunk_id in batch:
                self.rt.faults.hit("after_progress_recorded", chunk_id)
            job.publish_recorded(ctx, [r for r in recorded if r.chunk_id in outcomes])
            if self.progress:
                done = [r for r in recorded if r.completed]
                self.progress(len(done), len(recorded), sum(r.processed_rows for r in done))

    def _record(
        self, job: Job[Any], run_id: int, outcomes: dict[int, ChunkOutcome], seconds: float
    ) -> list[ChunkRecord]:
        """Mark chunks complete in one transaction, only while holding the lease;
        ``seconds``: duration per chunk. Returns the run's progress rows."""
        with timing.phase("catalog"), self.catalog.transaction() as s:
            self.catalog.objects.require_lease(
                s,
                job.object_id,
                run_id,
                self.owner,
                job.settings.lease_timeout_seconds,
                f"recording chunk {', '.join(str(c) for c in sorted(outcomes))}",
            )
            for chunk_id, out in sorted(outcomes.items()):
                self.catalog.runs.complete_chunk(
                    s,
                    run_id,
                    chunk_id,
                    files=out.files,
                    processed_rows=out.rows,
                    bytes_written=out.bytes,
                    duration_seconds=seconds,
                    outcome=out.detail,
                )
            records = [ChunkRecord.from_row(r) for r in self.catalog.runs.chunks(s, run_id)]
            done = sum(len(r.partitions) for r in records if r.completed)
            self.catalog.runs.update(s, run_id, partitions_done=done)
        return records

    def _to_finishing(self, job: Job[Any], run_id: int) -> None:
        with timing.phase("catalog"), self.catalog.transaction() as s:
            self.catalog.objects.transition(
                s,
                job.object_id,
                run_id,
                self.owner,
                RefreshState.REFRESHING,
                RefreshState.FINISHING,
                job.settings.lease_timeout_seconds,
            )
            self.catalog.runs.update(s, run_id, state=RunState.FINISHING)

    def _publish_and_finish(self, job: Job[Any], ctx: RunContext, recovering: bool) -> None:
        """Publish (what did not land yet, when ``recovering``), then the catalog side."""
        chunks = self._records(ctx.run_id)
        self.rt.faults.hit("before_publish")
        ctx.require_lease("publishing")
        with timing.phase("commit"):
            snapshot_id = job.publish(ctx, chunks, recovering)
        self.rt.faults.hit("after_publish")
        read = None  # Spark's input metrics of the run's tagged jobs, in this process
        if self.rt.has_spark:
            from sparkmv.storage.spark import tagged_jobs

            read, times = tagged_jobs(self.rt.spark, job_tag(ctx.run_id))
            recorded = timing.current()
            if recorded is not None:
                recorded.spark_jobs = times
        with timing.phase("catalog"), self.catalog.transaction() as s:
            self._finish(s, job, ctx.run_id, RunState.SUCCESS, snapshot_id, RefreshState.FINISHING, chunks, read)
        self.rt.faults.hit("during_cleanup")
        job.cleanup(ctx.run_id, {f for c in chunks for f in c.files})

    def _finish(
        self,
        s: Session,
        job: Job[Any],
        run_id: int,
        state: RunState,
        snapshot_id: int | None,
        expected: RefreshState,
        chunks: list[ChunkRecord],
        bytes_read: int | None = None,
    ) -> None:
        """Inside one transaction: state IDLE (CAS from ``expected``), the job kind's
        catalog side, the run result (``bytes_read``: Spark's input metrics), its
        expectations' results (summed over the chunks' outcomes) and its events."""
        self.catalog.objects.transition(s, job.object_id, run_id, self.owner, expected, RefreshState.IDLE, 0)
        fields = job.finish_fields(s, run_id, chunks)
        now = utcnow()
        fields.update(_timings())
        self.catalog.runs.update(
            s, run_id, state=state, finished=now, snapshot_id=snapshot_id, bytes_read=bytes_read, **fields
        )
        done: dict[str, Any] = {"last_success_time": now, "consecutive_failures": 0}
        if state == RunState.SUCCESS:
            done["last_success_run_id"] = run_id
        self.catalog.objects.set_fields(s, job.object_id, **done)
        self.catalog.control.clear(s, run_id)
        run_events.expectations(s, self.catalog, job.name, run_id, summed([c.outcome for c in chunks]))
        run_events.ended(s, self.catalog, job.name, run_id)

    # -- failure ------------------------------------------------------------------------------
    def _abort(
        self,
        job: Job[Any],
        ctx: RunContext,
        state: RunState,
        error: str,
        results: list[ExpectationResult] | None = None,
    ) -> None:
        """Back to IDLE with the object untouched; the run ends as ``state`` with ``error``
        (``results``: the expectations' counts of the chunk a ``FAIL UPDATE`` stopped).

        Only while this process still holds the lease: a process whose lease was taken
        over must not touch the run or its staging (recovery owns them now); it removes
        only its own unrecorded attempts.

        Raises:
            LeaseLostError: the lease is no longer ours; the run was not marked.
            RefreshError: a commit of this run already landed (FINISHING): the run is
                left to recovery, which completes the publish; nothing is removed.
        """
        run_id = ctx.run_id
        with self.catalog.read() as s:
            row = self.catalog.objects.by_id(s, job.object_id)
            current = RefreshState(row.state)
            holds = row.current_run_id == run_id and row.lease_owner == self.owner and current != RefreshState.IDLE
            failures = row.consecutive_failures + 1
        if holds and current == RefreshState.FINISHING and job.committed(run_id):
            raise RefreshError(f"run {run_id} failed after committing (recovery completes it): {error}")
        try:
            if not holds:
                raise LeaseLostError(f"run {run_id} lost its lease; it was not marked {state}")
            with self.catalog.transaction() as s:
                self.catalog.objects.transition(s, job.object_id, run_id, self.owner, current, RefreshState.IDLE, 0)
                self.catalog.runs.update(s, run_id, state=state, error=error, finished=utcnow(), **_timings())
                self.catalog.objects.set_fields(s, job.object_id, consecutive_failures=failures)
                self.catalog.control.clear(s, run_id)
                run_events.expectations(s, self.catalog, job.name, run_id, results or [])
                run_events.ended(s, self.catalog, job.name, run_id)
        except LeaseLostError:
            self._discard_own(ctx)
            raise
        job.discard_staging(run_id)

    def _abandon(self, job: Job[Any], run_id: int, current: RefreshState, reason: str) -> None:
        """Recovery gives up on a run it holds the lease of: FAILED, staging removed."""
        with self.catalog.transaction() as s:
            row = self.catalog.objects.by_id(s, job.object_id)
            self.catalog.objects.transition(s, job.object_id, run_id, self.owner, current, RefreshState.IDLE, 0)
            self.catalog.runs.update(s, run_id, state=RunState.FAILED, error=reason, finished=utcnow())
            self.catalog.objects.set_fields(s, job.object_id, consecutive_failures=row.consecutive_failures + 1)
            self.catalog.control.clear(s, run_id)
            run_events.log_event(
                s,
                self.catalog,
                job.name,
                run_id,
                "run_abandoned",
                "ERROR",
                f"run {run_id} of {job.name.display} abandoned by recovery: {reason}",
                error=reason,
            )
        job.discard_staging(run_id)

    def _discard_own(self, ctx: RunContext) -> None:
        """Remove the attempt directories this process wrote that the progress table does
        not reference (the late writes of an owner whose lease was taken over)."""
        if not ctx.own_attempts:
            return
        recorded = {f for r in self._records(ctx.run_id) for f in r.files}
        for attempt in remove_unreferenced(ctx.own_attempts, recorded):
            log.info("run %s: removed unrecorded attempt %s", ctx.run_id, attempt)

    # -- helpers ------------------------------------------------------------------------------
    def _require_lease(self, job: Job[Any], run_id: int, what: str) -> None:
        with self.catalog.transaction() as s:
            self.catalog.objects.require_lease(
                s, job.object_id, run_id, self.owner, job.settings.lease_timeout_seconds, what
            )

    @contextmanager
    def _spark_scope(self, monitor: RunMonitor, run_id: int, group: str, description: str) -> Iterator[None]:
        """Spark jobs inside run under ``group`` and the run's tag (cancelled together),
        on a classic or a Spark Connect session alike (:func:`sparkmv.storage.spark.job_scope`)."""
        from sparkmv.storage.spark import job_scope

        with job_scope(self.rt.spark, job_tag(run_id), group, description):
            self._chunk_running = True
            try:
                # A cancel read just before the tag was set would not have reached Spark.
                if monitor.stopping:
                    raise RefreshCancelledError(f"run {run_id} stopped before {description}")
                yield
            finally:
                self._chunk_running = False

    def _cancel_jobs(self, run_id: int) -> None:
        """Cancel every running Spark job of the run (called from the monitor thread)."""
        if self.rt.has_spark:
            from sparkmv.storage.spark import cancel_jobs

            cancel_jobs(self.rt.spark, job_tag(run_id))

    def _sleep_checked(self, monitor: RunMonitor, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))
            monitor.checkpoint()

    def _records(self, run_id: int) -> list[ChunkRecord]:
        with self.catalog.read() as s:
            return [ChunkRecord.from_row(r) for r in self.catalog.runs.chunks(s, run_id)]

    def _result(self, run_id: int) -> RefreshRun:
        with self.catalog.read() as s:
            return RefreshRun.from_row(self.catalog.runs.get(s, run_id))


def _timings() -> dict[str, Any]:
    """``{"timings": ...}`` of the run being recorded in this thread (empty outside one)."""
    recorded = timing.current()
    return {} if recorded is None else {"timings": recorded.to_json()}
