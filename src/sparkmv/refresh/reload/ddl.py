"""CREATE TABLE ... PRIMARY KEY ... WITH (connector = ...): refreshable tables.

Creates two Iceberg tables and one catalog row:

* ``name``: the declared columns plus ``_vnode int`` (``pmod(xxhash64(pk...), vnode_count)``),
  identity-partitioned on ``_vnode``; empty until the first ``REFRESH TABLE``.
* ``name__changelog``: ``op string``, the declared columns, ``run_id bigint``,
  ``sign int``; unpartitioned, append-only (the changelog format below).
* an ``smv_objects`` row of kind ``REFRESHABLE_TABLE`` whose ``options`` hold the source.

Every validation error is raised before anything is created.

The changelog format. Each change of a refresh run is written with its retraction, as
RisingWave's Insert / UpdateDelete / UpdateInsert / Delete and Flink's +I / -U / +U / -D:

======  ===========================================================  =====
``op``  declared columns                                             sign
======  ===========================================================  =====
``I``   the inserted row                                             +1
``UB``  update-before: the row's OLD values (every declared column)  -1
``U``   update: the row's NEW values                                 +1
``D``   the deleted row's OLD values (every declared column)         -1
======  ===========================================================  =====

Every ``U`` has its ``UB`` in the same run (same ``run_id``, same key). So for any run,
the rows of that run weighted by ``sign`` sum to exactly (table after) minus (table
before) as multisets of declared-column rows; rows within a run have no order. A run's
``rows_updated`` counts one per update (not two rows). A run's rows are committed to the
changelog in one Iceberg snapshot, tagged with the run id.

Migration: changelog tables created before ``sign`` existed (``op`` ``I``/``U``/``D``,
deletes with NULL values) gain an optional ``sign int`` column at their next reload
(:func:`sparkmv.refresh.jobs.reload.ensure_changelog_sign`, before the run's rows are
committed); their older rows keep their values and read ``sign`` NULL (and have no
``UB`` rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql.types import (
    ByteType,
    CharType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    VarcharType,
)

from sparkmv.catalog import ObjectKind
from sparkmv.errors import AnalysisError, InvalidPropertyError, ObjectExistsError
from sparkmv.names import ObjectName
from sparkmv.refresh.reload.options import (
    CHANGELOG_COLUMNS,
    SIGN_COLUMN,
    VNODE_COLUMN,
    Column,
    TableDef,
    changelog_name,
    parse_with_options,
)
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.schema import schema_to_json, spark_to_arrow


class ColumnSpec(Protocol):
    """A declared column: name, Spark SQL type, NOT NULL."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def not_null(self) -> bool: ...


class CreateRefreshableTable(Protocol):
    """What ``CREATE TABLE name (cols, PRIMARY KEY (...)) [ON CONFLICT ...] WITH (...)`` declares
    (the parsed statement, :class:`sparkmv.sql.statements.CreateRefreshableTable`, has this shape;
    the refresh layer does not import statement types)."""

    @property
    def name(self) -> ObjectName: ...
    @property
    def columns(self) -> Sequence[ColumnSpec]: ...
    @property
    def primary_key(self) -> Sequence[str]: ...
    @property
    def on_conflict(self) -> str: ...
    @property
    def options(self) -> Mapping[str, str]: ...
    @property
    def if_not_exists(self) -> bool: ...


def _iceberg_type(dtype: DataType) -> DataType:
    """Iceberg has no 8/16-bit integers and no char/varchar: widen them."""
    if isinstance(dtype, ByteType | ShortType):
        return IntegerType()
    if isinstance(dtype, CharType | VarcharType):
        return StringType()
    return dtype


def declared_schema(rt: Runtime, stmt: CreateRefreshableTable) -> StructType:
    """The Spark schema of the declared columns (types checked by Spark's DDL parser).

    Raises:
        AnalysisError: for a type Spark does not know.
    """
    from pyspark.sql.types import _parse_datatype_string

    rt.spark  # noqa: B018 - the DDL parser needs the JVM
    fields = []
    for col in stmt.columns:
        try:
            dtype = _parse_datatype_string(col.type)
        except Exception as exc:
            raise AnalysisError(f"Table '{stmt.name}': unknown type '{col.type}' for column '{col.name}'") from exc
        fields.append(StructField(col.name, _iceberg_type(dtype), True))
    return StructType(fields)


def _check_columns(stmt: CreateRefreshableTable) -> None:
    name = stmt.name
    if not stmt.columns:
        raise AnalysisError(f"Table '{name}' has no columns")
    seen: set[str] = set()
    for col in stmt.columns:
        if col.name in seen:
            raise AnalysisError(f"Table '{name}': duplicate column '{col.name}'")
        if col.name.startswith("_vnode") or col.name.startswith("__smv"):
            raise AnalysisError(f"Table '{name}': column name '{col.name}' is reserved")
        if col.name in CHANGELOG_COLUMNS:
            raise AnalysisError(f"Table '{name}': column name '{col.name}' is reserved for the changelog")
        seen.add(col.name)
    if not stmt.primary_key:
        raise AnalysisError(f"Table '{name}' has no primary key: a refreshable table needs PRIMARY KEY (column, ...)")
    if len(set(stmt.primary_key)) != len(stmt.primary_key):
        raise AnalysisError(f"Table '{name}': a column appears twice in the primary key")
    for key in stmt.primary_key:
        if key not in seen:
            raise AnalysisError(f"Table '{name}': primary key column '{key}' is not a declared column")


def table_schema(schema: StructType) -> pa.Schema:
    """Arrow schema of the table: declared columns plus ``_vnode int``."""
    return spark_to_arrow(StructType([*schema.fields, StructField(VNODE_COLUMN, IntegerType(), True)]))


def changelog_schema(schema: StructType) -> pa.Schema:
    """Arrow schema of the changelog: ``op``, declared columns, ``run_id``, ``sign``."""
    fields = [
        StructField("op", StringType(), True),
        *schema.fields,
        StructField("run_id", LongType(), True),
        StructField(SIGN_COLUMN, IntegerType(), True),
    ]
    return spark_to_arrow(StructType(fields))


def create_refreshable_table(rt: Runtime, stmt: CreateRefreshableTable) -> str:
    """Create a refreshable table (empty until its first refresh).

    Returns:
        A message: ``created table 'x' (refreshable from files, 64 vnodes)``.

    Raises:
        ObjectExistsError: when the name (or ``name__changelog``) is taken, unless IF NOT EXISTS.
        AnalysisError: no primary key, unknown key column, duplicate or reserved column,
            unknown type.
        InvalidPropertyError: invalid WITH options (see :func:`parse_with_options`).
    """
    name = stmt.name
    _check_columns(stmt)
    options = parse_with_options(name.display, dict(stmt.options))
    with rt.catalog.transaction() as s:
        known = rt.catalog.objects.find(s, name) is not None
    if known or rt.iceberg.exists(name):
        if stmt.if_not_exists:
            return f"table '{name}' already exists"
        raise ObjectExistsError(f"'{name}' already exists")
    log_name = changelog_name(name)
    if rt.iceberg.exists(log_name):
        raise ObjectExistsError(f"'{log_name}' already exists (it would be the changelog of '{name}')")
    schema = declared_schema(rt, stmt)
    tdef = TableDef(
        0,
        name,
        [
            Column(c.name, f.dataType.simpleString(), c.not_null or c.name in stmt.primary_key)
            for c, f in zip(stmt.columns, schema.fields, strict=True)
        ],
        list(stmt.primary_key),
        stmt.on_conflict.upper(),
        options,
    )
    rt.iceberg.create_table(name, table_schema(schema), VNODE_COLUMN)
    try:
        rt.iceberg.create_table(log_name, changelog_schema(schema), None)
        with rt.catalog.transaction() as s:
            rt.catalog.objects.insert(
                s,
                name,
                ObjectKind.REFRESHABLE_TABLE,
                location=options.get("path") or options.get("url"),
                format=options.get("format") or options.get("connector"),
                schema_json=schema_to_json(schema),
                partition_columns=[VNODE_COLUMN],
                options=tdef.to_options(),
            )
    except Exception:
        rt.iceberg.drop_table(name)
        rt.iceberg.drop_table(log_name)
        raise
    return f"created table '{name}'{_describe(options)}"


def _describe(options: dict[str, Any]) -> str:
    if options.get("refresh_mode") != "FULL_RELOAD":
        return ""
    return f" (refreshable from {options['connector']}, {options['vnode_count']} vnodes)"


__all__ = ["InvalidPropertyError", "changelog_schema", "create_refreshable_table", "table_schema"]
