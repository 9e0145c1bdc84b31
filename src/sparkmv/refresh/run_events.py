"""The events of a refresh run in the event log (:mod:`sparkmv.catalog.events`), and its
expectations' results (:mod:`sparkmv.catalog.expectations`).

Every function here runs inside the caller's catalog transaction, the one that makes the
state change the event reports (the claim, the plan, the finish, the abort, the take-over),
so the log and the run history agree: a run is logged as succeeded exactly when it is
SUCCESS, and each state change is logged once, whether the run ends in this process or in
recovery.

Event types: ``run_started``, ``run_planned``, ``run_succeeded``, ``run_skipped``,
``run_failed``, ``run_cancelled``, ``run_recovered``, ``run_abandoned``, ``expectation``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from sparkmv.catalog import Catalog, RunState
from sparkmv.catalog.events import Event
from sparkmv.catalog.expectations import ExpectationResult
from sparkmv.names import ObjectName

_ENDED = {
    RunState.SUCCESS: ("run_succeeded", "INFO"),
    RunState.SKIPPED: ("run_skipped", "INFO"),
    RunState.FAILED: ("run_failed", "ERROR"),
    RunState.CANCELLED: ("run_cancelled", "WARN"),
}


def log_event(
    s: Session,
    catalog: Catalog | type[Catalog],
    name: ObjectName,
    run_id: int | None,
    event_type: str,
    level: str,
    message: str,
    **details: Any,
) -> None:
    """Add one event of dataset ``name`` (its pipeline looked up) for run ``run_id``."""
    event = Event(event_type, level, message, name.display, run_id, None, details)
    catalog.events.add(s, event, name)


def started(s: Session, catalog: Catalog | type[Catalog], name: ObjectName, run_id: int, trigger: str) -> None:
    """``run_started``: the run was created or claimed (details: trigger)."""
    log_event(
        s,
        catalog,
        name,
        run_id,
        "run_started",
        "INFO",
        f"run {run_id} of {name.display} started ({trigger})",
        trigger=str(trigger),
    )


def planned(s: Session, catalog: Catalog, name: ObjectName, run_id: int, mode: str, reason: str, chunks: int) -> None:
    """``run_planned``: the technique chosen and why (details: technique, reason, chunks)."""
    log_event(
        s,
        catalog,
        name,
        run_id,
        "run_planned",
        "INFO",
        f"run {run_id} of {name.display}: {mode} ({reason})",
        technique=mode,
        reason=reason,
        chunks=chunks,
    )


def ended(s: Session, catalog: Catalog, name: ObjectName, run_id: int) -> None:
    """``run_succeeded`` / ``run_skipped`` / ``run_failed`` / ``run_cancelled`` from the run
    row as this transaction leaves it (details: technique, reason, rows written, inserted,
    updated, deleted, bytes read, files written, seconds, error)."""
    run = catalog.runs.get(s, run_id)
    event_type, level = _ENDED.get(RunState(run.state), ("run_failed", "ERROR"))
    seconds = (run.finished - run.started).total_seconds() if run.finished and run.started else None
    details = {
        "technique": run.mode,
        "reason": run.mode_reason,
        "rows": run.rows_written,
        "rows_inserted": run.rows_inserted,
        "rows_updated": run.rows_updated,
        "rows_deleted": run.rows_deleted,
        "bytes_read": run.bytes_read,
        "files_written": run.files_written,
        "seconds": round(seconds, 3) if seconds is not None else None,
        "error": run.error,
    }
    what = {"run_succeeded": "succeeded", "run_skipped": "skipped", "run_cancelled": "was cancelled"}.get(
        event_type, "failed"
    )
    message = f"run {run_id} of {name.display} {what}"
    if event_type == "run_succeeded":
        message += f": {run.mode}, {run.rows_written} rows" + (f" in {seconds:.1f} s" if seconds is not None else "")
    elif run.error:
        message += f": {run.error}"
    log_event(
        s, catalog, name, run_id, event_type, level, message, **{k: v for k, v in details.items() if v is not None}
    )


def expectations(
    s: Session, catalog: Catalog, name: ObjectName, run_id: int | None, results: Sequence[ExpectationResult]
) -> None:
    """Store the run's expectation results and log one ``expectation`` event each (level WARN
    when rows failed; details: expectation, action, condition, rows passed, rows failed)."""
    if not results:
        return
    catalog.expectations.record(s, run_id, name.display, results)
    for r in results:
        verb = {"drop": "dropped", "fail": "failed the update with"}.get(r.action, "kept")
        message = (
            f"expectation '{r.expectation}' of {name.display}: {r.rows_passed} rows passed, "
            f"{r.rows_failed} failed" + (f" ({verb} {r.rows_failed})" if r.rows_failed else "")
        )
        log_event(
            s,
            catalog,
            name,
            run_id,
            "expectation",
            "WARN" if r.rows_failed else "INFO",
            message,
            expectation=r.expectation,
            action=r.action,
            condition=r.condition,
            rows_passed=r.rows_passed,
            rows_failed=r.rows_failed,
        )
