"""Recovery of runs whose owner died: take over expired leases and resume.

``REFRESHING`` runs continue with the chunks not yet completed (the plan and the pinned
input are in the run); ``FINISHING`` runs check whether the commit tagged with the run id
landed and then only complete the catalog side, or publish again. A run taken over more
than ``max_refresh_attempts`` times in all is abandoned: ``FAILED``, staging removed, the
MV ``IDLE`` with its previous contents.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass

from sparkmv.catalog import ObjectKind, RefreshState, RunState
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.refresh.executor import RefreshExecutor, staging_dir
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime

log = logging.getLogger("sparkmv.recovery")


@dataclass(frozen=True)
class RecoveryOutcome:
    """What recovery did with one object: ``resumed``, ``abandoned`` or ``lost-race``."""

    name: str
    run_id: int | None
    action: str
    run: RefreshRun | None = None


def expired_runs(rt: Runtime) -> list[ObjectRow]:
    """Objects whose lease expired (one cheap query; no Spark)."""
    with rt.catalog.transaction() as s:
        return rt.catalog.objects.expired_leases(s)


def recover(rt: Runtime) -> list[RecoveryOutcome]:
    """Take over and resume every run whose lease expired; returns what was done."""
    outcomes: list[RecoveryOutcome] = []
    for row in expired_runs(rt):
        outcomes.append(recover_object(rt, row))
    return outcomes


def recover_object(rt: Runtime, row: ObjectRow) -> RecoveryOutcome:
    """Recover one object whose lease expired."""
    name = row.name if row.namespace == "default" else f"{row.namespace}.{row.name}"
    props = MvProperties.parse(row.properties or {}) if row.kind == ObjectKind.MATERIALIZED_VIEW else MvProperties()
    run_id = row.current_run_id
    with rt.catalog.transaction() as s:
        if not rt.catalog.objects.take_over(s, row, str(rt.owner), props.lease_timeout_seconds):
            return RecoveryOutcome(name, run_id, "lost-race")
        if run_id is None:
            rt.catalog.objects.transition(
                s, row.id, 0, str(rt.owner), RefreshState(row.state), RefreshState.IDLE, 0
            )
            return RecoveryOutcome(name, None, "abandoned")
        run = rt.catalog.runs.get(s, run_id)
        attempts = run.attempts + 1
        rt.catalog.runs.update(s, run_id, attempts=attempts, owner=str(rt.owner))
    log.info("recovering %s run %s (attempt %d, state %s)", name, run_id, attempts, row.state)
    if row.kind == ObjectKind.REFRESHABLE_TABLE:
        from sparkmv.refresh.reload.executor import resume_reload

        return RecoveryOutcome(name, run_id, "resumed", resume_reload(rt, run_id, attempts))
    if attempts > props.max_refresh_attempts and row.state == RefreshState.REFRESHING:
        abandon(rt, row, run_id, f"abandoned after {attempts - 1} attempts")
        return RecoveryOutcome(name, run_id, "abandoned")
    try:
        result = RefreshExecutor(rt).resume(run_id)
    except SparkMvError as exc:
        log.error("recovery of %s run %s failed: %s", name, run_id, exc)
        return RecoveryOutcome(name, run_id, "failed")
    return RecoveryOutcome(name, run_id, "resumed", result)


def abandon(rt: Runtime, row: ObjectRow, run_id: int, reason: str) -> None:
    """Mark ``run_id`` FAILED, remove its staging, return the object to IDLE."""
    with rt.catalog.transaction() as s:
        rt.catalog.objects.transition(s, row.id, run_id, str(rt.owner), RefreshState(row.state), RefreshState.IDLE, 0)
        rt.catalog.runs.update(s, run_id, state=RunState.FAILED, error=reason, finished=utcnow())
    try:
        from sparkmv.names import ObjectName

        location = rt.iceberg.load(ObjectName(row.namespace, row.name)).location()
        shutil.rmtree(staging_dir(location, run_id), ignore_errors=True)
    except SparkMvError:
        pass
