"""Recovery of runs whose owner died: take over expired leases and resume.

For every job kind (MV refresh, table reload) through the one lifecycle
(:meth:`sparkmv.refresh.lifecycle.RunLifecycle.resume`): ``REFRESHING`` runs continue with
the chunks not yet completed (the plan and the pinned input are in the run); ``FINISHING``
runs check whether the commit tagged with the run id landed and then only complete the
catalog side, or publish again. A run beyond its job kind's attempt limit
(``max_refresh_attempts``) is abandoned: ``FAILED``, staging removed, the object ``IDLE``
with its previous contents. Finally, staged attempt directories of finished
runs that no Iceberg snapshot references (left by a process that died during cleanup, or by
an owner whose lease was taken over) are removed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sparkmv.catalog import ObjectKind, RefreshState, RunState
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh import run_events
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage import warehouse
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
    """Remove staged attempt directories of finished runs of IDLE MVs and refreshable
    tables that no snapshot of the object's tables references (never those of a live run)."""
    kinds = (ObjectKind.MATERIALIZED_VIEW, ObjectKind.REFRESHABLE_TABLE)
    with rt.catalog.read() as s:
        rows = [r for k in kinds for r in rt.catalog.objects.list(s, k) if r.state == RefreshState.IDLE]
        final = {
            r.id: {run.run_id for run in rt.catalog.runs.list(s, r.id) if RunState(run.state).is_final} for r in rows
        }
    outcomes: list[RecoveryOutcome] = []
    for row in rows:
        tables = _tables(rt, row)
        candidates = [
            (run_id, attempt)
            for data in tables.values()
            for run_dir in warehouse.list_dir(data)
            if (run_id := _run_id_of(run_dir.name)) is not None and run_id in final[row.id]
            for attempt in (e.path for e in warehouse.list_dir(run_dir.path) if e.is_dir)
        ]
        if not candidates:
            continue
        referenced = {f for name in tables for f in rt.iceberg.referenced_files(name)}
        gone = set(remove_unreferenced([a for _, a in candidates], referenced))
        for attempt in sorted(gone):
            log.info("removed orphan staging %s", attempt)
        cleaned = sorted({run_id for run_id, attempt in candidates if attempt in gone})
        display = ObjectName(row.namespace, row.name).display
        outcomes.extend(RecoveryOutcome(display, run_id, "cleaned") for run_id in cleaned)
    return outcomes


def _tables(rt: Runtime, row: ObjectRow) -> dict[ObjectName, str]:
    """The existing Iceberg tables runs of ``row`` commit to, with their data directories
    (warehouse locations)."""
    from sparkmv.refresh.reload.options import changelog_name

    name = ObjectName(row.namespace, row.name)
    names = [name, changelog_name(name)] if row.kind == ObjectKind.REFRESHABLE_TABLE else [name]
    out: dict[ObjectName, str] = {}
    for n in names:
        try:
            out[n] = warehouse.join(rt.iceberg.load(n).location(), "data")
        except SparkMvError:
            continue
    return out


def _run_id_of(directory: str) -> int | None:
    head, _, tail = directory.partition("-")
    return int(tail) if head == "run" and tail.isdigit() else None


def recover_object(rt: Runtime, row: ObjectRow) -> RecoveryOutcome:
    """Take over one object whose lease expired and continue its run through the lifecycle."""
    from sparkmv.refresh.jobs import job_for
    from sparkmv.refresh.lifecycle import RunLifecycle

    name = ObjectName(row.namespace, row.name).display
    job = job_for(rt, row)
    run_id = row.current_run_id
    with rt.catalog.transaction() as s:
        if not rt.catalog.objects.take_over(s, row, str(rt.owner), job.settings.lease_timeout_seconds):
            return RecoveryOutcome(name, run_id, "lost-race")
        if run_id is None:
            rt.catalog.objects.transition(s, row.id, 0, str(rt.owner), RefreshState(row.state), RefreshState.IDLE, 0)
            return RecoveryOutcome(name, None, "abandoned")
        run = rt.catalog.runs.get(s, run_id)
        attempts = run.attempts + 1
        rt.catalog.runs.update(s, run_id, attempts=attempts, owner=str(rt.owner))
        run_events.log_event(
            s,
            rt.catalog,
            ObjectName(row.namespace, row.name),
            run_id,
            "run_recovered",
            "WARN",
            f"run {run_id} of {name} taken over by recovery (attempt {attempts}, state {row.state})",
            attempt=attempts,
            state=str(row.state),
        )
    log.info("recovering %s run %s (attempt %d, state %s)", name, run_id, attempts, row.state)
    try:
        action, result = RunLifecycle(rt).resume(run_id, job_for)
    except SparkMvError as exc:
        log.error("recovery of %s run %s failed: %s", name, run_id, exc)
        return RecoveryOutcome(name, run_id, "failed")
    return RecoveryOutcome(name, run_id, action, result)
