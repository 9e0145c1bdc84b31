"""DDL: creating, altering and dropping external tables, refreshable tables and materialized views.

The one implementation of DDL, called by the client's statement dispatch. It needs no Spark
import of its own: a query's output schema comes from :func:`sparkmv.refresh.analyze.query_schema`.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime
from typing import Any

import pyarrow as pa
from sqlalchemy.orm import Session

from sparkmv.analysis.expectations import check_expectations, row_level
from sparkmv.analysis.ivm import IvmAnalysis
from sparkmv.analysis.query import parse_query, referenced_tables
from sparkmv.catalog import ObjectKind, RefreshState
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import (
    AnalysisError,
    BusyError,
    ObjectExistsError,
    ObjectNotFoundError,
    SparkMvError,
)
from sparkmv.names import HIDDEN_COLUMN_PREFIX, ObjectName
from sparkmv.refresh.analyze import query_schema, run_select
from sparkmv.refresh.properties import MvProperties, validate
from sparkmv.refresh.reload.ddl import create_refreshable_table
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources import delta, files, parquet
from sparkmv.sql.statements import (
    AlterMaterializedView,
    CreateExternalTable,
    CreateMaterializedView,
    CreateRefreshableTable,
    DropObject,
    RefreshScheme,
)

log = logging.getLogger("sparkmv.ddl")


def _exists(rt: Runtime, name: ObjectName) -> bool:
    if name.catalog:  # a table of an external catalog
        from sparkmv.services.catalogs import check_external_table

        try:
            check_external_table(rt, name)
        except AnalysisError:
            return False
        return True
    # Never call pyiceberg inside a catalog transaction: on SQLite both share one lock.
    with rt.catalog.read() as s:
        known = rt.catalog.objects.find(s, name) is not None
    return known or rt.iceberg.exists(name)


def create_external_table(rt: Runtime, stmt: CreateExternalTable) -> str:
    """Register a directory of (Hive-partitioned) Parquet, CSV, JSON or ORC files, or a
    Delta Lake table, as a base table (its schema read once, now, and stored).

    Raises:
        ObjectExistsError: when the name is taken (unless IF NOT EXISTS).
        SourceError: when LOCATION does not exist, holds no data of the format, is not a
            Delta table, or uses a Delta reader feature sparkmv cannot read.
        SparkMvError: for an unknown format, or OPTIONS on a format that takes none.
    """
    fmt = stmt.format
    if fmt not in EXTERNAL_FORMATS:
        raise SparkMvError(
            f"cannot create external table '{stmt.name}': unknown format {fmt!r} (USING {' | '.join(EXTERNAL_FORMATS)})"
        )
    if stmt.options and fmt not in files.FORMATS:
        raise SparkMvError(
            f"cannot create external table '{stmt.name}': OPTIONS are Spark reader options of "
            f"USING csv, json or orc, not of {fmt}"
        )
    if _exists(rt, stmt.name):
        if stmt.if_not_exists:
            return f"table '{stmt.name}' already exists"
        raise ObjectExistsError(f"'{stmt.name}' already exists")
    schema_json, partition_columns = _discover(rt, stmt)
    with rt.catalog.transaction() as s:
        rt.catalog.objects.insert(
            s,
            stmt.name,
            ObjectKind.EXTERNAL_TABLE,
            location=str(stmt.location),
            format=fmt,
            schema_json=schema_json,
            partition_columns=partition_columns,
            options={"read_options": dict(stmt.options)} if stmt.options else {},
        )
    parts = f" partitioned by {', '.join(partition_columns)}" if partition_columns else ""
    kind = "" if fmt == "parquet" else f" ({fmt})"
    return f"created external table '{stmt.name}'{kind}{parts}"


EXTERNAL_FORMATS = ("parquet", *files.FORMATS, "delta")
"""The formats of ``CREATE EXTERNAL TABLE ... USING <format>``."""


def _discover(rt: Runtime, stmt: CreateExternalTable) -> tuple[str, list[str]]:
    """Schema JSON and partition columns of an external table's data (checked before Spark
    starts where possible: a bad LOCATION fails in a second)."""
    if stmt.format == "delta":
        return delta.discover(str(stmt.name), stmt.location)
    if stmt.format in files.FORMATS:
        files.check_location(stmt.location, stmt.format)
        return files.discover(rt.spark, stmt.location, stmt.format, stmt.options)
    parquet.check_location(stmt.location)
    return parquet.discover(rt.spark, stmt.location)


def create_table(rt: Runtime, stmt: CreateRefreshableTable) -> str:
    """``CREATE TABLE ... PRIMARY KEY ... WITH (...)``: a refreshable table (see
    :func:`sparkmv.refresh.reload.ddl.create_refreshable_table` for what is created and raised)."""
    return create_refreshable_table(rt, stmt)


def _check_dependencies(rt: Runtime, mv: ObjectName, bases: list[ObjectName]) -> None:
    for base in bases:
        if base == mv:
            raise AnalysisError(f"materialized view '{mv}' cannot read itself")
        if base.namespace == "sparkmv" and not base.catalog:
            raise AnalysisError(f"materialized view '{mv}' cannot read system table '{base.qualified}'")
        if base.catalog:
            from sparkmv.services.catalogs import check_external_table

            check_external_table(rt, base)
        elif not _exists(rt, base):
            raise AnalysisError(f"table or view '{base}' does not exist")
    from sparkmv.scheduler.dag import check_no_cycle

    with rt.catalog.read() as s:
        rows = rt.catalog.objects.list(s)
        deps = {ObjectName(r.namespace, r.name).qualified: list(r.base_tables or []) for r in rows}
    check_no_cycle(
        mv.qualified, [b.qualified for b in bases], deps, lambda q: ObjectName.parse(q, allow_reserved=True).display
    )


def create_materialized_view(rt: Runtime, stmt: CreateMaterializedView, checked_as: ObjectName | None = None) -> str:
    """Analyse the query in Spark, create the MV's Iceberg table and catalog row.

    ``checked_as``: the name the query's dependencies are checked for (reading itself, a
    cycle) when that is not ``stmt.name``: the MV a hidden replacement is built for.

    Raises:
        ObjectExistsError: when the name is taken (unless IF NOT EXISTS).
        AnalysisError: unknown table/column, type errors, PARTITION BY not produced.
        InvalidPropertyError: bad property.
    """
    props = validate(stmt.properties)
    MvProperties.parse(props)
    if _exists(rt, stmt.name):
        if stmt.if_not_exists:
            return f"materialized view '{stmt.name}' already exists"
        raise ObjectExistsError(f"'{stmt.name}' already exists")
    query = parse_query(stmt.query)
    bases = referenced_tables(query)
    _check_dependencies(rt, checked_as or stmt.name, bases)
    query, stmt, known = _qualified_when_maintained(rt, stmt, query)
    schema = query_schema(rt, stmt.query)
    columns = [f.name.lower() for f in schema]
    if stmt.partition_by is not None and stmt.partition_by not in columns:
        raise AnalysisError(
            f"PARTITION BY column '{stmt.partition_by}' is not produced by the query (columns: {', '.join(columns)})"
        )
    partition_by = next((f.name for f in schema if f.name.lower() == stmt.partition_by), None)
    from sparkmv.analysis.incremental import analyze_incremental

    analysis = analyze_incremental(query, known)
    if stmt.expectations:
        _check_expectations(rt, stmt)
        analysis = row_level(analysis, query, known)
    schema = _with_state_columns(rt, stmt, props, analysis, schema)
    schema = _partition_type(rt, stmt, query, bases, schema, partition_by)
    if props.get("partition_retention_condition"):
        from sparkmv.refresh.retention import check_condition_in

        check_condition_in(rt.spark, props["partition_retention_condition"], partition_by, schema)
    rt.iceberg.create_table(stmt.name, schema, partition_by, _cluster_columns(analysis, schema, partition_by))
    try:
        with rt.catalog.transaction() as s:
            rt.catalog.objects.insert(
                s,
                stmt.name,
                ObjectKind.MATERIALIZED_VIEW,
                definition=stmt.query,
                partition_by=partition_by,
                base_tables=[b.qualified for b in bases],
                properties=props,
                refresh_scheme=stmt.refresh.text,
                schedule_start=stmt.refresh.start,
                schedule_every_seconds=stmt.refresh.every_seconds,
                next_fire_time=first_fire_time(stmt.refresh),
                options={"expectations": [e.to_json() for e in stmt.expectations]} if stmt.expectations else {},
            )
    except Exception:
        rt.iceberg.drop_table(stmt.name)
        raise
    return f"created materialized view '{stmt.name}'"


def _check_expectations(rt: Runtime, stmt: CreateMaterializedView) -> None:
    """Refuse expectations that are not deterministic boolean conditions over the query's
    output row (:func:`~sparkmv.analysis.expectations.check_expectations`; their types by
    Spark, over empty inputs).

    Raises:
        AnalysisError: ``expectation 'e' of 'mv' ...``: a problem of the condition, an
            unknown column, or a type other than BOOLEAN.
    """
    check_expectations(str(stmt.name), stmt.expectations)
    for e in stmt.expectations:
        try:
            df = run_select(rt, f"SELECT ({e.condition}) AS c FROM ({stmt.query}) AS __smv_q", schema_only=True)
        except AnalysisError as exc:
            raise AnalysisError(f"expectation '{e.name}' of '{stmt.name}' does not analyse: {exc}") from exc
        kind = df.schema.fields[0].dataType.simpleString()
        if kind != "boolean":
            raise AnalysisError(
                f"expectation '{e.name}' of '{stmt.name}' must be a deterministic boolean over the row: "
                f"{e.condition!r} is of type {kind.upper()}"
            )


def _cluster_columns(analysis: IvmAnalysis, schema: pa.Schema, partition_by: str | None) -> list[str]:
    """The MV table's sort order: the key columns incremental refresh rewrites by
    (``analysis``'s :attr:`~sparkmv.analysis.ivm.IvmAnalysis.key_columns`) other than the
    partition column, as the schema spells them; empty when the query has none."""
    by_name = {f.name.lower(): f.name for f in schema}
    keys = [k for k in analysis.key_columns if k != (partition_by or "").lower()]
    return [by_name[k] for k in keys if k in by_name]


def _with_state_columns(
    rt: Runtime, stmt: CreateMaterializedView, props: dict[str, str], analysis: IvmAnalysis, schema: pa.Schema
) -> pa.Schema:
    """The MV table's schema with the hidden state columns incremental refresh needs (an
    aggregate's row count, the sum and count behind AVG, non-NULL counts behind SUM), when
    the query can be maintained incrementally and the MV may be refreshed incrementally:
    an MV with ``refresh_mode = 'FULL'`` or ``'PCT'`` keeps none, so its refresh computes
    exactly its query (the state aggregates cost a FULL refresh of TPC-H Q1 about 15 % more
    Spark CPU, bench/RESULTS.md "Machinery tax"). Made AUTO or INCREMENTAL later, such an
    MV is maintained by affected-key recomputation where the query allows it
    (:func:`~sparkmv.analysis.incremental.analyze_for_table`); query rewrite rolls its AVG
    up only from a visible SUM and COUNT of the same argument.

    Raises:
        AnalysisError: ``refresh_mode = 'INCREMENTAL'`` for a query that cannot be maintained
            incrementally (with the reason), or an output column named like a hidden one.
    """
    from sparkmv.names import is_hidden_column

    hidden = [f.name for f in schema if is_hidden_column(f.name)]
    if hidden:
        raise AnalysisError(f"column name '{hidden[0]}' is reserved: names starting with '__smv_' are hidden state")
    if analysis.reason is not None:
        if props.get("refresh_mode") == "INCREMENTAL":
            raise AnalysisError(
                f"materialized view '{stmt.name}' cannot use refresh_mode = 'INCREMENTAL': {analysis.reason}"
            )
        return schema
    if not analysis.aggregate or MvProperties.parse(props).refresh_mode in ("FULL", "PCT"):
        return schema
    return query_schema(rt, analysis.augmented_sql)


def _qualified_when_maintained(
    rt: Runtime, stmt: CreateMaterializedView, query: Any
) -> tuple[Any, Any, dict[str, list[str]] | None]:
    """The defining query as stored: as written, unless incremental refresh maintains it
    only once resolved against its base tables (an outer join's sides, TPC-H Q13; a derived
    table of unqualified columns under a join), then resolved
    (:func:`~sparkmv.analysis.qualify.qualify_unqualified`), so every later analysis of the
    stored definition, and the full refresh, agree; with the base tables' columns
    (qualified name -> names) when the delta rules do not maintain the query as written (a
    correlated subquery's columns are told apart by them; a query the delta rules maintain
    only resolved is analyzed with them at each refresh), else None."""
    from sparkmv.analysis.incremental import analyze_incremental
    from sparkmv.analysis.qualify import qualify_unqualified
    from sparkmv.analysis.query import DIALECT
    from sparkmv.refresh.analyze import base_dataframe

    written = analyze_incremental(query)
    if written.reason is None and written.keyed is None:
        return query, stmt, None
    columns = {b.qualified: base_dataframe(rt, b, empty=True).columns for b in referenced_tables(query)}
    if written.reason is None:  # kept as written: the analysis with ``columns`` resolves it
        return query, stmt, columns
    qualified = qualify_unqualified(query, columns)
    if qualified == query or analyze_incremental(qualified).reason is not None:
        return query, stmt, columns
    return qualified, dataclasses.replace(stmt, query=qualified.sql(DIALECT)), columns


def check_incremental_mode(rt: Runtime, name: ObjectName, props: dict[str, str]) -> None:
    """Refuse ``refresh_mode = 'INCREMENTAL'`` by ALTER for an MV whose query cannot be
    maintained incrementally, or whose table lacks the hidden state columns (created
    before incremental refresh existed).

    Raises:
        AnalysisError: with the reason; nothing is changed.
    """
    if props.get("refresh_mode") != "INCREMENTAL":
        return
    from sparkmv.analysis.incremental import analyze_for_table
    from sparkmv.refresh.incremental.decide import has_state_columns

    with rt.catalog.read() as s:
        definition = rt.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW).definition or ""
    table_columns = [f.name for f in rt.iceberg.load(name).schema().fields]
    analysis = analyze_for_table(parse_query(definition), table_columns)
    reason = analysis.reason
    if reason is None and analysis.aggregate and not has_state_columns(rt.iceberg, name, analysis):
        reason = (
            "its table has no incremental state columns (created with refresh_mode = 'FULL' or 'PCT', "
            "or before incremental refresh); recreate it"
        )
    if reason is not None:
        raise AnalysisError(f"materialized view '{name}' cannot use refresh_mode = 'INCREMENTAL': {reason}")


def _partition_type(
    rt: Runtime,
    stmt: CreateMaterializedView,
    query: Any,
    bases: list[ObjectName],
    schema: pa.Schema,
    partition_by: str | None,
) -> pa.Schema:
    """The MV table's schema: a TIMESTAMP partition column derived only from columns
    without time zone (``date_trunc('WEEK', dt)`` of a DATE) is stored without time zone
    (Iceberg ``timestamp``, Spark ``TIMESTAMP_NTZ``)."""
    from sparkmv.refresh.context import MvDefinition, partition_without_zone

    index = schema.get_field_index(partition_by) if partition_by else -1
    if index < 0:
        return schema
    field = schema.field(index)
    if not pa.types.is_timestamp(field.type) or field.type.tz is None:
        return schema
    mv = MvDefinition(0, stmt.name, query, partition_by, bases, MvProperties())
    if not partition_without_zone(rt.catalog, rt.iceberg, mv):
        return schema
    return schema.set(index, pa.field(field.name, pa.timestamp(field.type.unit), field.nullable))


def first_fire_time(scheme: RefreshScheme) -> datetime | None:
    """First fire time of a scheduled scheme set now (None when not scheduled)."""
    from sparkmv.scheduler.due import initial_fire_time

    if scheme.every_seconds is None:
        return None
    return initial_fire_time(scheme.start, scheme.every_seconds, utcnow())


def drop_object(rt: Runtime, stmt: DropObject) -> str:
    """Drop an MV (its Iceberg table and data) or unregister a table (never its data).

    Raises:
        ObjectNotFoundError: when it does not exist (unless IF EXISTS), or the kind differs.
        BusyError: when the object is being refreshed.
        AnalysisError: when another MV reads it.
    """
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.find(s, stmt.name)
        if row is None:
            if stmt.if_exists:
                return f"'{stmt.name}' does not exist"
            what = "materialized view" if stmt.materialized_view else "table"
            raise ObjectNotFoundError(f"{what} '{stmt.name}' does not exist")
        is_mv = row.kind == ObjectKind.MATERIALIZED_VIEW
        if is_mv != stmt.materialized_view:
            hint = "DROP MATERIALIZED VIEW" if is_mv else "DROP TABLE"
            raise ObjectNotFoundError(f"'{stmt.name}' is a {'materialized view' if is_mv else 'table'}; use {hint}")
        if row.state != RefreshState.IDLE:
            raise BusyError(
                f"cannot drop '{stmt.name}': it is being refreshed (state {row.state}, run {row.current_run_id})"
            )
        rt.catalog.objects.delete(s, row)
        _mark_dependents_inactive(rt, s, stmt.name)
    if row.kind != ObjectKind.EXTERNAL_TABLE:
        rt.iceberg.drop_table(stmt.name)
        rt.iceberg.drop_table(ObjectName(stmt.name.namespace, stmt.name.name + "__changelog"))
    if is_mv:
        from sparkmv.refresh.vacuum import drop_retired
        from sparkmv.services.leftovers import drop_leftovers

        drop_leftovers(rt, stmt.name)
        drop_retired(rt, lambda _owner: None, stmt.name)  # its replaced tables, kept for readers
    return f"dropped '{stmt.name}'"


def _mark_dependents_inactive(rt: Runtime, s: object, name: ObjectName) -> None:
    """Inactivity propagates down the MV graph: readers of ``name`` and their readers."""
    rt.catalog.objects.deactivate_readers(s, name.qualified, f"base table '{name}' was dropped")  # type: ignore[arg-type]


def _check_retention(rt: Runtime, name: ObjectName, props: dict[str, str]) -> None:
    """Refuse a ``partition_retention_condition`` Spark cannot evaluate on the MV's
    partition column (before anything is changed)."""
    condition = props.get("partition_retention_condition")
    if not condition:
        return
    from sparkmv.refresh.retention import check_condition_in

    with rt.catalog.read() as s:
        partition_by = rt.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW).partition_by
    check_condition_in(rt.spark, condition, partition_by, rt.iceberg.load(name).schema().as_arrow())


def alter_materialized_view(rt: Runtime, stmt: AlterMaterializedView) -> str:
    """Apply one ALTER action.

    Raises:
        ObjectNotFoundError, InvalidPropertyError, AnalysisError (re-activation failed).
    """
    if stmt.set_properties is not None:
        _check_retention(rt, stmt.name, validate(stmt.set_properties))
        check_incremental_mode(rt, stmt.name, validate(stmt.set_properties))
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, stmt.name, ObjectKind.MATERIALIZED_VIEW)
        done = _alter_row(rt, s, row, stmt)
        if done is not None:
            return done
        definition, base_tables, object_id = row.definition or "", list(row.base_tables or []), row.id
    return _reactivate(rt, stmt.name, definition, base_tables, object_id)


def _alter_row(rt: Runtime, s: Session, row: ObjectRow, stmt: AlterMaterializedView) -> str | None:
    """Apply an ALTER action that only changes the MV's row (every one but ACTIVE) in
    transaction ``s``; the message to print, or None for ACTIVE."""
    if stmt.set_properties is not None:
        merged = {**(row.properties or {}), **validate(stmt.set_properties)}
        MvProperties.parse(merged)
        rt.catalog.objects.set_fields(s, row.id, properties=merged)
        return f"altered materialized view '{stmt.name}'"
    if stmt.refresh is not None:
        rt.catalog.objects.set_fields(
            s,
            row.id,
            refresh_scheme=stmt.refresh.text,
            schedule_start=stmt.refresh.start,
            schedule_every_seconds=stmt.refresh.every_seconds,
            next_fire_time=first_fire_time(stmt.refresh),
        )
        return f"materialized view '{stmt.name}' now refreshes {stmt.refresh.text}"
    if stmt.resume_schedule:
        rt.catalog.objects.set_fields(s, row.id, suspended=False, consecutive_failures=0, refresh_state_reason=None)
        return f"schedule of '{stmt.name}' resumed"
    if stmt.active is False:
        rt.catalog.objects.set_fields(s, row.id, is_active=False, inactive_reason="set inactive by user")
        rt.catalog.objects.deactivate_readers(s, stmt.name.qualified, "set inactive by user")
        return f"materialized view '{stmt.name}' is inactive"
    return None


def _reactivate(rt: Runtime, name: ObjectName, definition: str, base_tables: list[str], object_id: int) -> str:
    """ALTER ... ACTIVE: re-analyse the MV and, when its query still fits its table, make it
    active with its version map and positions forgotten (the next refresh is a full one).

    Raises:
        AnalysisError: an input MV is inactive, or the re-analysis failed.
    """
    # Reactivation works top-down: every input MV must be active first.
    from sparkmv.refresh.context import inactive_inputs

    inactive = inactive_inputs(rt.catalog, [ObjectName.parse(b, allow_reserved=True) for b in base_tables])
    if inactive:
        raise AnalysisError(
            f"cannot activate '{name}': its input materialized view {inactive[0]} is inactive; activate that one first"
        )
    reason = _activation_problem(rt, name, definition, base_tables)
    with rt.catalog.transaction() as s:
        if reason is not None:
            raise AnalysisError(f"cannot activate '{name}': {reason}")
        # Forget the version map and positions: the next refresh is a full one.
        rt.catalog.versions.apply(s, object_id, 0, [], [], replace_all=True)
        rt.catalog.positions.clear(s, object_id)
        rt.catalog.objects.set_fields(
            s, object_id, is_active=True, inactive_reason=None, last_success_run_id=None, updated_at=utcnow()
        )
    return f"materialized view '{name}' is active; the next refresh is a full refresh"


def _activation_problem(rt: Runtime, name: ObjectName, definition: str, base_tables: list[str]) -> str | None:
    """Why the MV cannot be re-activated against its base tables as they are now (a
    missing base table, a schema problem, changed output columns), or None."""
    try:
        for base in base_tables:
            if not _exists(rt, ObjectName.parse(base, allow_reserved=True)):
                raise AnalysisError(f"base table '{base}' does not exist")
        from sparkmv.refresh.context import pin_all, schema_problem

        bases = [ObjectName.parse(b, allow_reserved=True) for b in base_tables]
        problem = next((p for p in map(schema_problem, pin_all(rt.catalog, rt.iceberg, bases).values()) if p), None)
        if problem is not None:
            raise AnalysisError(problem)
        new_schema = query_schema(rt, definition)
        table_schema = rt.iceberg.load(name).schema().as_arrow()
        visible = [f.name.lower() for f in table_schema if not f.name.lower().startswith(HIDDEN_COLUMN_PREFIX)]
        if [f.name.lower() for f in new_schema] != visible:
            raise AnalysisError("the query's output columns changed")
    except SparkMvError as exc:
        return str(exc)
    return None
