"""AUTO CDC flows: a change feed applied to a streaming table as SCD type 1 or 2, incrementally.

A flow (``dp.create_auto_cdc_flow`` in Python, ``CREATE FLOW f AS AUTO CDC INTO t FROM
STREAM(s) KEYS (...) ...`` or ``CREATE STREAMING TABLE t FLOW AUTO CDC FROM ...`` in SQL) reads
the change rows of its source as a stream and keeps, per key, what Spark's SDP keeps
(``org.apache.spark.sql.pipelines.autocdc``; sparkmv's own implementation, so it runs on
Spark 4.1 as on 4.3):

- **SCD type 1**: the event with the greatest ``sequence_by`` wins; an upsert wins a tie with a
  delete, and a later-arriving row wins a tie with an applied one (Spark's ``>=`` / ``>``
  merge conditions). A delete (``apply_as_deletes`` true) removes the key and is kept as a
  tombstone, so a late row with a lower sequence stays ignored. Target columns: the selected
  source columns, then ``__spark_autocdc_metadata struct<deleteSequence, upsertSequence>``.
- **SCD type 2**: the events of a key, in sequence order, form runs of consecutive upserts that
  agree on the tracked columns (``track_history_column_list`` / ``..._except_...``, default
  every selected non-key column); each run is one row carrying its last event's values,
  ``__START_AT`` = its first event's sequence, ``__END_AT`` = the sequence of the event that
  ended it (the next run's first upsert or a delete; null while current). A late event is
  placed where its sequence falls (splitting a run when it changes tracked columns). At one
  sequence a delete wins over an upsert. Target columns: the selected source columns,
  ``__START_AT``, ``__END_AT`` (typed as ``sequence_by``), ``__spark_autocdc_metadata
  struct<__RECORD_START_AT>``.

State: the target itself (its metadata column) and a companion Iceberg table
``__spark_autocdc_aux_state_<target>`` (SCD1: tombstones; SCD2: the events no visible row
represents: earlier events of a run and deletes that closed nothing), as Spark keeps.

Incremental and exactly once: the source stream runs as :mod:`.python_stream` runs a flow
(``availableNow``, checkpoint under the spec's storage, each micro-batch staged as Parquet).
A run reads only the staged batches after the one the target's current snapshot records,
recomputes only the keys they touch, rewrites only the target files holding those keys
(copy-on-write) and commits the target in **one** Iceberg snapshot recording the last batch
id; the companion is committed just before, recording the same position, and a run reads the
companion at the snapshot that matches the target's position, so a crash between the two
commits re-applies the batches without duplicating anything.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.python_mv import PythonRefresh, ensure_not_sparkmv_object, table_rows
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructType

    from sparkmv.client.client import Client

META = "__spark_autocdc_metadata"
START_AT = "__START_AT"
END_AT = "__END_AT"
RECORD_START_AT = "__RECORD_START_AT"
RESERVED_PREFIX = "__spark_autocdc_"
AUX_PREFIX = "__spark_autocdc_aux_state_"
_SEQ, _DEL, _PRIO = "__spark_autocdc_seq", "__spark_autocdc_del", "__spark_autocdc_prio"


@dataclass(frozen=True)
class AutoCdcFlow:
    """One AUTO CDC flow as defined (names as written; expressions as Spark SQL text).

    ``scd_type`` is 1 or 2 (1 when not given). ``source`` is a pipeline dataset or a table.
    """

    name: str
    target: ObjectName
    source: ObjectName
    keys: tuple[str, ...]
    sequence_by: str
    file: Path
    line: int = 1
    apply_as_deletes: str | None = None
    column_list: tuple[str, ...] = ()
    except_column_list: tuple[str, ...] = ()
    scd_type: int = 1
    track_history_column_list: tuple[str, ...] = ()
    track_history_except_column_list: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        """``file:line`` for messages."""
        return f"{self.file}:{self.line}"


def check_flow(flow: AutoCdcFlow, located: bool = True) -> None:
    """Refuse a flow whose options contradict each other (Spark's messages), before anything runs.

    Raises:
        SparkMvError: ``<file>:<line>: flow <name>: <Spark's message>`` (without
            ``<file>:<line>: `` unless ``located``) for no keys, both column lists, both
            track-history lists, or track-history options without SCD 2.
    """
    problem = None
    if not flow.keys:
        problem = "AutoCDC requires at least one key column to identify rows, but received an empty key set."
    elif flow.column_list and flow.except_column_list:
        problem = "AutoCDC flow specifies both `column_list` and `except_column_list`; at most one may be provided."
    elif flow.track_history_column_list and flow.track_history_except_column_list:
        problem = (
            "AutoCDC flow specifies both `track_history_column_list` and `track_history_except_column_list`; "
            "at most one may be provided."
        )
    elif flow.scd_type != 2 and (flow.track_history_column_list or flow.track_history_except_column_list):
        problem = (
            "AutoCDC flow specifies `track_history_column_list` or `track_history_except_column_list` but is not "
            "stored as SCD Type 2; history-tracking columns are only supported for SCD Type 2 target tables."
        )
    elif flow.scd_type not in (1, 2):
        problem = f"STORED AS SCD TYPE {flow.scd_type}: only SCD TYPE 1 and 2 are supported"
    if problem:
        raise SparkMvError(f"{flow.where + ': ' if located else ''}flow {flow.name}: {problem}")


def aux_name(target: ObjectName) -> ObjectName:
    """The companion state table of ``target``."""
    return ObjectName(target.namespace, AUX_PREFIX + target.name)


def _select(where: str, schema: list[str], include: tuple[str, ...], exclude: tuple[str, ...], what: str) -> list[str]:
    """``schema`` narrowed by an include or an exclude list (case-insensitive, schema order kept,
    as Spark's ``ColumnSelection``).

    Raises:
        SparkMvError: a listed column is not in ``schema`` (Spark's AUTOCDC_COLUMNS_NOT_FOUND_IN_SCHEMA).
    """
    lower = {c.lower() for c in schema}
    missing = [c for c in (include or exclude) if c.lower() not in lower]
    if missing:
        raise SparkMvError(
            f"{where}: Using case-insensitive column name comparison, the following columns are not present in the "
            f"{what} schema: {', '.join(missing)}. Available columns: {', '.join(schema)}."
        )
    if include:
        wanted = {c.lower() for c in include}
        return [c for c in schema if c.lower() in wanted]
    dropped = {c.lower() for c in exclude}
    return [c for c in schema if c.lower() not in dropped]


@dataclass(frozen=True)
class _Plan:
    flow: AutoCdcFlow
    columns: list[str]  # the selected source columns, source order
    keys: list[str]  # as the source spells them
    tracked: list[str]
    seq_type: DataType
    schema: StructType  # the target's


def _plan(flow: AutoCdcFlow, df: DataFrame) -> _Plan:
    """The target's columns from the source's (rules in the module docstring).

    Raises:
        SparkMvError: unknown listed columns, a key not selected, a reserved column name.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    where = f"{flow.where}: flow {flow.name}"
    source = [f.name for f in df.schema.fields]
    for name in source:
        if name.lower().startswith(RESERVED_PREFIX) or name.upper() in (START_AT, END_AT):
            raise SparkMvError(f"{where}: the column `{name}` of the source collides with a reserved AutoCDC column")
    columns = _select(where, source, flow.column_list, flow.except_column_list, "microbatch")
    by_lower = {c.lower(): c for c in columns}
    for key in flow.keys:
        if key.lower() not in by_lower:
            raise SparkMvError(
                f"{where}: Using case-insensitive column name comparison, the AutoCDC key column `{key}` is not "
                "present in the flow's selected source schema. AutoCDC requires every key column to be present in "
                "the source change-data feed and retained by any configured column selection."
            )
    keys = [by_lower[k.lower()] for k in flow.keys]
    eligible = [c for c in columns if c not in keys]
    tracked = _select(
        where, eligible, flow.track_history_column_list, flow.track_history_except_column_list, "trackHistorySelection"
    )
    seq_type = df.select(F.expr(flow.sequence_by)).schema.fields[0].dataType
    fields = [df.schema[c] for c in columns]
    if flow.scd_type == 2:
        fields += [StructField(START_AT, seq_type), StructField(END_AT, seq_type)]
        meta = StructType([StructField(RECORD_START_AT, seq_type)])
    else:
        meta = StructType([StructField("deleteSequence", seq_type), StructField("upsertSequence", seq_type)])
    fields.append(StructField(META, meta))
    return _Plan(flow, columns, keys, tracked, seq_type, StructType(fields))


def refresh_auto_cdc(
    client: Client, name: ObjectName, flow: AutoCdcFlow, source: DataFrame, checkpoints: str, force: bool
) -> PythonRefresh:
    """Apply the source's new change rows to streaming table ``name`` (module docstring).

    Raises:
        SparkMvError: the source is not a stream; bad columns (nothing is written then); the
            stream failed (the table is unchanged).
        StorageError: a commit failed (the table is unchanged).
    """
    from pyspark.sql import functions as F

    from sparkmv.pipeline.python_stream import StreamState, _run_stream, _staged, _state
    from sparkmv.storage.schema import spark_to_arrow

    if not source.isStreaming:
        raise SparkMvError(
            f"{flow.where}: flow {flow.name}: AutoCDC source dataframe is not streaming. AutoCDC flows are strictly "
            f"streaming flows, and must be backed by a streaming source (read {flow.source.display} as a stream)."
        )
    ensure_not_sparkmv_object(client, name)
    plan = _plan(flow, source)
    store, aux = client.runtime.iceberg, aux_name(name)
    reason = None
    if store.exists(name) and store.load(name).schema().as_arrow().names != plan.schema.fieldNames():
        store.drop_table(name)
        reason = "its columns changed: table recreated"
        force = True
    if force and store.exists(aux):
        store.drop_table(aux)
    if not store.exists(name):
        store.create_table(name, spark_to_arrow(plan.schema), None)
        reason = reason or "created"
    if not store.exists(aux):
        store.create_table(aux, spark_to_arrow(_aux_schema(plan)), None)
    table = store.load(name)
    old = None if force else _state(table)
    state = StreamState(old.epoch if old else uuid.uuid4().hex if force else _uuid(table), {})
    committed = old.batches.get(flow.name, -1) if old else -1
    root = warehouse.join(checkpoints, name.qualified, state.epoch)
    staging = warehouse.join(table.location(), "data", f"cdc-{state.epoch}", flow.name)
    delete = F.coalesce(F.expr(flow.apply_as_deletes), F.lit(False)) if flow.apply_as_deletes else F.lit(False)
    events = source.select(
        *[F.col(f"`{c}`") for c in plan.columns],
        F.expr(flow.sequence_by).cast(plan.seq_type).alias(_SEQ),
        delete.alias(_DEL),
    )
    try:
        _run_stream(events, warehouse.join(root, flow.name), staging, committed, None, ())
    except Exception as exc:
        if reason == "created":
            store.drop_table(name)
            store.drop_table(aux)
        from sparkmv.pipeline.model import PythonFlow
        from sparkmv.pipeline.python_stream import streaming_error

        raise streaming_error(PythonFlow(flow.name, lambda: None, flow.file, flow.line), exc) from exc
    files, last = _staged(staging, committed)
    state.batches[flow.name] = last
    if not files and not force and reason is None:
        return PythonRefresh("SKIPPED", "SKIP", f"flow {flow.name}: no new change rows", table_rows(table))
    from sparkmv.pipeline.auto_cdc_apply import apply_changes

    changed = apply_changes(client, plan_view(plan), name, aux, files, old, state, force)
    rows = table_rows(store.load(name))
    mode = "FULL" if force or reason else "INCREMENTAL"
    why = reason or ("full refresh requested" if force else f"{changed} keys changed")
    return PythonRefresh("SUCCESS", mode, f"flow {flow.name} (SCD type {flow.scd_type}): {why}", rows)


def _uuid(table: Any) -> str:
    return str(table.metadata.table_uuid).replace("-", "")


def _aux_schema(plan: _Plan) -> StructType:
    from pyspark.sql.types import StructType

    if plan.flow.scd_type == 2:
        return plan.schema
    return StructType([plan.schema[k] for k in plan.keys] + [plan.schema[META]])


@dataclass(frozen=True)
class PlanView:
    """What :mod:`.auto_cdc_apply` needs of a flow's plan."""

    scd_type: int
    columns: list[str]
    keys: list[str]
    tracked: list[str]
    seq_type: Any
    schema: Any
    aux_schema: Any


def plan_view(plan: _Plan) -> PlanView:
    """The plan's columns and types for :func:`sparkmv.pipeline.auto_cdc_apply.apply_changes`."""
    return PlanView(
        plan.flow.scd_type, plan.columns, plan.keys, plan.tracked, plan.seq_type, plan.schema, _aux_schema(plan)
    )


def column_text(col: Any, where: str) -> str:
    """The Spark SQL text of a flow's column argument: a name or SQL text (``str``), pyspark's
    Connect column made from one (what ``dp.create_auto_cdc_flow`` passes on), or a classic
    ``Column``.

    Raises:
        SparkMvError: any other object.
    """
    if isinstance(col, str):
        return col
    inner = getattr(col, "_expr", None)
    if inner is not None and hasattr(inner, "_unparsed_identifier"):
        return str(inner._unparsed_identifier)
    if inner is not None and isinstance(getattr(inner, "_expr", None), str):
        return str(inner._expr)
    jc = getattr(col, "_jc", None)
    if jc is not None:
        return str(jc.expr().sql())
    raise SparkMvError(f"{where}: cannot read the column {col!r} (give a column name or SQL text)")


def from_pyspark(cdc: Any, file: Path, line: int, name_of: Any) -> AutoCdcFlow:
    """The flow pyspark's ``AutoCdcFlow`` (``dp.create_auto_cdc_flow``) describes; ``name_of``
    qualifies a dataset name.

    Raises:
        SparkMvError: as :func:`check_flow`, or a column argument sparkmv cannot read.
    """
    where = f"{file}:{line}"

    def names(cols: Any) -> tuple[str, ...]:
        return tuple(column_text(c, where) for c in cols or ())

    scd = cdc.stored_as_scd_type
    flow = AutoCdcFlow(
        name=cdc.name or cdc.target,
        target=name_of(cdc.target),
        source=name_of(cdc.source),
        keys=names(cdc.keys),
        sequence_by=column_text(cdc.sequence_by, where),
        file=file,
        line=line,
        apply_as_deletes=column_text(cdc.apply_as_deletes, where) if cdc.apply_as_deletes is not None else None,
        column_list=names(cdc.column_list),
        except_column_list=names(cdc.except_column_list),
        scd_type=int(scd) if scd is not None else 1,
        track_history_column_list=names(cdc.track_history_column_list),
        track_history_except_column_list=names(cdc.track_history_except_column_list),
    )
    check_flow(flow)
    return flow
