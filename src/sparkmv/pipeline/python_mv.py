"""Python materialized views: a query function's DataFrame kept as an Iceberg table.

sparkmv's MVs are SQL queries it analyses. A DataFrame whose plan translates exactly to SQL
over sparkmv's tables (:mod:`sparkmv.pipeline.python_plan`) is kept as an ordinary SQL MV with
that query (by :mod:`sparkmv.pipeline.run`, refreshed by SKIP, PCT, INCREMENTAL or FULL as AUTO
chooses; a plain table it replaces, :func:`replace_plain_table`, is swapped out atomically).
Any other Python materialized view is stored as a plain Iceberg table of sparkmv's catalog — a
base table any SQL MV (of the pipeline or not) can read, incrementally too, like any Iceberg
table — by the rule below (an MV that an earlier run made of it is replaced atomically by
the table, as when its columns change).

Refresh rule (sound, never partial): the function is called, its DataFrame's **input
fingerprint** is computed — the analyzed plan's text (expression ids removed), the query
function's source, and every input file of the plan with its size and modification time
(``DataFrame.inputFiles()``: an Iceberg base's data files, which never change in place; a
file directory's files) — and compared with the one stored in the summary of the table's
current snapshot (``sparkmv.pipeline.inputs``). Equal: SKIPPED. Different, a forced refresh,
or an input that is not a file (a plan that is not deterministic, or holds driver-side rows:
``LocalRelation``, ``LogicalRDD``): FULL. A FULL refresh writes the whole result as new Parquet
files under the table's location and commits them in one Iceberg snapshot that replaces every
old file: readers see the old or the new contents, never an empty or partial table. When the
DataFrame's columns or the partition column (``partition_cols``) changed, the result is
written to a new table under a hidden name
(:func:`sparkmv.names.replacement_name`) and swapped in by one catalog transaction
(:func:`sparkmv.storage.iceberg_swap.point_name_at`, as ``CREATE OR REPLACE MATERIALIZED VIEW``
swaps a SQL MV): readers see the old table, then the new one, never no table; the old table is
retired, not deleted (``sparkmv vacuum`` drops it after 24 hours).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.python_expect import expectations_of_function
from sparkmv.refresh.expectations import ExpectationCheck
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkmv.client.client import Client

FINGERPRINT_PROPERTY = "sparkmv.pipeline.inputs"
WHY_NOT_INCREMENTAL = (
    "recomputed whole: PCT and INCREMENTAL need a SQL query sparkmv analyses, not a DataFrame's plan "
    "(define it in SQL, or read it from a SQL materialized view, to refresh it incrementally)"
)
"""Why a Python MV whose input changed is recomputed, not refreshed by PCT or INCREMENTAL,
when no other reason is known (printed in the run's report)."""
_EXPR_ID = re.compile(r"#\d+L?")
_NOT_FILES = ("LocalRelation", "LogicalRDD", "ExternalRDD")


@dataclass(frozen=True)
class PythonRefresh:
    """What one refresh of a Python MV did: state SUCCESS or SKIPPED, mode FULL or SKIP,
    reason, rows (of the table after the run)."""

    state: str
    mode: str
    reason: str
    rows: int | None


def ensure_not_sparkmv_object(client: Client, name: ObjectName) -> None:
    """Refuse a Python dataset named as a sparkmv object (an MV or table sparkmv maintains).

    Raises:
        SparkMvError: ``<name> is already a sparkmv object that is not a Python dataset``.
    """
    with client.runtime.catalog.read() as s:
        if client.runtime.catalog.objects.find(s, name) is not None:
            raise SparkMvError(f"{name.display} is already a sparkmv object that is not a Python dataset")


def fingerprint(df: DataFrame, function: Any) -> tuple[str, str | None]:
    """The input fingerprint of ``df`` and, when the inputs are not only files, why it can
    never be trusted (then the MV is always recomputed). The expectations ``function``
    carries (``@dp.expect...``) are part of it: changing them recomputes the MV."""
    digest = hashlib.sha256()
    untrusted: str | None = None
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        analyzed = jdf.queryExecution().analyzed()
        plan = analyzed.toString()
        if not analyzed.deterministic():
            untrusted = "the plan is not deterministic"
        elif any(kind in plan for kind in _NOT_FILES):
            untrusted = "the plan reads rows made on the driver, not files"
    else:  # Spark Connect: no plan object; the schema and the files only
        plan = df.schema.json()
    digest.update(_EXPR_ID.sub("", plan).encode())
    try:
        digest.update(inspect.getsource(function).encode())
    except (OSError, TypeError):
        digest.update(repr(function).encode())
    expectations = expectations_of_function(function)
    if expectations:  # none: the fingerprint of a dataset without expectations stays as it was
        digest.update(json.dumps([e.to_json() for e in expectations]).encode())
    for path in sorted(df.inputFiles()):
        info = warehouse.stat(path)
        digest.update(f"\n{path} {info.size} {info.mtime_ns}".encode())
    return digest.hexdigest(), untrusted


def refresh_python_mv(
    client: Client,
    name: ObjectName,
    df: DataFrame,
    function: Any,
    force: bool,
    partition_by: str | None = None,
    why: str | None = None,
) -> PythonRefresh:
    """Refresh Python MV ``name`` from ``df`` (the rule is in the module docstring);
    ``partition_by``: the table's identity partition column (``partition_cols``), one file
    per value; ``why``: why it is not kept as a SQL MV (the reason of a FULL refresh), else
    :data:`WHY_NOT_INCREMENTAL`.

    Raises:
        SparkMvError: the name is taken by another sparkmv object (not a materialized view),
            the DataFrame is streaming, or ``partition_by`` is not one of its columns.
        BusyError: the materialized view it replaces is being refreshed.
        StorageError: the commit failed (the table is unchanged).
    """
    store = client.runtime.iceberg
    was_mv = _materialized_view_id(client, name)
    if was_mv is None:
        ensure_not_sparkmv_object(client, name)
    if df.isStreaming:
        raise SparkMvError(
            f"{name.display}: Materialized views may only be defined by a batch relation, but the flow {name.name} "
            f"attempts to write a streaming relation to the materialized view {name.display} (a streaming "
            "DataFrame feeds a streaming table: @dp.table or @dp.append_flow)"
        )
    from sparkmv.storage.schema import normalize_for_iceberg, spark_to_arrow

    if partition_by and partition_by not in [c.lower() for c in df.columns]:
        raise SparkMvError(
            f"{name.display}: partition column {partition_by!r} is not a column of its DataFrame "
            f"(columns: {', '.join(df.columns)})"
        )
    df = normalize_for_iceberg(df)
    fp, untrusted = fingerprint(df, function)
    schema = spark_to_arrow(df.schema)
    check = ExpectationCheck(name.display, expectations_of_function(function))
    reason = "created"
    recomputed = f"recomputed whole: {why}" if why else WHY_NOT_INCREMENTAL
    if was_mv is not None:
        head = f"no longer kept as a SQL materialized view ({why or 'its plan is not translatable'})"
        return _recorded(
            client, name, check, _replace_table(client, name, df, schema, fp, partition_by, head, was_mv, check)
        )
    if store.exists(name):
        table = store.load(name)
        current = table.current_snapshot()
        stored = current.summary.get(FINGERPRINT_PROPERTY) if current and current.summary else None
        if table.schema().as_arrow().names != schema.names:
            return _recorded(
                client,
                name,
                check,
                _replace_table(client, name, df, schema, fp, partition_by, "its columns changed", None, check),
            )
        if store.partition_column(table) != partition_by:
            why_replaced = "its partition column changed"
            return _recorded(
                client,
                name,
                check,
                _replace_table(client, name, df, schema, fp, partition_by, why_replaced, None, check),
            )
        if force:
            reason = "full refresh requested"
        elif untrusted:
            reason = f"recomputed on every run: {untrusted}"
        elif stored == fp:
            return PythonRefresh(
                "SKIPPED", "SKIP", "no input changed (same plan, code and input files)", table_rows(table)
            )
        else:
            reason = f"an input changed (plan, code or input files); {recomputed}"
    if not store.exists(name):
        store.create_table(name, schema, partition_by)
    table = store.load(name)
    files = _write(df, warehouse.join(table.location(), "data", f"pipeline-{uuid.uuid4().hex}"), partition_by, check)
    store.publish(name, 0, files, None, extra_properties={FINGERPRINT_PROPERTY: fp})
    return _recorded(client, name, check, PythonRefresh("SUCCESS", "FULL", reason, table_rows(store.load(name))))


def _recorded(client: Client, name: ObjectName, check: ExpectationCheck, refreshed: PythonRefresh) -> PythonRefresh:
    """Store the expectations' results of a refresh that wrote ``name`` (no run id: the
    table is kept outside the run lifecycle) with their events; ``refreshed`` unchanged."""
    if check:
        from sparkmv.refresh import run_events

        catalog = client.runtime.catalog
        with catalog.transaction() as s:
            run_events.expectations(s, catalog, name, None, check.results())
    return refreshed


def _replace_table(
    client: Client,
    name: ObjectName,
    df: DataFrame,
    schema: Any,
    fp: str,
    partition_by: str | None,
    why: str,
    mv_id: int | None = None,
    check: ExpectationCheck | None = None,
) -> PythonRefresh:
    """Write ``df`` (Arrow ``schema``, partitioned by ``partition_by``) as a new table under a
    hidden name and swap it in for Python MV ``name`` in one catalog transaction; the old
    table is retired (dropped by ``sparkmv vacuum`` after 24 hours). ``mv_id``: ``name`` is
    that sparkmv MV (kept so by an earlier run), whose object row the same transaction
    deletes (compare-and-set on its state IDLE). A write or swap that fails drops the hidden
    table: ``name`` is left as it was. ``why``: the reason's head.

    Raises:
        StorageError: the write or the swap failed (another writer committed to ``name``).
        BusyError: MV ``mv_id`` is being refreshed (or was dropped) at the swap.
    """
    from sparkmv.names import replacement_name
    from sparkmv.services.leftovers import drop_leftovers
    from sparkmv.storage.iceberg_swap import point_name_at, retirement

    store = client.runtime.iceberg
    drop_leftovers(client.runtime, name)  # a replacement left behind by a process that died
    hidden = replacement_name(name, uuid.uuid4().hex[:8])
    store.create_table(hidden, schema, partition_by)
    try:
        location = store.load(hidden).location()
        files = _write(df, warehouse.join(location, "data", f"pipeline-{uuid.uuid4().hex}"), partition_by, check)
        store.publish(hidden, 0, files, None, extra_properties={FINGERPRINT_PROPERTY: fp})
        replaces = mv_id is not None or store.exists(name)  # not in the transaction: pyiceberg would wait on its lock
        with client.runtime.catalog.transaction() as s:
            if mv_id is not None:
                _delete_idle_mv(s, client, mv_id, name)
            point_name_at(s, name, hidden, replaces_table=replaces, retire_as=retirement(name))
    except BaseException:
        store.drop_table(hidden)
        raise
    return PythonRefresh("SUCCESS", "FULL", f"{why}: table replaced atomically", table_rows(store.load(name)))


def _materialized_view_id(client: Client, name: ObjectName) -> int | None:
    """The id of sparkmv MV ``name`` (None when ``name`` is no MV)."""
    from sparkmv.catalog import ObjectKind

    with client.runtime.catalog.read() as s:
        row = client.runtime.catalog.objects.find(s, name)
        return row.id if row is not None and row.kind == ObjectKind.MATERIALIZED_VIEW else None


def _delete_idle_mv(session: Any, client: Client, mv_id: int, name: ObjectName) -> None:
    """Delete MV ``mv_id``'s object row (its runs, version map, positions) in the caller's
    transaction, if it is still IDLE.

    Raises:
        BusyError: it is being refreshed or was dropped.
    """
    from sparkmv.catalog import RefreshState
    from sparkmv.catalog.objects import busy_message
    from sparkmv.errors import BusyError

    row = client.runtime.catalog.objects.find(session, name)
    if row is None or row.id != mv_id:
        raise BusyError(f"'{name}' was dropped or replaced meanwhile")
    if row.state != RefreshState.IDLE:
        raise BusyError(f"cannot replace '{name}': {busy_message(row)}")
    client.runtime.catalog.objects.delete(session, row)


def replace_plain_table(client: Client, statement: str) -> Any:
    """Run ``CREATE OR REPLACE MATERIALIZED VIEW`` ``statement`` over the plain Iceberg table
    of a Python MV that is now kept as a SQL MV: built hidden, then swapped in by one catalog
    transaction (:func:`sparkmv.services.replace.replace_materialized_view`); the table is
    retired. Returns the build run (:class:`~sparkmv.refresh.result.RefreshRun`; not swapped
    in when it FAILED or was CANCELLED).

    Raises:
        BusyError: a replacement of it is being built.
        AnalysisError: sparkmv refuses the query.
    """
    from sparkmv.services.replace import replace_materialized_view
    from sparkmv.sql.parser import parse_statement
    from sparkmv.sql.statements import CreateMaterializedView

    stmt = parse_statement(statement)
    assert isinstance(stmt, CreateMaterializedView) and stmt.or_replace, statement
    return replace_materialized_view(client.runtime, stmt, plain_table=True).run


def _write(
    df: DataFrame, directory: str, partition_by: str | None = None, check: ExpectationCheck | None = None
) -> list[str]:
    """Write ``df`` as Parquet files into ``directory`` (one file per value of
    ``partition_by``, the column kept inside the files); their locations. ``check``: the
    dataset's expectations, applied to the rows written.

    Raises:
        ExpectationFailedError: a ``fail`` expectation saw a violating row (nothing kept).
    """
    if check:
        df = check.apply(df)
    if partition_by:
        from sparkmv.storage.files import write_staged

        files = sorted(write_staged(df, directory, partition_by).files)
    else:
        df.write.mode("errorifexists").parquet(warehouse.spark_path(directory))
        files = sorted(f.path for f in warehouse.list_files(directory) if f.name.endswith(".parquet"))
    if check:
        try:
            check.detail()
        except BaseException:
            warehouse.remove_tree(directory)
            raise
    return files


def table_rows(table: Any) -> int | None:
    """Rows of the Iceberg table's current snapshot (its summary's ``total-records``; 0
    without a snapshot)."""
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return 0
    total = snap.summary.get("total-records")
    return int(total) if total is not None else None
