"""Running a pipeline: every materialized view and streaming table refreshed in dependency
order through sparkmv (a streaming table is an MV over the union of its flows,
:mod:`sparkmv.pipeline.flows`).

A SQL materialized view is an ordinary sparkmv MV: created (``REFRESH DEFERRED``, then built
by a refresh run) when missing; when its stored query, partition column or expectations
(``CONSTRAINT ... EXPECT``, ``@dp.expect...``: given to sparkmv's ``CREATE MATERIALIZED VIEW``
as its constraint list) differ from the definition, replaced atomically: the new definition
is built under a hidden name while the old MV stays readable, then swapped in by one catalog
transaction (``CREATE OR REPLACE``, :mod:`sparkmv.services.replace`; a failed build leaves the
old MV as it was); otherwise refreshed by ``Client.refresh`` — AUTO picks SKIP, PCT,
INCREMENTAL or FULL and says why; ``--full-refresh`` forces a refresh of every partition. ``TBLPROPERTIES`` keys
that are sparkmv properties (``refresh_mode``, ``partition_refresh_number``, ...) are applied
(``ALTER ... SET PROPERTIES`` when they changed); other keys are not kept. The spec's
``sparkmv.refresh`` configuration becomes each SQL dataset's refresh scheme (``ALTER ...
REFRESH``), so ``sparkmv scheduler`` runs the pipeline on that schedule, in dependency order.

A Python materialized view is refreshed by :mod:`.python_mv`, a streaming table fed by Python
flows by :mod:`.python_stream` (``@dp.table`` whose function returns a batch DataFrame is a
Python materialized view), a sink by :mod:`.python_sinks`; ``spark.readStream.table`` of a
pipeline dataset in a flow reads its new rows (:mod:`.python_feeds`). Its query function reads tables
by name (``spark.table("x")`` / ``spark.read.table``, ``spark.sql``): each name Spark cannot
resolve is bound, as a temporary view, to the sparkmv table's current snapshot, or to a
temporary view of the pipeline; a pipeline dataset not yet refreshed in this run puts the
Python MV after it (an edge of the graph found while running; a cycle is refused).

A dataset that fails is reported FAILED and left as it was (a newly created MV whose first
build failed is dropped; a changed definition whose build failed is not swapped in); the
datasets that read it are NOT RUN; the others run. The run's state is COMPLETED, or FAILED
when any dataset failed.

The event log (``sparkmv.pipeline_events``) holds ``pipeline_started``, each dataset's
outcome (``dataset_refreshed``, ``dataset_skipped``, ``dataset_failed``, ... written with it,
:meth:`sparkmv.catalog.pipelines.PipelineStore.record`), the refresh runs' own events and
expectation results, then ``pipeline_ended`` (state, counts, seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sparkmv.names import ObjectName
from sparkmv.pipeline.graph import Graph
from sparkmv.pipeline.model import (
    TEMPORARY_VIEW,
    Dataset,
    PipelineDefinitionError,
)
from sparkmv.pipeline.project import Project
from sparkmv.pipeline.python_datasets import run_auto_cdc, run_python_mv, run_python_table
from sparkmv.pipeline.registry import record_result, register_project
from sparkmv.pipeline.results import DatasetResult, NeedsDataset, RunResult, is_user_error, one_line
from sparkmv.pipeline.sql_datasets import run_sql_mv
from sparkmv.pipeline.sql_run import prepare, runs_alone, scoped_spark_conf
from sparkmv.refresh.pass_context import in_pass
from sparkmv.refresh.passes import pass_of

if TYPE_CHECKING:
    from sparkmv.client.client import Client

MAX_CONCURRENT_FLOWS = "spark.sql.pipelines.execution.maxConcurrentFlows"
"""SDP's setting (the spec's ``configuration``): datasets refreshed at once."""
DEFAULT_CONCURRENT_FLOWS = 16
"""SDP's default of :data:`MAX_CONCURRENT_FLOWS`."""


def run_pipeline(
    client: Client,
    project: Project,
    full_refresh: set[ObjectName] | None = None,
    full_refresh_all: bool = False,
    refresh: set[ObjectName] | None = None,
    on_result: Callable[[DatasetResult], None] | None = None,
    max_concurrent: int | None = None,
) -> RunResult:
    """Refresh the project's materialized views in dependency order (rules in the module
    docstring). ``refresh`` / ``full_refresh``: when either is given, only those datasets are
    refreshed (the others are EXCLUDED); ``full_refresh`` ones and, with ``full_refresh_all``,
    all are forced. ``on_result`` is called (in this thread) as each dataset finishes.

    Up to ``max_concurrent`` SQL datasets whose inputs have finished refresh at once, each in
    its own thread (default: the spec's ``spark.sql.pipelines.execution.maxConcurrentFlows``,
    else 16, as SDP runs its flows); a Python dataset runs alone, after every dataset before
    it in dependency order (its inputs are known only once its function has run, and it binds
    temporary views in the shared session).

    Raises:
        PipelineDefinitionError: a cycle found while running (through a Python MV); the
            spec's setting is not a positive integer (:func:`concurrent_flows`).
    """
    limit = max(1, max_concurrent) if max_concurrent is not None else concurrent_flows(project)
    register_project(client, project)
    pipelines, name = client.runtime.catalog.pipelines, project.spec.name
    pipelines.log(name, "pipeline_started", "INFO", f"pipeline {name} started", datasets=len(project.graph.datasets))
    started = time.monotonic()
    try:
        result = _run_datasets(client, project, full_refresh, full_refresh_all, refresh, on_result, limit)
    except BaseException as exc:
        seconds = round(time.monotonic() - started, 3)
        message = f"pipeline {name} ended in error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        pipelines.log(name, "pipeline_ended", "ERROR", message, state="FAILED", seconds=seconds, error=str(exc))
        raise
    counts = {s: n for s in _STATES if (n := sum(r.state == s for r in result.results))}
    seconds = round(time.monotonic() - started, 3)
    level = "ERROR" if result.state == "FAILED" else "INFO"
    words = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no dataset"
    pipelines.log(
        name,
        "pipeline_ended",
        level,
        f"pipeline {name} is {result.state}: {words}",
        state=result.state,
        counts=counts,
        seconds=seconds,
    )
    return result


_STATES = ("SUCCESS", "SKIPPED", "FAILED", "NOT RUN", "EXCLUDED")


def _run_datasets(
    client: Client,
    project: Project,
    full_refresh: set[ObjectName] | None,
    full_refresh_all: bool,
    refresh: set[ObjectName] | None,
    on_result: Callable[[DatasetResult], None] | None,
    limit: int,
) -> RunResult:
    """The datasets of one pipeline run, as :func:`run_pipeline` describes."""
    full = set(full_refresh or ())
    chosen = full | set(refresh or ())
    graph = project.graph
    result = RunResult(project.spec.name)
    outcome: dict[ObjectName, str] = {}
    running: dict[Future[DatasetResult], tuple[ObjectName, datetime]] = {}
    attempt = in_pass(pass_of(client.runtime, list(graph.datasets)), _attempt)  # a change read once for all

    def finish(res: DatasetResult, started: datetime) -> None:
        res.started = res.started or started
        res.finished = res.finished or _now()
        outcome[res.name] = res.state
        result.results.append(res)
        record_result(client, project, res)
        if on_result is not None:
            on_result(res)

    with ThreadPoolExecutor(limit, thread_name_prefix="sparkmv-pipeline") as pool:
        while True:
            order = graph.order()
            for ds in _startable(graph, order, outcome, {n for n, _ in running.values()}, len(running) < limit):
                if ds.kind == TEMPORARY_VIEW:
                    outcome[ds.name] = "VIEW"
                elif (skipped := _not_run(graph, ds, outcome, chosen)) is not None:
                    finish(skipped, _now())
                else:
                    force = full_refresh_all or ds.name in full
                    running[pool.submit(attempt, client, project, ds, force, set(outcome))] = (ds.name, _now())
                    if runs_alone(ds) or len(running) >= limit:
                        break
            if not running:
                if all(n in outcome for n in order):
                    return result
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                name, started = running.pop(future)
                try:
                    finish(future.result(), started)
                except NeedsDataset as need:
                    graph.inputs.setdefault(name, []).append(need.name)


def concurrent_flows(project: Project) -> int:
    """The spec's ``spark.sql.pipelines.execution.maxConcurrentFlows`` (SDP's setting), else
    :data:`DEFAULT_CONCURRENT_FLOWS`.

    Raises:
        PipelineDefinitionError: ``<spec>: configuration <key>: must be a positive integer,
            not '<value>'``.
    """
    text = project.spec.configuration.get(MAX_CONCURRENT_FLOWS)
    if text is None:
        return DEFAULT_CONCURRENT_FLOWS
    if not text.strip().isdigit() or int(text) < 1:
        raise PipelineDefinitionError(
            f"{project.spec.path}: configuration {MAX_CONCURRENT_FLOWS}: must be a positive integer, not {text!r}"
        )
    return int(text)


def _startable(
    graph: Graph, order: list[ObjectName], outcome: dict[ObjectName, str], running: set[ObjectName], room: bool
) -> list[Dataset]:
    """The datasets that may start now, in dependency ``order``: not finished nor running,
    every input finished; none while a Python dataset runs, and a Python dataset only when
    nothing runs and every dataset before it in ``order`` has finished."""
    if any(runs_alone(graph.datasets[n]) for n in running) or not room:
        return []
    ready: list[Dataset] = []
    before_done = True
    for name in order:
        if name in outcome:
            continue
        ds = graph.datasets[name]
        if runs_alone(ds):
            if not running and not ready and before_done:
                ready.append(ds)
            break  # nothing after a Python dataset starts before it
        before_done = False
        if name not in running and all(n in outcome for n in graph.inputs.get(name, [])):
            ready.append(ds)
    return ready


def _attempt(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
    """Run one dataset (in a worker thread); a user's error is its FAILED report line."""
    try:
        return _run_one(client, project, ds, force, done)
    except (NeedsDataset, PipelineDefinitionError):
        raise
    except Exception as exc:
        if not is_user_error(exc):
            raise
        return DatasetResult(ds.name, _source(ds), "FAILED", reason=one_line(exc))


def _not_run(
    graph: Graph, ds: Dataset, outcome: dict[ObjectName, str], chosen: set[ObjectName]
) -> DatasetResult | None:
    """The report line of a dataset that is not refreshed (not selected, or an input failed)."""
    failed_inputs = [n for n in graph.inputs.get(ds.name, []) if outcome.get(n) in ("FAILED", "NOT RUN")]
    if chosen and ds.name not in chosen:
        return DatasetResult(ds.name, _source(ds), "EXCLUDED", reason="not selected by --refresh / --full-refresh")
    if failed_inputs:
        return DatasetResult(ds.name, _source(ds), "NOT RUN", reason=f"input {failed_inputs[0].display} failed")
    return None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _run_one(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
    if ds.auto_cdc is not None:
        return run_auto_cdc(client, project, ds, force, done)
    if ds.query is not None:
        with scoped_spark_conf(client, ds.conf):  # the SETs before it in its file
            if ds.flow_queries:  # folded now that its sources' schemas are known
                from sparkmv.pipeline.sql_flows import fold_sql_flows

                project.queries[ds.name] = fold_sql_flows(client, project, ds)
            prepare(client, project, ds, project.queries[ds.name])  # path tables, column list
            return run_sql_mv(client, project, ds, force)
    if ds.python_flows:
        return run_python_table(client, project, ds, force, done)
    return run_python_mv(client, project, ds, force, done)


def _source(ds: Dataset) -> str:
    return "python" if ds.is_python else "sql"
