"""REFRESH TABLE: reload the associated source and merge the differences per vnode.

Lifecycle (DESIGN.md, refresh lifecycle and refreshable tables):

1. CAS ``IDLE -> REFRESHING`` (the busy error names state and run) before any Spark work.
2. Pin the source listing and the table's current snapshot (files per vnode) in the
   run's plan; one progress row per vnode (``chunk_id = vnode``, ``partitions = [vnode]``).
3. Load the source into staging partitioned by ``_vnode``; the load is recorded in the
   plan only once fully written, so a vnode whose staging is incomplete is never merged.
4. Merge batches of vnodes (at most ``merge_batch_rows`` staged + table rows each, at
   least one vnode): new table files for changed vnodes and changelog rows; then all
   vnodes of the batch are recorded complete in one transaction (only with the lease).
5. CAS ``-> FINISHING``; commit the replaced vnodes to the table and the changelog rows to
   ``name__changelog`` (both tagged with the run id, so a resumed publish commits only
   what is missing); one catalog transaction stores the counts, ``IDLE`` and
   ``last_success_time``; the staged source is removed.

A failure or cancel before publishing leaves the table unchanged and returns to ``IDLE``.
A crash leaves the lease to expire; :func:`resume_reload` continues from the first
incomplete vnode, reusing the staged source when its load was recorded. A run taken over
a second time (``attempts > 2``) while ``REFRESHING`` is abandoned: ``FAILED``, staging
removed, table unchanged.

Fault points: ``during_load`` (staging written, load not recorded) and
``during_merge[:n]`` (batch ``n``, 0-based within one process's execution, written but
not recorded).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

from sparkmv.catalog import ObjectKind, RefreshState, RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.errors import (
    LeaseLostError,
    ObjectNotFoundError,
    RefreshCancelledError,
    RefreshError,
    SparkMvError,
)
from sparkmv.names import ObjectName
from sparkmv.refresh.executor import ProgressCallback, spark_error_text, staging_dir
from sparkmv.refresh.monitor import RunMonitor
from sparkmv.refresh.reload.options import CHANGELOG_LEAF, TableDef, changelog_name
from sparkmv.refresh.reload.source import (
    SourceFile,
    StagedLoad,
    list_source,
    listing_from_json,
    listing_to_json,
)
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, IcebergStore

log = logging.getLogger("sparkmv.reload")

MAX_ATTEMPTS = 2
"""Attempts of one run (the first plus one resume) before recovery abandons it."""


def not_refreshable_message(name: ObjectName) -> str:
    """The error text for ``REFRESH TABLE`` on a table without a FULL_RELOAD source."""
    return f"Table '{name.display}' is not refreshable: it has no associated source with refresh_mode FULL_RELOAD"


class _Run:
    """One execution of a reload run in this process."""

    def __init__(self, rt: Runtime, tdef: TableDef, run_id: int, progress: ProgressCallback | None) -> None:
        self.rt = rt
        self.catalog = rt.catalog
        self.tdef = tdef
        self.run_id = run_id
        self.owner = str(rt.owner)
        self.progress = progress
        self.lease = int(tdef.options.get("lease_timeout_seconds", 60))
        self.job_group = f"sparkmv-reload-{run_id}"
        self.monitor = RunMonitor(
            self.catalog,
            tdef.object_id,
            run_id,
            self.owner,
            int(tdef.options.get("lease_renew_seconds", 10)),
            self.lease,
            on_stop=self._cancel_jobs,
        )
        self._staging: Path | None = None

    # -- paths ---------------------------------------------------------------------------------
    @property
    def staging(self) -> Path:
        """The run's staging directory inside the table's data directory."""
        if self._staging is None:
            self._staging = staging_dir(self.rt.iceberg.load(self.tdef.name).location(), self.run_id)
        return self._staging

    @property
    def changelog_staging(self) -> Path:
        """The run's changelog staging directory, inside the changelog table's location."""
        return staging_dir(self.rt.iceberg.load(changelog_name(self.tdef.name)).location(), self.run_id)

    def _cancel_jobs(self) -> None:
        if self.rt.has_spark:
            self.rt.spark.sparkContext.cancelJobGroup(self.job_group)

    # -- the lifecycle -------------------------------------------------------------------------
    def execute(self, resume: bool) -> RefreshRun:
        """Run (or continue) the reload to its end; returns the finished run."""
        self.monitor.start()
        try:
            plan = self._stored_plan() if resume else None
            if plan is None or "listing" not in plan:
                plan = self._pin()
            if "load" not in plan:
                plan = self._load(plan)
            self._merge(plan)
            self._to_finishing()
            self._publish_and_finish(plan)
        except LeaseLostError as exc:
            log.warning("run %s: %s", self.run_id, exc)
            raise
        except RefreshCancelledError:
            self._abort(RunState.CANCELLED, "cancelled")
        except Exception as exc:
            if self.monitor.cancelled:
                self._abort(RunState.CANCELLED, "cancelled")
            elif self.monitor.lease_lost:
                raise LeaseLostError(f"run {self.run_id} lost its lease") from exc
            else:
                msg = str(exc) if isinstance(exc, SparkMvError) else spark_error_text(exc)
                log.error("run %s failed: %s", self.run_id, msg)
                self._abort(RunState.FAILED, msg)
        finally:
            self.monitor.stop()
        return run_result(self.rt, self.run_id)

    def _stored_plan(self) -> dict[str, Any] | None:
        with self.catalog.transaction() as s:
            return self.catalog.runs.get(s, self.run_id).plan

    def _pin(self) -> dict[str, Any]:
        listing = list_source(self.tdef)
        table = self.rt.iceberg.load(self.tdef.name)
        snap = table.current_snapshot()
        files: dict[str, list[str]] = {}
        rows: dict[str, int] = {}
        for f in IcebergStore.data_files(table):
            key = str(int(f.partition)) if f.partition is not None else "0"
            files.setdefault(key, []).append(f.path)
            rows[key] = rows.get(key, 0) + f.record_count
        plan: dict[str, Any] = {
            "listing": listing_to_json(listing),
            "table_snapshot": snap.snapshot_id if snap else None,
            "table_files": files,
            "table_rows": rows,
        }
        n = self.tdef.vnode_count
        with self.catalog.transaction() as s:
            self.catalog.runs.update(
                s,
                self.run_id,
                plan=plan,
                mode="FULL_RELOAD",
                mode_reason=f"reload of {len(listing)} source file(s)"
                if self.tdef.options["connector"] == "files"
                else "reload of the JDBC query",
                partitions_planned=n,
                chunks_planned=n,
            )
            if not self.catalog.runs.chunks(s, self.run_id):
                self.catalog.runs.add_chunks(s, self.run_id, [[v] for v in range(n)])
        return plan

    def _load(self, plan: dict[str, Any]) -> dict[str, Any]:
        from sparkmv.refresh.reload.source import write_load

        self._check_control()
        for old in self.staging.glob("load-a*") if self.staging.exists() else []:
            shutil.rmtree(old, ignore_errors=True)
        with self.catalog.transaction() as s:
            attempt = self.catalog.runs.get(s, self.run_id).attempts
        directory = self.staging / f"load-a{attempt}"
        listing: list[SourceFile] = listing_from_json(plan["listing"])
        load_started = time.monotonic()
        with self._job_group("load"):
            staged = write_load(self.rt.spark, self.tdef, listing, directory, self.rt.settings.jdbc_jars)
        self.rt.faults.hit("during_load")
        plan = {**plan, "load": staged.to_json()}
        with self.catalog.transaction() as s:
            self._check_lease(s, "recording the staged source")
            self.catalog.runs.update(s, self.run_id, plan=plan)
        log.info(
            "run %s: staged %d source rows in %d vnodes (%.1f s)",
            self.run_id,
            staged.rows,
            len(staged.vnodes),
            time.monotonic() - load_started,
        )
        return plan

    def _merge(self, plan: dict[str, Any]) -> None:
        from sparkmv.refresh.reload.merge import merge_batch

        staged = StagedLoad.from_json(plan["load"])
        table_files: dict[str, list[str]] = plan["table_files"]
        table_rows: dict[str, int] = plan["table_rows"]
        with self.catalog.transaction() as s:
            todo = [c.chunk_id for c in self.catalog.runs.chunks(s, self.run_id) if not c.is_completed]
        limit = int(self.tdef.options.get("merge_batch_rows", 4_000_000))
        batches: list[list[int]] = []
        empty: list[int] = []
        weight = 0
        for v in todo:
            w = staged.vnodes.get(v, ([], 0))[1] + table_rows.get(str(v), 0)
            if w == 0:
                empty.append(v)
                continue
            if batches and weight + w <= limit:
                batches[-1].append(v)
                weight += w
            else:
                batches.append([v])
                weight = w
        if empty:
            self._record({v: ([], 0, 0, {"I": 0, "U": 0, "D": 0, "changed": False, "rows": 0}) for v in empty}, 0.0)
        for ordinal, batch in enumerate(batches):
            self._check_control()
            with self.catalog.transaction() as s:
                attempt = max(self.catalog.runs.start_chunk_attempt(s, self.run_id, v) for v in batch)
            started = time.monotonic()
            directory = self.staging / f"merge-v{batch[0]}-a{attempt}"
            with self._job_group(f"merge vnodes {batch[0]}..{batch[-1]}"):
                result = merge_batch(
                    self.rt.spark,
                    self.tdef,
                    self.run_id,
                    batch,
                    [f for v in batch for f in staged.vnodes.get(v, ([], 0))[0]],
                    [f for v in batch for f in table_files.get(str(v), [])],
                    directory,
                    staged.vnodes,
                    self.changelog_staging / directory.name,
                )
            self.rt.faults.hit("during_merge", ordinal)
            records: dict[int, tuple[list[str], int, int, dict[str, Any]]] = {}
            for i, v in enumerate(batch):
                r = result.vnodes[v]
                files = list(r.files) + (result.changelog_files if i == 0 else [])
                position = {"I": r.inserted, "U": r.updated, "D": r.deleted, "changed": r.changed, "rows": r.rows}
                records[v] = (files, staged.vnodes.get(v, ([], 0))[1], _size(files), position)
            self._record(records, (time.monotonic() - started) / len(batch))

    def _record(self, records: dict[int, tuple[list[str], int, int, dict[str, Any]]], duration: float) -> None:
        """Mark vnodes complete (one transaction, lease checked); ``duration``: seconds per vnode."""
        with self.catalog.transaction() as s:
            self._check_lease(s, f"recording vnodes {sorted(records)}")
            for v, (files, rows, size, position) in sorted(records.items()):
                self.catalog.runs.complete_chunk(
                    s,
                    self.run_id,
                    v,
                    files=files,
                    processed_rows=rows,
                    bytes_written=size,
                    duration_seconds=duration,
                    position=json.dumps(position),
                )
            chunks = self.catalog.runs.chunks(s, self.run_id)
            done = [c for c in chunks if c.is_completed]
            self.catalog.runs.update(s, self.run_id, partitions_done=len(done))
        if self.progress:
            self.progress(len(done), len(chunks), sum(c.processed_rows for c in done))

    def _check_lease(self, s: Any, what: str) -> None:
        self.catalog.objects.require_lease(s, self.tdef.object_id, self.run_id, self.owner, self.lease, what)

    def _check_control(self) -> None:
        self.monitor.checkpoint()

    def _job_group(self, what: str) -> Any:
        from contextlib import contextmanager

        @contextmanager
        def group() -> Any:
            sc = self.rt.spark.sparkContext
            sc.setJobGroup(self.job_group, f"sparkmv reload {self.tdef.name} run {self.run_id}: {what}", True)
            try:
                yield
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

        return group()

    def _to_finishing(self) -> None:
        self._check_control()
        with self.catalog.transaction() as s:
            self.catalog.objects.transition(
                s,
                self.tdef.object_id,
                self.run_id,
                self.owner,
                RefreshState.REFRESHING,
                RefreshState.FINISHING,
                self.lease,
            )
            self.catalog.runs.update(s, self.run_id, state=RunState.FINISHING)

    def _publish_and_finish(self, plan: dict[str, Any]) -> None:
        """Commit what is not yet committed, then the catalog side; idempotent."""
        with self.catalog.transaction() as s:
            chunks = self.catalog.runs.chunks(s, self.run_id)
        positions = {c.chunk_id: json.loads(c.position or "{}") for c in chunks}
        changed = sorted(v for v, p in positions.items() if p.get("changed"))
        table_files = [f for c in chunks for f in (c.files or []) if f"/{CHANGELOG_LEAF}/" not in f]
        log_files = [f for c in chunks for f in (c.files or []) if f"/{CHANGELOG_LEAF}/" in f]
        self.rt.faults.hit("before_publish")
        store = self.rt.iceberg
        snapshot_id: int | None = None
        if changed:
            table = store.load(self.tdef.name)
            snapshot_id = store.snapshot_of_run(table, self.run_id)
            if snapshot_id is None:
                snapshot_id = store.publish(
                    self.tdef.name,
                    self.run_id,
                    table_files,
                    [str(v) for v in changed],
                    expected_snapshot_id=plan.get("table_snapshot"),
                )
        if log_files:
            _append_changelog(store, changelog_name(self.tdef.name), self.run_id, log_files)
        self.rt.faults.hit("after_publish")
        counts = {k: sum(int(p.get(k, 0)) for p in positions.values()) for k in ("I", "U", "D")}
        with self.catalog.transaction() as s:
            self.catalog.objects.transition(
                s, self.tdef.object_id, self.run_id, self.owner, RefreshState.FINISHING, RefreshState.IDLE, 0
            )
            now = utcnow()
            self.catalog.runs.update(
                s,
                self.run_id,
                state=RunState.SUCCESS,
                finished=now,
                snapshot_id=snapshot_id,
                rows_inserted=counts["I"],
                rows_updated=counts["U"],
                rows_deleted=counts["D"],
                partitions_done=len(chunks),
                mode_reason=_reason(counts, len(changed)),
            )
            self.catalog.objects.set_fields(
                s, self.tdef.object_id, last_success_time=now, last_success_run_id=self.run_id, consecutive_failures=0
            )
            self.catalog.control.clear(s, self.run_id)
        self._cleanup({f for c in chunks for f in (c.files or [])})

    def _cleanup(self, recorded: set[str]) -> None:
        """Remove the staged source and every attempt directory no published file is in."""
        self.rt.faults.hit("during_cleanup")
        keep = {Path(f.removeprefix("file://")) for f in recorded}
        for root in (self.staging, self.changelog_staging):
            if root.is_dir():
                _prune(root, keep)

    def _abort(self, state: RunState, error: str) -> None:
        """Back to IDLE with the table unchanged; the run ends as ``state``.

        Raises:
            RefreshError: when a commit of this run already landed (FINISHING): the run is
                left to recovery, which completes the publish; nothing is removed.
        """
        with self.catalog.transaction() as s:
            finishing = self.catalog.objects.by_id(s, self.tdef.object_id).state == RefreshState.FINISHING
        if finishing and self._committed():
            raise RefreshError(f"run {self.run_id} failed after committing (recovery completes it): {error}")
        try:
            with self.catalog.transaction() as s:
                row = self.catalog.objects.by_id(s, self.tdef.object_id)
                if row.current_run_id == self.run_id and row.lease_owner == self.owner:
                    self.catalog.objects.transition(
                        s, self.tdef.object_id, self.run_id, self.owner, RefreshState(row.state), RefreshState.IDLE, 0
                    )
                self.catalog.runs.update(s, self.run_id, state=state, error=error, finished=utcnow())
                failures = row.consecutive_failures + 1
                self.catalog.objects.set_fields(s, self.tdef.object_id, consecutive_failures=failures)
                self.catalog.control.clear(s, self.run_id)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
            shutil.rmtree(self.changelog_staging, ignore_errors=True)

    def _committed(self) -> bool:
        store = self.rt.iceberg
        return any(
            store.exists(n) and store.snapshot_of_run(store.load(n), self.run_id) is not None
            for n in (self.tdef.name, changelog_name(self.tdef.name))
        )


def _prune(root: Path, keep: set[Path]) -> None:
    """Remove everything under ``root`` except the files in ``keep`` (and their directories)."""
    for entry in root.iterdir():
        if not any(entry in p.parents for p in keep):
            shutil.rmtree(entry, ignore_errors=True)
            continue
        # a directory holding published files (e.g. staged files reused as table files):
        # remove everything else in it
        for path in sorted(entry.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_file() and path not in keep:
                path.unlink(missing_ok=True)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def _append_changelog(store: IcebergStore, name: ObjectName, run_id: int, files: list[str]) -> None:
    """Append ``files`` to the changelog table unless the run's commit already landed."""
    table = store.load(name)
    if store.snapshot_of_run(table, run_id) is not None:
        return
    with table.transaction() as tx:
        tx.add_files(files, snapshot_properties={RUN_ID_PROPERTY: str(run_id)}, check_duplicate_files=False)


def _size(files: list[str]) -> int:
    return sum(os.path.getsize(f.removeprefix("file://")) for f in files)


def _reason(counts: dict[str, int], vnodes: int) -> str:
    return f"{counts['I']} inserted, {counts['U']} updated, {counts['D']} deleted in {vnodes} vnode(s)"


def run_result(rt: Runtime, run_id: int) -> RefreshRun:
    """The run as the caller sees it."""
    with rt.catalog.transaction() as s:
        return RefreshRun.from_row(rt.catalog.runs.get(s, run_id))


def reload_table(
    rt: Runtime, name: ObjectName, trigger: Trigger = Trigger.MANUAL, progress: ProgressCallback | None = None
) -> RefreshRun:
    """``REFRESH TABLE name``: reload the source and apply the differences, in this process.

    Returns:
        The finished run: SUCCESS (``rows_inserted/updated/deleted`` recorded), FAILED
        (``error`` says why; the table is unchanged) or CANCELLED.

    Raises:
        ObjectNotFoundError: no such table.
        RefreshError: ``Table 'x' is not refreshable: it has no associated source with
            refresh_mode FULL_RELOAD``.
        BusyError: ``Table 'x' is not in idle state (current state REFRESHING, run N)``;
            raised before any Spark work.
    """
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.find(s, name)
        if row is None:
            raise ObjectNotFoundError(f"table '{name}' does not exist")
        if row.kind != ObjectKind.REFRESHABLE_TABLE:
            raise RefreshError(not_refreshable_message(name))
        tdef = TableDef.from_row(row)
        if not tdef.refreshable:
            raise RefreshError(not_refreshable_message(name))
        run = rt.catalog.runs.create(
            s,
            row.id,
            name.display,
            trigger,
            RunState.RUNNING,
            started=utcnow(),
            attempts=1,
            owner=str(rt.owner),
            mode="FULL_RELOAD",
        )
        rt.catalog.objects.begin_refresh(s, row, run.run_id, str(rt.owner), int(tdef.options["lease_timeout_seconds"]))
        run_id = run.run_id
    return _Run(rt, tdef, run_id, progress).execute(resume=False)


def resume_reload(rt: Runtime, run_id: int, attempts: int) -> RefreshRun:
    """Continue run ``run_id`` whose lease this process has just taken over (recovery).

    ``FINISHING``: commit what is missing and complete the catalog. ``REFRESHING``: resume
    from the first incomplete vnode (reloading the source only when its load was never
    recorded); when ``attempts > 2`` the run is abandoned instead: ``FAILED``, staging
    removed, the table unchanged.
    """
    with rt.catalog.transaction() as s:
        run = rt.catalog.runs.get(s, run_id)
        row = rt.catalog.objects.by_id(s, run.object_id)
        tdef = TableDef.from_row(row)
        state = row.state
    job = _Run(rt, tdef, run_id, None)
    if state == RefreshState.FINISHING:
        job.monitor.start()
        try:
            job._publish_and_finish(job._stored_plan() or {})
        finally:
            job.monitor.stop()
        return run_result(rt, run_id)
    if attempts > MAX_ATTEMPTS:
        log.warning("run %s of %s abandoned after %d interrupted attempts", run_id, tdef.name, attempts - 1)
        job._abort(RunState.FAILED, f"abandoned: refresh interrupted {attempts - 1} times")
        return run_result(rt, run_id)
    return job.execute(resume=True)
