"""Python datasets of a pipeline run: a Python materialized view (kept as a SQL MV when its
plan translates, else as a plain table), a streaming table fed by Python flows, a sink, an
AUTO CDC table; each query function called with every table name Spark cannot resolve bound
to a temporary view (rules in :mod:`sparkmv.pipeline.run`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import REFRESHED_KINDS, SINK, TEMPORARY_VIEW, Dataset
from sparkmv.pipeline.project import Project
from sparkmv.pipeline.results import DatasetResult, NeedsDataset, is_user_error
from sparkmv.pipeline.sql_datasets import create_statement, run_sql_mv, sql_result

if TYPE_CHECKING:
    from sparkmv.client.client import Client


def run_python_mv(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
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
        return run_sql_mv(client, project, ds, force, query)
    run = replace_plain_table(client, create_statement(ds.name, ds, query, project.refresh_scheme or "MANUAL"))
    return sql_result(client, ds, run, "its table replaced by a SQL materialized view of its plan")


def run_python_table(
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
                client, ds.name, frames, storage, force, ds.partition_by, ds.cluster_by, feeds, ds.expectations
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
        except NeedsDataset:
            raise
        except Exception as exc:
            if not is_user_error(exc):
                raise
            raise streaming_error(flow, exc) from exc
    return frames, feeds


def _streamed(client: Client, project: Project, text: str, done: set[ObjectName]) -> ObjectName | None:
    """The sparkmv table ``spark.readStream.table(text)`` reads (a pipeline dataset or a
    sparkmv table), else None (Spark reads it).

    Raises:
        NeedsDataset: a pipeline dataset this run has not refreshed yet.
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
            raise NeedsDataset(name)
        return name
    return name if ds is None and client.runtime.iceberg.exists(name) else None


def run_auto_cdc(client: Client, project: Project, ds: Dataset, force: bool, done: set[ObjectName]) -> DatasetResult:
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
        NeedsDataset: it reads a pipeline MV that this run has not refreshed yet.
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
        raise NeedsDataset(name)
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
