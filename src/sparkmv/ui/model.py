"""What the web pages show, read from the catalog: objects with their display state, runs,
and one object's details. Plain Python over the catalog stores and the status service
(:mod:`sparkmv.services.status`); no Spark.

Display states (by precedence): ``inactive`` (reason), ``paused`` (newest control command of
the running refresh is PAUSE), ``refreshing`` (progress in chunks), ``failed`` (newest
finished run FAILED, its error), then ``stale`` / ``fresh`` from the status service's
freshness (staleness and number of stale base partitions). Base tables show ``base table``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sparkmv.catalog import ObjectKind, RefreshState, RunState
from sparkmv.catalog.models import ObjectRow, TaskRunRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.freshness import Freshness
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.status import freshness_alert, mv_freshness

KINDS = {
    ObjectKind.MATERIALIZED_VIEW: "materialized view",
    ObjectKind.REFRESHABLE_TABLE: "refreshable table",
    ObjectKind.EXTERNAL_TABLE: "base table",
}
FINISHED = [RunState.SUCCESS, RunState.FAILED, RunState.CANCELLED, RunState.SKIPPED, RunState.UPSTREAM_FAILED]
STATES = ("fresh", "stale", "refreshing", "paused", "failed", "inactive", "base table")


def human_seconds(seconds: float) -> str:
    """A duration in the two largest human units.

    >>> human_seconds(42.4), human_seconds(3725), human_seconds(190000)
    ('42 s', '1 h 2 min', '2 d 4 h')
    """
    s = round(seconds)
    units = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
    parts: list[str] = []
    for unit, size in units:
        if s >= size or (unit == "s" and not parts):
            parts.append(f"{s // size} {unit}")
            s %= size
        if len(parts) == 2 or (parts and s == 0):
            break
    return " ".join(parts)


@dataclass
class ObjectView:
    """One node of the graph / one row of ``/api/objects``.

    Attributes:
        name: display name (``default.`` left out); kind: ``materialized view``,
            ``refreshable table`` or ``base table``; state: one of :data:`STATES`.
        detail: the state in words (staleness, stale partitions, error, reason, progress).
        staleness_seconds / stale_partitions: for a stale MV; chunks_done / chunks_planned:
            the running (or paused) refresh; run_id: that run.
        base_tables: display names of the objects it reads (graph edges).
        freshness_alert: ``WARN`` / ``ERROR`` for a stale MV past its ``freshness_warn_after``
            / ``freshness_error_after`` (:func:`sparkmv.services.status.freshness_alert`).
    """

    name: str
    kind: str
    state: str
    detail: str
    in_catalog: bool = True
    refresh_state: str | None = None
    staleness_seconds: float | None = None
    stale_partitions: int | None = None
    chunks_done: int | None = None
    chunks_planned: int | None = None
    run_id: int | None = None
    error: str | None = None
    inactive_reason: str | None = None
    last_refresh_end: datetime | None = None
    base_tables: list[str] = field(default_factory=list)
    freshness_alert: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form (datetimes as ISO 8601 text)."""
        out = asdict(self)
        out["last_refresh_end"] = self.last_refresh_end.isoformat() if self.last_refresh_end else None
        return out


def display(qualified: str) -> str:
    """``default.x`` -> ``x``; other names unchanged."""
    return qualified.removeprefix("default.")


class FreshnessCache:
    """Freshness per MV (it pins every base table: file listings or Iceberg metadata), so that
    a page costs catalog reads only.

    A value is recomputed at once when the MV's last successful run changed (or was never
    computed); a value older than ``ttl`` seconds is served while one background thread
    recomputes it (stale-while-revalidate), so no request waits for a whole catalog's pins.
    """

    def __init__(self, ttl: float = 10.0) -> None:
        self.ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[int, tuple[float, int | None, Freshness | None]] = {}
        self._pending: dict[int, tuple[Runtime, ObjectRow]] = {}
        self._worker: threading.Thread | None = None

    def get(self, rt: Runtime, row: ObjectRow) -> Freshness | None:
        """The freshness of MV ``row`` (None: never refreshed or a base table is gone)."""
        with self._lock:
            hit = self._entries.get(row.id)
        if hit is None or hit[1] != row.last_success_run_id:
            return self._compute(rt, row)
        if time.monotonic() - hit[0] >= self.ttl:
            self._schedule(rt, row)
        return hit[2]

    def _compute(self, rt: Runtime, row: ObjectRow) -> Freshness | None:
        value = mv_freshness(rt, row)
        with self._lock:
            self._entries[row.id] = (time.monotonic(), row.last_success_run_id, value)
        return value

    def _schedule(self, rt: Runtime, row: ObjectRow) -> None:
        with self._lock:
            self._pending[row.id] = (rt, row)
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(target=self._drain, name="sparkmv-ui-freshness", daemon=True)
            self._worker.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._worker = None
                    return
                _, (rt, row) = self._pending.popitem()
            self._compute(rt, row)


def _active_state(view: ObjectView, row: ObjectRow, run: TaskRunRow | None, paused: bool) -> bool:
    """Fill in paused / refreshing from the running refresh; False when none is running."""
    if row.state == RefreshState.IDLE or run is None:
        return False
    view.run_id, view.chunks_done, view.chunks_planned = run.run_id, run.chunks_done, run.chunks_planned
    progress = f"chunk {run.chunks_done} of {run.chunks_planned}" if run.chunks_planned else "planning"
    view.state = "paused" if paused else "refreshing"
    view.detail = f"{view.state}: run {run.run_id}, {progress}"
    return True


def _idle_state(view: ObjectView, row: ObjectRow, last: TaskRunRow | None, cache: FreshnessCache, rt: Runtime) -> None:
    """Fill in failed / stale / fresh for an object that is not refreshing."""
    if last is not None:
        view.last_refresh_end = last.finished
    if last is not None and last.state == RunState.FAILED:
        view.state, view.error = "failed", last.error
        view.detail = f"failed: run {last.run_id}: {last.error or 'no error text'}"
        return
    if row.kind == ObjectKind.REFRESHABLE_TABLE:
        if row.last_success_run_id is None:
            view.state, view.detail = "stale", "stale: never loaded"
        else:
            view.state, view.detail = "fresh", f"loaded by run {row.last_success_run_id}"
        return
    fresh = cache.get(rt, row)
    if row.last_success_run_id is None:
        view.state, view.detail = "stale", "stale: never refreshed"
    elif fresh is None:
        view.state, view.detail = "stale", "stale: a base table cannot be read"
    elif fresh.is_fresh:
        view.state, view.detail = "fresh", "fresh"
        view.staleness_seconds, view.stale_partitions = 0.0, 0
    else:
        view.state = "stale"
        view.staleness_seconds, view.stale_partitions = round(fresh.staleness_seconds(), 3), fresh.stale_partitions
        parts = "partition" if fresh.stale_partitions == 1 else "partitions"
        view.detail = f"stale {human_seconds(fresh.staleness_seconds())}, {fresh.stale_partitions} stale base {parts}"
        view.freshness_alert = _alert(row, fresh.staleness_seconds())
        if view.freshness_alert is not None:
            view.detail += f"; {view.freshness_alert}: past freshness_{view.freshness_alert.lower()}_after"


def _alert(row: ObjectRow, staleness: float) -> str | None:
    """The MV's freshness alert for ``staleness`` seconds (None for bad stored properties)."""
    try:
        return freshness_alert(MvProperties.parse(row.properties or {}), staleness)
    except SparkMvError:
        return None


def object_views(rt: Runtime, cache: FreshnessCache) -> list[ObjectView]:
    """Every object of the catalog with its display state, plus a node for each base table
    an MV reads that the catalog does not hold (a table of an external catalog). Sorted by name.

    Four catalog queries whatever the number of objects, then freshness per idle MV (cached).
    """
    with rt.catalog.read() as s:
        rows = rt.catalog.objects.list(s)
        last = rt.catalog.runs.newest_per_object(s, FINISHED)
        current = rt.catalog.runs.by_ids(s, [r.current_run_id for r in rows if r.current_run_id is not None])
        paused = rt.catalog.control.paused_runs(s, list(current))
    views: list[ObjectView] = []
    known = set()
    for row in rows:
        qualified = ObjectName(row.namespace, row.name).qualified
        known.add(qualified)
        view = ObjectView(
            name=display(qualified),
            kind=KINDS.get(ObjectKind(row.kind), row.kind),
            state="base table",
            detail="base table",
            refresh_state=row.state,
            base_tables=[display(b) for b in row.base_tables or []],
        )
        views.append(view)
        if row.kind == ObjectKind.EXTERNAL_TABLE:
            continue
        if row.kind == ObjectKind.MATERIALIZED_VIEW and not row.is_active:
            view.state, view.inactive_reason = "inactive", row.inactive_reason
            view.detail = f"inactive: {row.inactive_reason or 'no reason recorded'}"
            continue
        run = current.get(row.current_run_id) if row.current_run_id is not None else None
        if not _active_state(view, row, run, run is not None and run.run_id in paused):
            _idle_state(view, row, last.get(row.id), cache, rt)
    for row in rows:
        for base in row.base_tables or []:
            if base not in known:
                known.add(base)
                views.append(ObjectView(display(base), "base table", "base table", "base table", in_catalog=False))
    return sorted(views, key=lambda v: v.name)


def run_json(run: TaskRunRow) -> dict[str, Any]:
    """One run as JSON: ids, trigger, mode and reason, candidates, state, times (ISO 8601),
    duration (seconds), rows, the chosen technique's estimate and the bytes read (None when not
    recorded), chunks and partitions done / planned, error."""
    duration = (run.finished - run.started).total_seconds() if run.finished and run.started else None
    return {
        "run_id": run.run_id,
        "name": display(run.object_name),
        "trigger": run.trigger,
        "mode": run.mode,
        "mode_reason": run.mode_reason,
        "candidates": run.candidates or [],
        "state": run.state,
        "created": run.created.isoformat() if run.created else None,
        "started": run.started.isoformat() if run.started else None,
        "finished": run.finished.isoformat() if run.finished else None,
        "duration_seconds": round(duration, 3) if duration is not None else None,
        "rows_written": run.rows_written,
        "estimate_bytes": run.estimate_bytes,
        "bytes_read": run.bytes_read,
        "chunks_done": run.chunks_done,
        "chunks_planned": run.chunks_planned,
        "partitions_done": run.partitions_done,
        "partitions_planned": run.partitions_planned,
        "error": run.error,
    }


@dataclass(frozen=True)
class RunsPage:
    """One page of runs (newest first) and the filter that chose them."""

    runs: list[dict[str, Any]]
    total: int
    page: int
    per_page: int
    name: str | None
    state: str | None

    @property
    def pages(self) -> int:
        """Number of pages (at least 1)."""
        return max(1, (self.total + self.per_page - 1) // self.per_page)


def runs_page(rt: Runtime, name: str | None, state: str | None, page: int, per_page: int = 50) -> RunsPage:
    """Runs newest first, of object ``name`` and in ``state`` when given, page ``page`` (1-based).

    Raises:
        ObjectNotFoundError: when ``name`` names no object.
    """
    with rt.catalog.read() as s:
        object_id = rt.catalog.objects.get(s, ObjectName.parse(name, allow_reserved=True)).id if name else None
        rows, total = rt.catalog.runs.page(s, object_id, state, (page - 1) * per_page, per_page)
        runs = [run_json(r) for r in rows]
    return RunsPage(runs, total, page, per_page, name, state)
