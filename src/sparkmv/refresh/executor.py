"""The refresh executor: runs a plan through the lifecycle of DESIGN.md.

``IDLE -(CAS)-> REFRESHING``: plan, pin, write each chunk to staging and record it in the
progress table (only after its files are written, and only while holding the lease);
``-(CAS)-> FINISHING``: one Iceberg commit tagged with the run id publishes every chunk;
then one catalog transaction stores the version map, the run result and ``IDLE``.
A failure or cancel discards staging and returns the MV to ``IDLE`` with its previous
contents; a crash leaves the lease to expire and :mod:`sparkmv.refresh.recovery` resumes.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmv.analysis.lineage import Lineage
from sparkmv.catalog import ObjectKind, RefreshState, RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import TaskRunRow
from sparkmv.catalog.versions import VersionEntry
from sparkmv.errors import (
    InactiveError,
    LeaseLostError,
    RefreshCancelledError,
    RefreshError,
    SparkMvError,
)
from sparkmv.refresh.context import (
    MvDefinition,
    lineage_of,
    mv_partition_kind,
    mv_partitions,
    pin_for_refresh,
    retention_filter,
)
from sparkmv.refresh.monitor import RunMonitor
from sparkmv.refresh.planner import Chunk, Plan, PlanInput, RefreshRequest, base_partitions_for, plan_refresh
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.files import remove_unreferenced

log = logging.getLogger("sparkmv.refresh")

ProgressCallback = Callable[[int, int, int], None]
"""Called after each chunk with (chunks done, chunks planned, rows written)."""


@dataclass
class RunContext:
    """State of one run while this process executes it."""

    run_id: int
    mv: MvDefinition
    plan: Plan
    pinned: dict[str, PinnedTable]
    monitor: RunMonitor
    staging: Path
    job_tag: str
    mv_snapshot: int | None = None
    """The MV's Iceberg snapshot when the run was planned; an atomic publish requires it."""
    own_attempts: list[Path] = field(default_factory=list)
    """Attempt directories this process created (removed when unrecorded and the lease is lost)."""
    lineage: Lineage | None = None
    """Partition lineage, traced once per run (sqlglot lineage costs ~0.1 s)."""


def job_tag(run_id: int) -> str:
    """The Spark job tag of every job of run ``run_id`` (cancelled together)."""
    return f"sparkmv-run-{run_id}"


def chunk_job_group(run_id: int, chunk_id: int) -> str:
    """The Spark job group of one chunk of a run (``statusTracker().getJobIdsForGroup``)."""
    return f"sparkmv-run-{run_id}-chunk-{chunk_id}"


def staging_dir(table_location: str, run_id: int) -> Path:
    """Directory of the staged files of a run, inside the table's data directory."""
    return Path(table_location.removeprefix("file://")) / "data" / f"run-{run_id}"


def spark_error_text(exc: BaseException) -> str:
    """The first meaningful line of a Spark/py4j error."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip().removeprefix(": ")
        if line and not line.startswith(("JVM stacktrace", "at ", "py4j", "An error occurred while calling")):
            # Py4JJavaError: ": org.apache.spark.SparkException: [FAILED_READ_FILE...] ..."
            return re.sub(r"^(?:[\w$.]+(?:Exception|Error): )+", "", line)[:2000]
    return type(exc).__name__


class RefreshExecutor:
    """Runs refreshes of materialized views in this process."""

    def __init__(self, runtime: Runtime, progress: ProgressCallback | None = None) -> None:
        self.rt = runtime
        self.catalog = runtime.catalog
        self.progress = progress
        self._chunk_running = False

    # -- entry points ---------------------------------------------------------------------
    def refresh(
        self, name: Any, trigger: Trigger = Trigger.MANUAL, request: RefreshRequest | None = None
    ) -> RefreshRun:
        """Refresh MV ``name`` now, in this process, and return the finished run.

        Raises:
            ObjectNotFoundError: when there is no such MV.
            InactiveError: when the MV is inactive (the message gives the reason).
            BusyError: when it is not IDLE (names its state, run and owner).
            LeaseLostError: when this process stalled, its lease expired and recovery took
                the run over; nothing this process wrote afterwards was kept.
        A failure during the run does not raise: the run is returned with state FAILED.
        """
        request = request or RefreshRequest()
        with self.catalog.transaction() as s:
            row = self.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)
            if not row.is_active:
                raise InactiveError(f"MV '{name}' is inactive: {row.inactive_reason}")
            props = MvProperties.parse(row.properties or {})
            run = self.catalog.runs.create(
                s,
                row.id,
                str(name),
                trigger,
                RunState.RUNNING,
                started=utcnow(),
                attempts=1,
                owner=str(self.rt.owner),
                priority=props.task_priority,
                publish=props.publish.lower(),
                request_options={"force": request.force, "start": request.start, "end": request.end},
            )
            self.catalog.objects.begin_refresh(s, row, run.run_id, str(self.rt.owner), props.lease_timeout_seconds)
            run_id, mv = run.run_id, MvDefinition.from_row(row)
        return self._execute(run_id, mv, request, resume=False)

    def resume(self, run_id: int) -> RefreshRun:
        """Continue run ``run_id`` whose lease this process has just taken over."""
        with self.catalog.transaction() as s:
            run = self.catalog.runs.get(s, run_id)
            row = self.catalog.objects.by_id(s, run.object_id)
            mv = MvDefinition.from_row(row)
            opts = run.request_options or {}
        request = RefreshRequest(bool(opts.get("force")), opts.get("start"), opts.get("end"))
        if row.state == RefreshState.FINISHING:
            monitor = self._monitor(run_id, mv)
            try:
                return self._resume_finishing(run_id, mv)
            finally:
                monitor.stop()
        return self._execute(run_id, mv, request, resume=True)

    def _monitor(self, run_id: int, mv: MvDefinition) -> RunMonitor:
        """Start the lease heartbeat and control-command reader of a run."""
        return RunMonitor(
            self.catalog,
            mv.object_id,
            run_id,
            str(self.rt.owner),
            mv.properties.lease_renew_seconds,
            mv.properties.lease_timeout_seconds,
            on_stop=lambda: self._cancel_jobs(run_id),
            running=lambda: self._chunk_running,
        ).start()

    # -- the lifecycle ----------------------------------------------------------------------
    def _execute(self, run_id: int, mv: MvDefinition, request: RefreshRequest, resume: bool) -> RefreshRun:
        monitor = self._monitor(run_id, mv)
        ctx: RunContext | None = None
        try:
            ctx = self._load_plan(run_id, mv, monitor) if resume else self._plan(run_id, mv, request, monitor)
            if ctx is None:
                return self._run_result(run_id)
            self._run_chunks(ctx)
            self._to_finishing(ctx)
            self._publish_and_finish(ctx)
            return self._run_result(run_id)
        except LeaseLostError as exc:
            log.warning("run %s: %s", run_id, exc)
            self._discard_own(run_id, ctx)
            raise
        except RefreshCancelledError:
            self._abort(run_id, mv, RunState.CANCELLED, "cancelled", ctx)
            return self._run_result(run_id)
        except Exception as exc:
            if monitor.lease_lost:
                self._discard_own(run_id, ctx)
                raise LeaseLostError(f"run {run_id} lost its lease") from exc
            if monitor.cancelled:
                self._abort(run_id, mv, RunState.CANCELLED, "cancelled", ctx)
            else:
                msg = str(exc) if isinstance(exc, SparkMvError) else spark_error_text(exc)
                log.error("run %s failed: %s", run_id, msg)
                self._abort(run_id, mv, RunState.FAILED, msg, ctx)
            return self._run_result(run_id)
        finally:
            monitor.stop()

    def _plan(self, run_id: int, mv: MvDefinition, request: RefreshRequest, monitor: RunMonitor) -> RunContext | None:
        pinned = pin_for_refresh(self.catalog, self.rt.iceberg, mv)
        lineage = lineage_of(mv, pinned)
        with self.catalog.transaction() as s:
            versions = self.catalog.versions.load(s, mv.object_id)
            row = self.catalog.objects.by_id(s, mv.object_id)
            refreshed_before = row.last_success_run_id is not None
        plan = plan_refresh(
            PlanInput(
                partition_by=mv.partition_by,
                lineage=lineage,
                pinned=pinned,
                version_map={k: v.version for k, v in versions.items()},
                mv_partitions=mv_partitions(self.rt.iceberg, mv.name) if refreshed_before else set(),
                refreshed_before=refreshed_before,
                properties=mv.properties,
                request=request,
                partition_kind=mv_partition_kind(self.rt.iceberg, mv.name),
                retention=retention_filter(self.rt, mv),
            )
        )
        log.info("run %s of %s: mode %s (%s), %d chunks", run_id, mv.name, plan.mode, plan.reason, len(plan.chunks))
        current = self.rt.iceberg.load(mv.name).current_snapshot()
        mv_snapshot = current.snapshot_id if current is not None else None
        stored = {
            "plan": plan.to_json(),
            "pinned": {t: p.to_json() for t, p in pinned.items()},
            "mv_snapshot": mv_snapshot,
        }
        with self.catalog.transaction() as s:
            self.catalog.runs.update(
                s,
                run_id,
                plan=stored,
                mode=plan.mode,
                mode_reason=plan.reason,
                partitions_planned=len(plan.partitions),
                chunks_planned=len(plan.chunks),
            )
            if plan.mode == "SKIP":
                self._finish_catalog(s, run_id, mv, plan, pinned, RunState.SKIPPED, None, RefreshState.REFRESHING)
                return None
            self.catalog.runs.add_chunks(s, run_id, [c.partitions for c in plan.chunks])  # type: ignore[misc]
        ctx = self._context(run_id, mv, plan, pinned, monitor, mv_snapshot)
        ctx.lineage = lineage
        return ctx

    def _load_plan(self, run_id: int, mv: MvDefinition, monitor: RunMonitor) -> RunContext:
        with self.catalog.transaction() as s:
            run = self.catalog.runs.get(s, run_id)
            stored = run.plan or {}
        if "plan" not in stored:
            raise RefreshError(f"run {run_id} has no stored plan to resume")
        plan = Plan.from_json(stored["plan"])
        pinned = {t: PinnedTable.from_json(p) for t, p in stored["pinned"].items()}
        return self._context(run_id, mv, plan, pinned, monitor, stored.get("mv_snapshot"))

    def _context(
        self,
        run_id: int,
        mv: MvDefinition,
        plan: Plan,
        pinned: dict[str, PinnedTable],
        monitor: RunMonitor,
        mv_snapshot: int | None,
    ) -> RunContext:
        location = self.rt.iceberg.load(mv.name).location()
        return RunContext(
            run_id, mv, plan, pinned, monitor, staging_dir(location, run_id), job_tag(run_id), mv_snapshot
        )

    def _run_chunks(self, ctx: RunContext) -> None:
        with self.catalog.transaction() as s:
            progress = self.catalog.runs.chunks(s, ctx.run_id)
        total = len(progress)
        last_start = 0.0
        per_chunk = ctx.mv.properties.publish == "PER_CHUNK"
        for prow in progress:
            if prow.is_completed:
                if per_chunk and not prow.published:
                    # Recorded but the process died before (or while) committing it.
                    self._publish_chunk(ctx, prow.chunk_id, list(prow.files or []), ctx.plan.chunks[prow.chunk_id])
                continue
            self._between_chunks(ctx)
            throttle = self._throttle(ctx)
            if throttle > 0:
                wait = 60.0 / throttle - (time.monotonic() - last_start)
                self._sleep_checked(ctx, wait)
            last_start = time.monotonic()
            chunk = ctx.plan.chunks[prow.chunk_id]
            with self.catalog.transaction() as s:
                attempt = self.catalog.runs.start_chunk_attempt(s, ctx.run_id, prow.chunk_id)
            started = time.monotonic()
            staged = self._compute_chunk(ctx, prow.chunk_id, chunk, attempt)
            self.rt.faults.hit("after_chunk_staged", prow.chunk_id)
            self.rt.faults.hit("before_progress_recorded", prow.chunk_id)
            with self.catalog.transaction() as s:
                self.catalog.objects.require_lease(
                    s,
                    ctx.mv.object_id,
                    ctx.run_id,
                    str(self.rt.owner),
                    ctx.mv.properties.lease_timeout_seconds,
                    f"recording chunk {prow.chunk_id}",
                )
                self.catalog.runs.complete_chunk(
                    s,
                    ctx.run_id,
                    prow.chunk_id,
                    files=staged.files,
                    processed_rows=staged.rows,
                    bytes_written=staged.bytes,
                    duration_seconds=time.monotonic() - started,
                )
                done_chunks = [c for c in self.catalog.runs.chunks(s, ctx.run_id) if c.is_completed]
                self.catalog.runs.update(
                    s, ctx.run_id, partitions_done=sum(len(c.partitions or []) for c in done_chunks)
                )
            self.rt.faults.hit("after_progress_recorded", prow.chunk_id)
            if per_chunk:
                self._publish_chunk(ctx, prow.chunk_id, staged.files, chunk)
            if self.progress:
                self.progress(len(done_chunks), total, sum(c.processed_rows for c in done_chunks))

    def _between_chunks(self, ctx: RunContext) -> None:
        ctx.monitor.checkpoint()

    def _sleep_checked(self, ctx: RunContext, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.2, max(0.0, end - time.monotonic())))
            self._between_chunks(ctx)

    def _throttle(self, ctx: RunContext) -> float:
        # Read fresh: throttle_chunks_per_minute may be changed while the run is going.
        with self.catalog.transaction() as s:
            row = self.catalog.objects.by_id(s, ctx.mv.object_id)
            return float((row.properties or {}).get("throttle_chunks_per_minute", 0) or 0)

    def _compute_chunk(self, ctx: RunContext, chunk_id: int, chunk: Chunk, attempt: int) -> Any:
        from sparkmv.refresh.compute import compute_chunk

        directory = ctx.staging / f"chunk-{chunk_id}-a{attempt}"
        ctx.own_attempts.append(directory)
        sc = self.rt.spark.sparkContext
        description = f"sparkmv refresh {ctx.mv.name} run {ctx.run_id} chunk {chunk_id}"
        sc.setJobGroup(chunk_job_group(ctx.run_id, chunk_id), description, True)
        sc.addJobTag(ctx.job_tag)
        self._chunk_running = True
        try:
            # A cancel read just before the tag was set would not have reached Spark.
            if ctx.monitor.cancelled or ctx.monitor.lease_lost:
                raise RefreshCancelledError(f"run {ctx.run_id} stopped before chunk {chunk_id}")
            if ctx.lineage is None:
                ctx.lineage = lineage_of(ctx.mv, ctx.pinned)
            restrict = base_partitions_for(chunk, ctx.lineage, ctx.pinned)
            return compute_chunk(self.rt, ctx.mv, ctx.pinned, chunk, restrict, directory, f"r{ctx.run_id}c{chunk_id}")
        finally:
            self._chunk_running = False
            sc.removeJobTag(ctx.job_tag)
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _cancel_jobs(self, run_id: int) -> None:
        """Cancel every running Spark job of the run (called from the monitor thread)."""
        if self.rt.has_spark:
            self.rt.spark.sparkContext.cancelJobsWithTag(job_tag(run_id))

    def _to_finishing(self, ctx: RunContext) -> None:
        self._between_chunks(ctx)
        with self.catalog.transaction() as s:
            self.catalog.objects.transition(
                s,
                ctx.mv.object_id,
                ctx.run_id,
                str(self.rt.owner),
                RefreshState.REFRESHING,
                RefreshState.FINISHING,
                ctx.mv.properties.lease_timeout_seconds,
            )
            self.catalog.runs.update(s, ctx.run_id, state=RunState.FINISHING)

    def _publish_and_finish(self, ctx: RunContext) -> None:
        from sparkmv.refresh.publish import publish_run

        self.rt.faults.hit("before_publish")
        self._check_lease(ctx.run_id, ctx.mv, "publishing")
        snapshot_id = publish_run(self.rt, ctx.run_id, ctx.mv, ctx.plan, ctx.mv_snapshot)
        self.rt.faults.hit("after_publish")
        with self.catalog.transaction() as s:
            self._finish_catalog(
                s, ctx.run_id, ctx.mv, ctx.plan, ctx.pinned, RunState.SUCCESS, snapshot_id, RefreshState.FINISHING
            )
        self._cleanup(ctx.run_id, ctx.mv)

    def _resume_finishing(self, run_id: int, mv: MvDefinition) -> RefreshRun:
        from sparkmv.refresh.publish import publish_run

        with self.catalog.transaction() as s:
            stored = self.catalog.runs.get(s, run_id).plan or {}
        plan = Plan.from_json(stored["plan"])
        pinned = {t: PinnedTable.from_json(p) for t, p in stored["pinned"].items()}
        table = self.rt.iceberg.load(mv.name)
        snapshot_id = self.rt.iceberg.snapshot_of_run(table, run_id)
        if snapshot_id is None or (plan.chunks and mv.properties.publish == "PER_CHUNK"):
            log.info("run %s: publishing again during recovery", run_id)
            self._check_lease(run_id, mv, "publishing")
            snapshot_id = publish_run(self.rt, run_id, mv, plan, stored.get("mv_snapshot"))
        else:
            log.info("run %s: commit already landed (snapshot %s); completing the catalog", run_id, snapshot_id)
        with self.catalog.transaction() as s:
            self._finish_catalog(s, run_id, mv, plan, pinned, RunState.SUCCESS, snapshot_id, RefreshState.FINISHING)
        self._cleanup(run_id, mv)
        return self._run_result(run_id)

    def _finish_catalog(
        self,
        s: Any,
        run_id: int,
        mv: MvDefinition,
        plan: Plan,
        pinned: dict[str, PinnedTable],
        state: RunState,
        snapshot_id: int | None,
        expected: RefreshState,
    ) -> None:
        """One transaction: version map, run result, state IDLE (CAS from ``expected``)."""
        self.catalog.objects.transition(s, mv.object_id, run_id, str(self.rt.owner), expected, RefreshState.IDLE, 0)
        upserts, removals, replace_all = _version_updates(plan, pinned, s, self.catalog, mv.object_id)
        self.catalog.versions.apply(s, mv.object_id, run_id, upserts, removals, replace_all)
        now = utcnow()
        self.catalog.runs.update(
            s,
            run_id,
            state=state,
            finished=now,
            snapshot_id=snapshot_id,
            partitions_done=len(plan.partitions),
        )
        fields: dict[str, Any] = {"last_success_time": now, "consecutive_failures": 0}
        if state == RunState.SUCCESS:
            fields["last_success_run_id"] = run_id
        self.catalog.objects.set_fields(s, mv.object_id, **fields)
        self.catalog.control.clear(s, run_id)

    def _abort(self, run_id: int, mv: MvDefinition, state: RunState, error: str, ctx: RunContext | None = None) -> None:
        """Back to IDLE with the MV untouched; the run ends as ``state`` with ``error``.

        Only while this process still holds the lease: a process whose lease was taken over
        must not touch the run (recovery owns it now); it removes only its own unrecorded
        attempts and raises :class:`LeaseLostError`.
        """
        owner = str(self.rt.owner)
        with self.catalog.transaction() as s:
            row = self.catalog.objects.by_id(s, mv.object_id)
            holds = row.current_run_id == run_id and row.lease_owner == owner and row.state != RefreshState.IDLE
            if holds:
                self.catalog.objects.transition(
                    s, mv.object_id, run_id, owner, RefreshState(row.state), RefreshState.IDLE, 0
                )
                self.catalog.runs.update(s, run_id, state=state, error=error, finished=utcnow())
                self.catalog.objects.set_fields(s, mv.object_id, consecutive_failures=row.consecutive_failures + 1)
                self.catalog.control.clear(s, run_id)
        if not holds:
            self._discard_own(run_id, ctx)
            raise LeaseLostError(f"run {run_id} lost its lease; it was not marked {state}")
        if mv.properties.publish != "PER_CHUNK":
            self._remove_staging(run_id, mv)

    def _remove_staging(self, run_id: int, mv: MvDefinition) -> None:
        try:
            location = self.rt.iceberg.load(mv.name).location()
        except SparkMvError:
            return
        shutil.rmtree(staging_dir(location, run_id), ignore_errors=True)

    def _check_lease(self, run_id: int, mv: MvDefinition, what: str) -> None:
        """Renew the lease now; raise :class:`LeaseLostError` when it is no longer ours."""
        with self.catalog.transaction() as s:
            self.catalog.objects.require_lease(
                s, mv.object_id, run_id, str(self.rt.owner), mv.properties.lease_timeout_seconds, what
            )

    def _discard_own(self, run_id: int, ctx: RunContext | None) -> None:
        """Remove the attempt directories this process wrote that the progress table does
        not reference (the late writes of an owner whose lease was taken over)."""
        if ctx is None or not ctx.own_attempts:
            return
        for attempt in remove_unreferenced(ctx.own_attempts, self._recorded_files(run_id)):
            log.info("run %s: removed unrecorded attempt %s", run_id, attempt)

    def _discard_unrecorded(self, run_id: int, mv: MvDefinition) -> None:
        """Remove staged attempts of this run that the progress table does not reference."""
        try:
            root = staging_dir(self.rt.iceberg.load(mv.name).location(), run_id)
        except SparkMvError:
            return
        if root.is_dir():
            remove_unreferenced(list(root.iterdir()), self._recorded_files(run_id))

    def _recorded_files(self, run_id: int) -> set[str]:
        """Files of the chunks recorded in the progress table for ``run_id``."""
        with self.catalog.transaction() as s:
            return {f for c in self.catalog.runs.chunks(s, run_id) for f in (c.files or [])}

    def _cleanup(self, run_id: int, mv: MvDefinition) -> None:
        self.rt.faults.hit("during_cleanup")
        self._discard_unrecorded(run_id, mv)

    def _run_result(self, run_id: int) -> RefreshRun:
        with self.catalog.transaction() as s:
            return RefreshRun.from_row(self.catalog.runs.get(s, run_id))

    def _publish_chunk(self, ctx: RunContext, chunk_id: int, files: list[str], chunk: Chunk) -> None:
        from sparkmv.refresh.publish import publish_chunk

        self._check_lease(ctx.run_id, ctx.mv, f"publishing chunk {chunk_id}")
        publish_chunk(self.rt, ctx.run_id, ctx.mv, ctx.plan, chunk_id, files, chunk)
        with self.catalog.transaction() as s:
            self.catalog.runs.mark_published(s, ctx.run_id, [chunk_id])


def _version_updates(
    plan: Plan, pinned: dict[str, PinnedTable], s: Any, catalog: Any, object_id: int
) -> tuple[list[VersionEntry], list[tuple[str, str]], bool]:
    """Version map changes of a successful run, from ``plan.consumed``."""

    def entry(table: str, path: str) -> VersionEntry:
        p = pinned[table].partitions[path]
        return VersionEntry(table, path, p.version, p.changed_at)

    if plan.mode == "FULL" and all(v == ["*"] for v in plan.consumed.values()):
        return [entry(t, path) for t, p in pinned.items() for path in p.partitions], [], True
    existing = catalog.versions.load(s, object_id)
    upserts: list[VersionEntry] = []
    removals: list[tuple[str, str]] = []
    for table, paths in plan.consumed.items():
        if table not in pinned:
            continue
        if paths == ["*"]:
            removals.extend(k for k in existing if k[0] == table and k[1] not in pinned[table].partitions)
            upserts.extend(entry(table, path) for path in pinned[table].partitions)
            continue
        for path in paths:
            if path in pinned[table].partitions:
                upserts.append(entry(table, path))
            elif (table, path) in existing:
                removals.append((table, path))
    return upserts, removals, False


def run_row(rt: Runtime, run_id: int) -> TaskRunRow:
    """The catalog row of run ``run_id``."""
    with rt.catalog.transaction() as s:
        return rt.catalog.runs.get(s, run_id)
