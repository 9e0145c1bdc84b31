"""Recovery of runs whose owner died: take over expired leases and resume.

``REFRESHING`` runs continue with the chunks not yet completed (the plan and the pinned
input are in the run); ``FINISHING`` runs check whether the commit tagged with the run id
landed and then only complete the catalog side, or publish again. A run taken over more
than ``max_refresh_attempts`` times in all is abandoned: ``FAILED``, staging removed, the
MV ``IDLE`` with its previous contents. Finally, staged attempt directories of finished
runs that no Iceberg snapshot references (left by a process that died during cleanup, or by
an owner whose lease was taken over) are removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sparkmv.catalog import ObjectKind, RefreshState, RunState
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.executor import RefreshExecutor, staging_dir
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.files import remove_unreferenced

log = logging.getLogger("sparkmv.recovery")


@dataclass(frozen=True)
class RecoveryOutcome:
    """What recovery did with one object: ``resumed``, ``abandoned``, ``failed``,
    ``lost-race``, or ``cleaned`` (orphan staging of a finished run removed)."""

    name: str
    run_id: int | None
    action: str
    run: RefreshRun | None = None


def expired_runs(rt: Runtime) -> list[ObjectRow]:
    """Objects whose lease expired (one cheap query; no Spark)."""
    with rt.catalog.transaction() as s:
        return rt.catalog.objects.expired_leases(s)


def recover(rt: Runtime, sweep: bool = True) -> list[RecoveryOutcome]:
    """Take over and resume every run whose lease expired, then (``sweep``) remove orphan
    staging of finished runs; returns what was done."""
    outcomes: list[RecoveryOutcome] = []
    for row in expired_runs(rt):
        outcomes.append(recover_object(rt, row))
    if sweep:
        outcomes.extend(sweep_orphans(rt))
    return outcomes


def sweep_orphans(rt: Runtime) -> list[RecoveryOutcome]:
    """Remove staged attempt directories of finished runs of IDLE MVs that no snapshot of
    the MV references (never those of a live run)."""
    with rt.catalog.transaction() as s:
        rows = [r for r in rt.catalog.objects.list(s, ObjectKind.MATERIALIZED_VIEW) if r.state == RefreshState.IDLE]
        final = {
            r.id: {run.run_id for run in rt.catalog.runs.list(s, r.id) if RunState(run.state).is_final} for r in rows
        }
    outcomes: list[RecoveryOutcome] = []
    for row in rows:
        name = ObjectName(row.namespace, row.name)
        try:
            data = Path(rt.iceberg.load(name).location().removeprefix("file://")) / "data"
        except SparkMvError:
            continue
        candidates = [
            (run_id, attempt)
            for run_dir in (data.iterdir() if data.is_dir() else [])
            if (run_id := _run_id_of(run_dir.name)) is not None and run_id in final[row.id]
            for attempt in run_dir.iterdir()
            if attempt.is_dir()
        ]
        if not candidates:
            continue
        gone = set(remove_unreferenced([a for _, a in candidates], rt.iceberg.referenced_files(name)))
        for attempt in sorted(gone):
            log.info("removed orphan staging %s", attempt)
        cleaned = sorted({run_id for run_id, attempt in candidates if attempt in gone})
        outcomes.extend(RecoveryOutcome(name.display, run_id, "cleaned") for run_id in cleaned)
    return outcomes


def _run_id_of(directory: str) -> int | None:
    head, _, tail = directory.partition("-")
    return int(tail) if head == "run" and tail.isdigit() else None


def recover_object(rt: Runtime, row: ObjectRow) -> RecoveryOutcome:
    """Recover one object whose lease expired."""
    name = row.name if row.namespace == "default" else f"{row.namespace}.{row.name}"
    props = MvProperties.parse(row.properties or {}) if row.kind == ObjectKind.MATERIALIZED_VIEW else MvProperties()
    run_id = row.current_run_id
    with rt.catalog.transaction() as s:
        if not rt.catalog.objects.take_over(s, row, str(rt.owner), props.lease_timeout_seconds):
            return RecoveryOutcome(name, run_id, "lost-race")
        if run_id is None:
            rt.catalog.objects.transition(s, row.id, 0, str(rt.owner), RefreshState(row.state), RefreshState.IDLE, 0)
            return RecoveryOutcome(name, None, "abandoned")
        run = rt.catalog.runs.get(s, run_id)
        attempts = run.attempts + 1
        rt.catalog.runs.update(s, run_id, attempts=attempts, owner=str(rt.owner))
    log.info("recovering %s run %s (attempt %d, state %s)", name, run_id, attempts, row.state)
    if row.kind == ObjectKind.REFRESHABLE_TABLE:
        from sparkmv.refresh.reload.executor import resume_reload

        return RecoveryOutcome(name, run_id, "resumed", resume_reload(rt, run_id, attempts))
    if attempts > props.max_refresh_attempts and not _landed(rt, row, run_id):
        abandon(rt, row, run_id, f"abandoned after {attempts - 1} attempts")
        return RecoveryOutcome(name, run_id, "abandoned")
    try:
        result = RefreshExecutor(rt).resume(run_id)
    except SparkMvError as exc:
        log.error("recovery of %s run %s failed: %s", name, run_id, exc)
        return RecoveryOutcome(name, run_id, "failed")
    return RecoveryOutcome(name, run_id, "resumed", result)


def _landed(rt: Runtime, row: ObjectRow, run_id: int) -> bool:
    """True when a FINISHING run's commit is in the table (only the catalog side is left:
    completing it is always possible, so such a run is never abandoned)."""
    if row.state != RefreshState.FINISHING:
        return False
    try:
        table = rt.iceberg.load(ObjectName(row.namespace, row.name))
    except SparkMvError:
        return False
    return rt.iceberg.snapshot_of_run(table, run_id) is not None


def abandon(rt: Runtime, row: ObjectRow, run_id: int, reason: str) -> None:
    """Mark ``run_id`` FAILED, remove its staging, return the object to IDLE.

    Staged files that a snapshot references (chunks already committed with
    ``publish = per_chunk``) are kept.
    """
    with rt.catalog.transaction() as s:
        rt.catalog.objects.transition(s, row.id, run_id, str(rt.owner), RefreshState(row.state), RefreshState.IDLE, 0)
        rt.catalog.runs.update(s, run_id, state=RunState.FAILED, error=reason, finished=utcnow())
    name = ObjectName(row.namespace, row.name)
    try:
        root = staging_dir(rt.iceberg.load(name).location(), run_id)
        if root.is_dir():
            remove_unreferenced(list(root.iterdir()), rt.iceberg.referenced_files(name))
            if not any(root.iterdir()):
                root.rmdir()
    except SparkMvError:
        pass
