"""A refresh pass: several materialized views refreshed together, in dependency order
(``REFRESH MATERIALIZED VIEW a, b, ...``, ``REFRESH ALL MATERIALIZED VIEWS``).

Each MV is still its own refresh run with its own atomic publish (a crash leaves each MV
refreshed or untouched; recovery resumes its run). What the pass adds:

- **order**: an MV starts once every MV of the pass it reads has finished (SUCCESS or
  SKIPPED); one that failed leaves the MVs reading it not run (their input would be stale),
  each with the reason; independent MVs refresh concurrently in this Spark application, up
  to ``max_concurrent`` at once (threads: each run's Spark jobs are in its own job group);
- **one read of each change**: AUTO weighs reading and netting a base table's signed change
  as shared among the MVs of the pass that consume the same change
  (:func:`~sparkmv.refresh.pass_context.consumers_in_pass`, used by
  :mod:`sparkmv.refresh.incremental.netting`), and the first MV to read it stores it in the
  change cache, where the others find it (a lock per
  change makes the concurrent ones wait rather than read it again). A copy-on-write rewrite
  of every file of a table, too dear for one MV to net alone, is netted once for all (as
  Databricks' Enzyme and Snowflake share a change across the dynamic tables over it).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from sparkmv.catalog import Trigger
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.pass_context import RefreshPass, in_pass
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime

DEFAULT_CONCURRENCY = 4
"""MVs of a pass refreshed at once: their driver-side work (planning, reading changes,
commits) overlaps the others' Spark jobs."""


@dataclass(frozen=True)
class PassResult:
    """What a pass did: each MV's finished run, in the order they finished, and the MVs
    not run with why (a dependency failed, or the MV was busy)."""

    runs: dict[ObjectName, RefreshRun]
    not_run: dict[ObjectName, str]

    @property
    def failed(self) -> list[ObjectName]:
        """MVs whose run did not succeed, or that did not run."""
        bad = [n for n, r in self.runs.items() if r.state not in ("SUCCESS", "SKIPPED")]
        return bad + list(self.not_run)

    def failure_text(self, total: int) -> str:
        """``refresh pass: <n> of <total> materialized views did not refresh: '<a>' (run 7
        FAILED: <error>), '<b>' (not run: ...)``."""
        parts = []
        for name in self.failed:
            run = self.runs.get(name)
            why = (
                self.not_run[name]
                if run is None
                else f"run {run.run_id} {run.state}" + (f": {run.error}" if run.error else "")
            )
            parts.append(f"'{name}' ({why})")
        return f"refresh pass: {len(parts)} of {total} materialized views did not refresh: {', '.join(parts)}"


def refresh_pass(
    rt: Runtime,
    names: Sequence[ObjectName],
    request: RefreshRequest | None = None,
    trigger: Trigger = Trigger.MANUAL,
    max_concurrent: int = DEFAULT_CONCURRENCY,
) -> PassResult:
    """Refresh the MVs ``names`` as one pass (module docstring); returns each one's run.

    Raises:
        ObjectNotFoundError, InactiveError: for a name that is no active MV, before any
            refresh starts.
    """
    from sparkmv.refresh.run_now import refresh_mv

    deps, ids = _dependencies(rt, names)
    pass_ = RefreshPass(_positions(rt, ids))
    request = request or RefreshRequest()
    runs: dict[ObjectName, RefreshRun] = {}
    not_run: dict[ObjectName, str] = {}
    waiting = list(names)
    running: dict[Future[RefreshRun], ObjectName] = {}

    def start(pool: ThreadPoolExecutor, name: ObjectName) -> None:
        running[pool.submit(in_pass(pass_, refresh_mv), rt, name, trigger, request)] = name

    with ThreadPoolExecutor(max_workers=max(1, max_concurrent), thread_name_prefix="sparkmv-pass") as pool:
        while waiting or running:
            for name in list(waiting):
                blocked = [d for d in deps[name] if d in not_run or (d in runs and runs[d].state not in _DONE)]
                if blocked:
                    waiting.remove(name)
                    not_run[name] = f"not run: '{blocked[0]}' did not refresh"
                elif all(d in runs for d in deps[name]) and len(running) < max(1, max_concurrent):
                    waiting.remove(name)
                    start(pool, name)
            if not running:
                for name in waiting:  # unreachable: MVs read each other without cycles
                    not_run[name] = "not run: its dependencies did not finish"
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                name = running.pop(future)
                try:
                    runs[name] = future.result()
                except SparkMvError as exc:  # busy, or gone since the pass began
                    not_run[name] = str(exc)
    return PassResult(runs, not_run)


_DONE = ("SUCCESS", "SKIPPED")


def pass_of(rt: Runtime, names: Sequence[ObjectName]) -> RefreshPass:
    """The pass of the MVs among ``names`` (other names are ignored): what each consumed,
    for a caller that runs its own threads (``sparkmv pipeline run``)."""
    from sparkmv.catalog import ObjectKind

    ids = []
    with rt.catalog.read() as s:
        for name in names:
            row = rt.catalog.objects.find(s, name)
            if row is not None and row.kind == ObjectKind.MATERIALIZED_VIEW:
                ids.append(row.id)
    return RefreshPass(_positions(rt, ids))


def _dependencies(rt: Runtime, names: Sequence[ObjectName]) -> tuple[dict[ObjectName, list[ObjectName]], list[int]]:
    """Each MV of the pass -> the MVs of the pass it reads; the MVs' object ids.

    Raises:
        ObjectNotFoundError, InactiveError: as :meth:`ObjectStore.get` / an inactive MV.
    """
    from sparkmv.analysis.query import parse_query, referenced_tables
    from sparkmv.catalog import ObjectKind
    from sparkmv.errors import InactiveError

    members = set(names)
    deps: dict[ObjectName, list[ObjectName]] = {}
    ids: list[int] = []
    with rt.catalog.read() as s:
        for name in names:
            row = rt.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)
            if row.inactive_reason:
                raise InactiveError(f"MV '{name}' is inactive: {row.inactive_reason}")
            ids.append(row.id)
            read = referenced_tables(parse_query(row.definition or ""))
            deps[name] = [t for t in read if t in members and t != name]
    return deps, ids


def _positions(rt: Runtime, ids: list[int]) -> dict[int, dict[str, int | None]]:
    """Each MV's consumed Iceberg snapshot per base table."""
    out: dict[int, dict[str, int | None]] = {}
    with rt.catalog.read() as s:
        for object_id in ids:
            loaded = rt.catalog.positions.load(s, object_id)
            out[object_id] = {t: p.get("snapshot_id") if isinstance(p, dict) else None for t, p in loaded.items()}
    return out
