"""``sparkmv events``: the event log (``sparkmv.pipeline_events``), and the lines
``sparkmv pipeline run`` prints from it.

``--since`` takes an ISO timestamp (UTC unless it has an offset) or a duration back from now
(``<n>s|m|h|d``); ``--follow`` keeps printing new events as they are written, as ``tail -f``
(until interrupted: exit 130).
"""

from __future__ import annotations

import re
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

try:  # recent typer vendors click and raises its own copies of click's exceptions
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click.exceptions import UsageError  # type: ignore[assignment,no-redef]

if TYPE_CHECKING:
    from sparkmv.catalog.events import Event

FOLLOW_POLL_SECONDS = 1.0
"""How often ``--follow`` reads the catalog for new events (seconds)."""

EVENT_COLUMNS = ["id", "timestamp", "pipeline", "run_id", "dataset", "event_type", "level", "message", "details"]

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime) -> datetime:
    """``--since``: an ISO timestamp or ``<n>s|m|h|d`` before ``now`` -> UTC, naive.

    >>> parse_since("90m", datetime(2026, 1, 2, 12, 0))
    datetime.datetime(2026, 1, 2, 10, 30)
    >>> parse_since("2026-01-02T08:00:00+02:00", datetime(2026, 1, 2, 12, 0))
    datetime.datetime(2026, 1, 2, 6, 0)

    Raises:
        ValueError: ``text`` is neither (the message is ``--since``'s usage error).
    """
    match = _DURATION.match(text)
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since must be an ISO timestamp or <n>s|m|h|d, not {text!r}") from None
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when


def event_line(e: Event) -> str:
    """One event as a log line: time, level, pipeline/dataset, run, type, message."""
    when = e.timestamp.strftime("%Y-%m-%d %H:%M:%S") if e.timestamp is not None else "-"
    where = "/".join(p for p in (e.pipeline, e.dataset) if p) or "-"
    run = f"run {e.run_id}" if e.run_id is not None else "-"
    return f"{when}  {e.level:<5}  {where}  {run}  {e.event_type}  {e.message}"


def event_row(e: Event) -> list[Any]:
    """One event as a row of :data:`EVENT_COLUMNS` (details as JSON text)."""
    import json

    details = json.dumps(e.details, sort_keys=True, default=str)
    return [e.id, e.timestamp, e.pipeline, e.run_id, e.dataset, e.event_type, e.level, e.message, details]


def events_command(
    ctx: typer.Context,
    pipeline: Annotated[str | None, typer.Option("--pipeline", help="Only the events of this pipeline.")] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this time: an ISO timestamp (UTC) or <n>s|m|h|d ago.")
    ] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events (Ctrl-C stops).")] = False,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="The newest events to show (1 to 100000).")] = 200,
    format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """The event log, oldest first: runs started, planned and ended, each pipeline dataset's
    outcome, expectation results, recoveries (``sparkmv.pipeline_events``)."""
    from sparkmv.catalog.clock import utcnow
    from sparkmv.cli.render import print_rows
    from sparkmv.cli.session import console, state

    if format not in ("table", "csv", "json"):
        raise UsageError(f"--format must be table, csv or json, not {format!r}", ctx)
    if follow and format != "table":
        raise UsageError("--follow prints log lines: it takes --format table", ctx)
    try:
        start = parse_since(since, utcnow()) if since is not None else None
    except ValueError as exc:
        raise UsageError(str(exc), ctx) from None
    client = state.client(recover=False)
    events = client.events(pipeline, start, limit=limit)
    if format != "table":
        print_rows(console, EVENT_COLUMNS, [event_row(e) for e in events], format, None)
    else:
        for e in events:
            console.print(event_line(e), highlight=False, markup=False, soft_wrap=True)
    if not follow:
        return
    newest = max((e.id or 0 for e in events or client.events(limit=1)), default=0)
    while True:
        sys.stdout.flush()  # a pipe (| grep) sees each event as it is logged
        time.sleep(FOLLOW_POLL_SECONDS)  # polling the catalog: its databases have no notifications
        for e in client.events(pipeline, start, after_id=newest):
            console.print(event_line(e), highlight=False, markup=False, soft_wrap=True)
            newest = e.id or newest
