"""Running a pipeline: every materialized view and streaming table refreshed in dependency
order through sparkmv (a streaming table is an MV over the union of its flows,
:mod:`sparkmv.pipeline.flows`).

A SQL materialized view is an ordinary sparkmv MV: created (``REFRESH DEFERRED``, then built
by a refresh run) when missing; when its stored query or partition column differs from the
definition, replaced atomically: the new definition is built under a hidden name while the
old MV stays readable, then swapped in by one catalog transaction (``CREATE OR REPLACE``,
:mod:`sparkmv.services.replace`; a failed build leaves the old MV as it was); otherwise
refreshed by ``Client.refresh`` — AUTO picks SKIP, PCT, INCREMENTAL or FULL and says why;
``--full-refresh`` forces a refresh of every partition. ``TBLPROPERTIES`` keys
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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.graph import Graph
from sparkmv.pipeline.model import (
    REFRESHED_KINDS,
    SINK,
    STREAMING_TABLE,
    TEMPORARY_VIEW,
    Dataset,
    PipelineDefinitionError,
)
from sparkmv.pipeline.project import Project
from sparkmv.pipeline.registry import record_result, register_project
from sparkmv.pipeline.sql_run import prepare, runs_alone, session_conf

if TYPE_CHECKING:
    from sparkmv.catalog.models import ObjectRow
    from sparkmv.client.client import Client
    from sparkmv.refresh.result import RefreshRun

KNOWN_PROPERTY_PREFIXES = ("session.",)
MAX_CONCURRENT_FLOWS = "spark.sql.pipelines.execution.maxConcurrentFlows"
"""SDP's setting (the spec's ``configuration``): datasets refreshed at once."""
DEFAULT_CONCURRENT_FLOWS = 16
"""SDP's default of :data:`MAX_CONCURRENT_FLOWS`."""


@dataclass
class DatasetResult:
    """One line of the run's report."""

    name: ObjectName
    source: str  # "sql" or "python"
    state: str  # SUCCESS, SKIPPED, FAILED, NOT RUN, EXCLUDED
    technique: str | None = None  # FULL, PCT, INCREMENTAL, SKIP
    reason: str | None = None
    rows: int | None = None  # rows of the dataset after the run
    started: datetime | None = None
    finished: datetime | None = None
    run_id: int | None = None
    kind: str = "materialized view"  # or "streaming table"


@dataclass
class RunResult:
    """The run: one result per materialized view, in the order they ran."""

    pipeline: str
    results: list[DatasetResult] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "FAILED" if any(r.state == "FAILED" for r in self.results) else "COMPLETED"


class _NeedsDataset(Exception):
    """A Python query function read pipeline dataset ``name``, not yet refreshed in this run."""

    def __init__(self, name: ObjectName) -> None:
        super().__init__(name.display)
        self.name = name


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
    full = set(full_refresh or ())
    chosen = full | set(refresh or ())
    graph = project.graph
    result = RunResult(project.spec.name)
    outcome: dict[ObjectName, str] = {}
    running: dict[Future[DatasetResult], tuple[ObjectName, datetime]] = {}

    register_project(client, project)

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
                    running[pool.submit(_attempt, client, project, ds, force, set(outcome))] = (ds.name, _now())
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
                except _NeedsDataset as need:
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
    except (_NeedsDataset, PipelineDefinitionError):
        raise
    except Exception as exc:
        if not _is_user_error(exc):
            raise
        return DatasetResult(ds.name, _source(ds), "FAILED", reason=_one_line(exc))


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
        return _run_auto_cdc(client, project, ds, force, done)
    if ds.query is not None:
        with session_conf(client, ds.conf):  # the SETs before it in its file
            if ds.flow_queries:  # folded now that its sources' schemas are known
                from sparkmv.pipeline.sql_flows import fold_sql_flows

                project.queries[ds.name] = fold_sql_flows(client, project, ds)
            prepare(client, project, ds, project.queries[ds.name])  # path tables, column list
            return _run_sql_mv(client, project, ds, force)
    if ds.python_flows:
        return _run_python_table(client, project, ds, force, done)
    return _run_python_mv(client, project, ds, force, done)


def _source(ds: Dataset) -> str:
    return "python" if ds.is_python else "sql"


def sparkmv_properties(props: dict[str, str]) -> dict[str, str]:
    """The ``TBLPROPERTIES`` that are sparkmv properties (the others are not kept)."""
    from sparkmv.refresh.properties import KNOWN

    return {k: v for k, v in props.items() if k in KNOWN or k.startswith(KNOWN_PROPERTY_PREFIXES)}


def create_statement(name: ObjectName, ds: Dataset, query: str, replace_scheme: str | None = None) -> str:
    """The sparkmv ``CREATE MATERIALIZED VIEW ... REFRESH DEFERRED AS`` of a SQL MV; with
    ``replace_scheme``, ``CREATE OR REPLACE MATERIALIZED VIEW ... REFRESH <scheme> AS``
    instead (built, then swapped in for the MV of that name)."""
    parts = [f"CREATE {'OR REPLACE ' if replace_scheme else ''}MATERIALIZED VIEW {name.qualified}"]
    if ds.partition_by:
        parts.append(f"PARTITION BY {ds.partition_by}")
    props = sparkmv_properties(ds.properties)
    if props:
        parts.append("PROPERTIES (" + ", ".join(f"{_quote(k)} = {_quote(v)}" for k, v in props.items()) + ")")
    parts.append(f"REFRESH {replace_scheme} AS {query}" if replace_scheme else f"REFRESH DEFERRED AS {query}")
    return " ".join(parts)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _run_sql_mv(client: Client, project: Project, ds: Dataset, force: bool, query: str | None = None) -> DatasetResult:
    """Create, replace or refresh one SQL MV (``query``: a Python MV's translated query, else
    the dataset's own); a failed first build drops what it created, a failed build of a
    changed definition leaves the MV as it was."""
    query = query or project.queries[ds.name]
    with client.runtime.catalog.read() as s:
        row = client.runtime.catalog.objects.find(s, ds.name)
        stored = (row.kind, dict(row.properties or {}), definition_changed(row, query, ds)) if row else None
        scheme = row.refresh_scheme if row else None
    if stored is not None and stored[0] != "MATERIALIZED_VIEW":
        raise SparkMvError(f"{ds.name.display} is already a sparkmv {stored[0].lower().replace('_', ' ')}")
    if stored is not None and stored[2]:
        return _replace_sql_mv(client, project, ds, query, scheme or "MANUAL")
    created = stored is None
    if created:
        client.sql(create_statement(ds.name, ds, query), raise_on_failure=True)
    else:
        changed = {k: v for k, v in sparkmv_properties(ds.properties).items() if stored and stored[1].get(k) != v}
        if changed:
            props = ", ".join(f"{_quote(k)} = {_quote(v)}" for k, v in changed.items())
            client.sql(f"ALTER MATERIALIZED VIEW {ds.name.qualified} SET PROPERTIES ({props})")
    if project.refresh_scheme is not None and (created or scheme != project.refresh_scheme):
        client.sql(f"ALTER MATERIALIZED VIEW {ds.name.qualified} REFRESH {project.refresh_scheme}")
    try:
        run = client.refresh(ds.name, force=force and not created)
    except Exception:
        if created:
            client.sql(f"DROP MATERIALIZED VIEW IF EXISTS {ds.name.qualified}")
        raise
    if run.state not in ("SUCCESS", "SKIPPED") and created:
        client.sql(f"DROP MATERIALIZED VIEW IF EXISTS {ds.name.qualified}")
    return _sql_result(client, ds, run, "created" if created else None)


def definition_changed(row: ObjectRow, query: str, ds: Dataset) -> bool:
    """True when SQL dataset ``ds`` (its resolved ``query``) differs from the MV ``row`` the
    catalog stores for it: another query or partition column (the MV is then replaced)."""
    return row.definition != query or (row.partition_by or None) != ds.partition_by


def _replace_sql_mv(client: Client, project: Project, ds: Dataset, query: str, scheme: str) -> DatasetResult:
    """A SQL MV whose query or partition column changed: the new definition is built hidden
    and swapped in atomically (``CREATE OR REPLACE``, :mod:`sparkmv.services.replace`), with
    the spec's refresh scheme or else the MV's own; a failed build leaves the MV as it was."""
    statement = create_statement(ds.name, ds, query, replace_scheme=project.refresh_scheme or scheme)
    run = client.execute(statement).run
    assert run is not None  # CREATE OR REPLACE always returns its build run
    if run.state in ("SUCCESS", "SKIPPED"):
        return _sql_result(client, ds, run, "definition changed: replaced")
    return _sql_result(client, ds, run, "definition changed: not replaced, the MV is left as it was")


def _sql_result(client: Client, ds: Dataset, run: RefreshRun, note: str | None) -> DatasetResult:
    """The report line of SQL dataset ``ds`` after ``run`` (``note``: what was done first)."""
    reason = run.error if run.state in ("FAILED", "CANCELLED") else run.reason
    if note:
        reason = f"{note}; {reason}" if reason else note
    state = "FAILED" if run.state == "CANCELLED" else run.state
    rows = _table_rows(client, ds.name) if state != "FAILED" else None
    if ds.kind == STREAMING_TABLE:
        flows = f"flows {', '.join(ds.flows)}"
        reason = f"{flows}; {reason}" if reason else flows
    return DatasetResult(ds.name, "sql", state, run.mode, reason, rows, run.started, run.finished, run.run_id, ds.kind)


def _table_rows(client: Client, name: ObjectName) -> int | None:
    """Rows of the current snapshot of MV ``name``'s Iceberg table (its summary's total)."""
    snap = client.runtime.iceberg.load(name).current_snapshot()
    total = snap.summary.get("total-records") if snap is not None and snap.summary is not None else None
    return int(total) if total is not None else 0 if snap is None else None


def _run_python_mv(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
    from sparkmv.pipeline.python_mv import refresh_python_mv
    from sparkmv.pipeline.python_plan import translate

    bound: list[str] = []
    try:
        df = _with_schema(ds, _call(client, project, ds, bound, done))
        translated = translate(df, _bound_tables(project, bound))
        if translated.query is not None:  # kept as a SQL MV: SKIP, PCT, INCREMENTAL or FULL as AUTO chooses
            return dataclasses.replace(
                _run_python_as_sql(client, project, ds, force, translated.query), source="python"
            )
        refreshed = refresh_python_mv(client, ds.name, df, ds.function, force, ds.partition_by, translated.reason)
    finally:
        for view in bound:
            client.spark.catalog.dropTempView(view)
    return DatasetResult(ds.name, "python", refreshed.state, refreshed.mode, refreshed.reason, refreshed.rows)


def _with_schema(ds: Dataset, df: Any) -> Any:
    """``df`` with ``ds``'s declared ``schema=`` applied (:mod:`.python_schema`)."""
    if ds.schema is None:
        return df
    from sparkmv.pipeline.python_schema import apply_schema

    return apply_schema(df, ds.schema, ds.name.display)


def _bound_tables(project: Project, bound: list[str]) -> dict[str, str]:
    """The temporary views of ``bound`` that are sparkmv tables, to their qualified names."""
    tables = {}
    for view in bound:
        name = ObjectName(project.namespace, view.lower())
        ds = project.graph.datasets.get(name)
        if ds is None or ds.kind != TEMPORARY_VIEW:
            tables[view.lower()] = name.qualified
    return tables


def _run_python_as_sql(client: Client, project: Project, ds: Dataset, force: bool, query: str) -> DatasetResult:
    """A Python MV kept as the SQL MV of ``query``; the plain table an earlier run kept it
    as is replaced atomically (:func:`~sparkmv.pipeline.python_mv.replace_plain_table`)."""
    from sparkmv.pipeline.python_mv import replace_plain_table

    with client.runtime.catalog.read() as s:
        known = client.runtime.catalog.objects.find(s, ds.name) is not None
    if known or not client.runtime.iceberg.exists(ds.name):
        return _run_sql_mv(client, project, ds, force, query)
    run = replace_plain_table(client, create_statement(ds.name, ds, query, project.refresh_scheme or "MANUAL"))
    return _sql_result(client, ds, run, "its table replaced by a SQL materialized view of its plan")


def _run_python_table(
    client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]
) -> DatasetResult:
    """A streaming table fed by Python flows (:mod:`.python_stream`) or a sink
    (:mod:`.python_sinks`); ``@dp.table`` whose function returns a batch DataFrame is kept
    as a Python MV."""
    from sparkmv.pipeline.python_mv import refresh_python_mv
    from sparkmv.pipeline.python_sinks import refresh_sink
    from sparkmv.pipeline.python_stream import checkpoint_root, refresh_streaming_table

    bound: list[str] = []
    storage = checkpoint_root(project.spec.storage, project.spec.root)
    try:
        frames, feeds = _flow_frames(client, project, ds, bound, done, storage)
        if ds.kind == SINK:
            refreshed = refresh_sink(client, ds, frames, storage, force, feeds)
        elif ds.function is not None and len(frames) == 1 and not frames[0][1].isStreaming:
            refreshed = refresh_python_mv(client, ds.name, frames[0][1], ds.function, force)
            return DatasetResult(ds.name, "python", refreshed.state, refreshed.mode, refreshed.reason, refreshed.rows)
        else:
            refreshed = refresh_streaming_table(
                client, ds.name, frames, storage, force, ds.partition_by, ds.cluster_by, feeds
            )
    finally:
        for view in bound:
            client.spark.catalog.dropTempView(view)
    return DatasetResult(
        ds.name, "python", refreshed.state, refreshed.mode, refreshed.reason, refreshed.rows, kind=ds.kind
    )


def _flow_frames(
    client: Client, project: Project, ds: Dataset, bound: list[str], done: set[ObjectName], storage: str
) -> tuple[list[tuple[Any, Any]], dict[str, list[Any]]]:
    """Each Python flow's DataFrame (``schema=`` applied), and the feeds of the sparkmv tables
    each reads with ``spark.readStream.table`` (:mod:`.python_feeds`)."""
    from sparkmv.pipeline.python_feeds import feed_directory, streamed_tables
    from sparkmv.pipeline.python_stream import streaming_error

    frames, feeds = [], {}
    for flow in ds.python_flows:
        directory = lambda source, flow=flow: feed_directory(storage, ds.name, flow.name, source)  # noqa: E731
        try:
            with streamed_tables(client, lambda text: _streamed(client, project, text, done), directory) as read:
                frames.append((flow, _with_schema(ds, _call(client, project, ds, bound, done, flow.function))))
            feeds[flow.name] = read
        except _NeedsDataset:
            raise
        except Exception as exc:
            if not _is_user_error(exc):
                raise
            raise streaming_error(flow, exc) from exc
    return frames, feeds


def _streamed(client: Client, project: Project, text: str, done: set[ObjectName]) -> ObjectName | None:
    """The sparkmv table ``spark.readStream.table(text)`` reads (a pipeline dataset or a
    sparkmv table), else None (Spark reads it).

    Raises:
        _NeedsDataset: a pipeline dataset this run has not refreshed yet.
    """
    try:
        name = ObjectName.parse(text.replace("`", ""))
    except Exception:
        return None
    if "." not in text:
        name = ObjectName(project.namespace, name.name)
    ds = project.graph.datasets.get(name)
    if ds is not None and ds.kind in REFRESHED_KINDS:
        if name not in done:
            raise _NeedsDataset(name)
        return name
    return name if ds is None and client.runtime.iceberg.exists(name) else None


def _run_auto_cdc(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
    """A streaming table fed by an AUTO CDC flow (:mod:`.auto_cdc`): its source is a pipeline
    dataset defined in Python (its function's stream) or a table Spark reads as a stream."""
    from sparkmv.pipeline.auto_cdc import refresh_auto_cdc
    from sparkmv.pipeline.python_stream import checkpoint_root

    flow = ds.auto_cdc
    source = project.graph.datasets.get(flow.source)
    bound: list[str] = []
    try:
        if source is not None and (source.function is not None or len(source.python_flows) == 1):
            function = source.function or source.python_flows[0].function
            df = _call(client, project, source, bound, done, function)
        else:
            df = client.spark.readStream.table(flow.source.qualified)
        storage = checkpoint_root(project.spec.storage, project.spec.root)
        refreshed = refresh_auto_cdc(client, ds.name, flow, df, storage, force)
    finally:
        for view in bound:
            client.spark.catalog.dropTempView(view)
    language = "python" if flow.file.suffix == ".py" else "sql"
    return DatasetResult(
        ds.name, language, refreshed.state, refreshed.mode, refreshed.reason, refreshed.rows, kind=ds.kind
    )


def _call(
    client: Client,
    project: Project,
    ds: Dataset,
    bound: list[str],
    done: set[ObjectName],
    function: Callable[[], Any] | None = None,
) -> Any:
    """``ds``'s DataFrame (``function`` or its own function called, or its SQL run), every table
    name Spark cannot resolve bound to a temporary view first (the names bound are added to
    ``bound``; ``done``: the datasets this run has finished with).

    Raises:
        _NeedsDataset: it reads a pipeline MV that this run has not refreshed yet.
    """
    spark = client.spark
    function = function or ds.function
    for _ in range(1000):
        try:
            if function is not None:
                df = function()
            else:
                df = spark.sql(ds.query or "")
            _ = df.schema  # analysed now, so an unknown table surfaces here
            return df
        except Exception as exc:
            missing = _missing_table(exc)
            if missing is None or missing in bound:
                raise
            _bind(client, project, missing, bound, done)
    raise SparkMvError(f"{ds.where}: too many tables read")  # pragma: no cover


def _bind(client: Client, project: Project, view: str, bound: list[str], done: set[ObjectName]) -> None:
    """Bind temporary view ``view`` to a pipeline temporary view or a sparkmv table."""
    name = ObjectName(project.namespace, view.lower())
    ds = project.graph.datasets.get(name)
    if ds is not None and ds.kind == TEMPORARY_VIEW:
        df = _call(client, project, ds, bound, done)
    elif ds is not None and ds.kind in REFRESHED_KINDS and name not in done:
        raise _NeedsDataset(name)
    else:
        df = client.table(name.qualified)
    df.createOrReplaceTempView(view)
    bound.append(view)


def _missing_table(exc: Exception) -> str | None:
    """The one-part table name of Spark's TABLE_OR_VIEW_NOT_FOUND error, else None."""
    condition = getattr(exc, "getCondition", lambda: None)()
    if condition != "TABLE_OR_VIEW_NOT_FOUND":
        return None
    params: dict[str, Any] = getattr(exc, "getMessageParameters", dict)() or {}
    relation = str(params.get("relationName", "")).replace("`", "")
    return relation if relation and "." not in relation else None


def _is_user_error(exc: BaseException) -> bool:
    from sparkmv.storage.spark_log import is_spark_error

    return isinstance(exc, SparkMvError) or is_spark_error(exc)


def _one_line(exc: BaseException) -> str:
    from sparkmv.storage.spark_log import spark_error_line

    return str(exc) if isinstance(exc, SparkMvError) else spark_error_line(exc)
