"""System tables of data quality and the event log: ``sparkmv.expectations`` (one row per
expectation per refresh run) and ``sparkmv.pipeline_events`` (one row per event).

Rows in plain Python from the catalog (no Spark); the column names are a contract.
"""

from __future__ import annotations

import json
from typing import Any

from sparkmv.refresh.runtime import Runtime

S, L, T = "string", "bigint", "timestamp_ntz"

EXPECTATIONS_COLUMNS = (
    ("dataset", S),
    ("expectation", S),
    ("action", S),
    ("run_id", L),
    ("rows_passed", L),
    ("rows_failed", L),
    ("condition", S),
    ("recorded_at", T),
)

PIPELINE_EVENTS_COLUMNS = (
    ("id", L),
    ("timestamp", T),
    ("pipeline", S),
    ("run_id", L),
    ("dataset", S),
    ("event_type", S),
    ("level", S),
    ("message", S),
    ("details", S),
)


def expectations_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.expectations``, newest run first: dataset, expectation, action
    (``warn``, ``drop``, ``fail``), run id (NULL for a pipeline's Python table, kept outside
    the run lifecycle), rows passed, rows failed (over the rows the run processed), the
    condition as written, when it was recorded (UTC)."""
    with rt.catalog.read() as s:
        results = rt.catalog.expectations.list(s)
    return [
        (r.dataset, r.expectation, r.action, r.run_id, r.rows_passed, r.rows_failed, r.condition, r.recorded_at)
        for r in results
    ]


def pipeline_events_rows(rt: Runtime) -> list[tuple[Any, ...]]:
    """Rows of ``sparkmv.pipeline_events`` in the order the events happened: id, timestamp
    (UTC), pipeline (NULL outside pipelines), run id, dataset, event type, level, message,
    details (a JSON object as text)."""
    with rt.catalog.read() as s:
        events = rt.catalog.events.list(s)
    return [
        (
            e.id,
            e.timestamp,
            e.pipeline,
            e.run_id,
            e.dataset,
            e.event_type,
            e.level,
            e.message,
            json.dumps(e.details, sort_keys=True, default=str),
        )
        for e in events
    ]
