"""Python streaming tables: Spark streams appended to an Iceberg table, each row once.

A streaming table fed by Python flows (``@dp.table`` returning ``spark.readStream...``,
``dp.create_streaming_table`` + ``@dp.append_flow``) is a plain Iceberg table of sparkmv's
catalog, like a Python materialized view (:mod:`.python_mv`): any SQL MV can read it, and
incrementally, since a run only appends.

One run, per flow: its streaming DataFrame runs with Structured Streaming,
``foreachBatch`` + ``trigger(availableNow=True)`` (every row available when the run starts,
then stop), with its own checkpoint under the spec's ``storage``:
``<storage>/_checkpoints/<database>.<table>/<epoch>/<flow>``. Each micro-batch is written as
Parquet files to ``<table location>/data/stream-<epoch>/<flow>/batch-<id>`` (overwritten
when Spark replays the batch after a crash). When every flow has stopped, the new batches of
every flow are committed to the table in **one** Iceberg append whose snapshot summary
records, per flow, the last batch id committed (``sparkmv.stream.flow.<flow>``) and the epoch
(``sparkmv.stream.epoch``): readers see all of the run's rows or none. Exactly once: a batch
is in the checkpoint before it is committed, a batch id at or below the recorded one is never
written or committed again, and batches staged by a run that died before its commit are
committed by the next run.

- No new input (no batch ran, none left staged): SKIPPED.
- ``--full-refresh`` (or a change of the table's columns): a new epoch (fresh checkpoints,
  every source read from its start) whose rows replace every file of the table in one
  ``overwrite`` commit (when the columns changed the table is dropped and created again, as
  for a Python MV); the old epoch's checkpoints are deleted after the commit.
- A flow added later starts from the start of its source (as in ``spark-pipelines``); a
  flow removed keeps its rows; a flow's code changed keeps its checkpoint.
- A flow that fails: the table is unchanged (a table this run created is dropped with its
  checkpoints); the batches the other flows staged are committed by the next run.
- A flow returning a batch DataFrame is refused with ``spark-pipelines``' own text.

Readable as streams here: Spark's file sources (``spark.readStream.format("json" | "parquet"
| "csv" | "orc" | "text").schema(...).load(dir)``), the other built-in ones (``rate``), and
``spark.readStream.table(t)`` of a pipeline dataset or sparkmv table (its new rows, through a
feed: :mod:`.python_feeds`). A table of another catalog read so is refused with a message
naming the flow's file:line.

``partition_cols`` (one column) makes the table identity-partitioned by it (each batch written
one file per value, the column kept inside the files); ``cluster_by`` is the table's sort
order (a layout hint: each batch's files sorted by it). A change of either builds the table
again, as a change of its columns does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkmv.analysis.expectations import Expectation
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import PythonFlow
from sparkmv.pipeline.python_mv import PythonRefresh, ensure_not_sparkmv_object, table_rows
from sparkmv.refresh.expectations import ExpectationCheck
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkmv.client.client import Client
    from sparkmv.pipeline.python_feeds import Feed

EPOCH_PROPERTY = "sparkmv.stream.epoch"
FLOW_PROPERTY = "sparkmv.stream.flow."
STREAM_SOURCES = (
    'sparkmv reads streams from files (spark.readStream.format("json"|"parquet"|"csv"|"orc"|"text")'
    ".schema(...).load(dir)) and Spark's built-in sources; this Spark has no Iceberg or Delta streaming "
    "source (read a table with spark.read.table in a materialized view)"
)


@dataclass(frozen=True)
class StreamState:
    """What a streaming table has consumed: the epoch of its checkpoints and, per flow, the
    last micro-batch id committed (-1: none)."""

    epoch: str
    batches: dict[str, int]

    def properties(self) -> dict[str, str]:
        """The snapshot summary properties recording this state."""
        return {EPOCH_PROPERTY: self.epoch, **{FLOW_PROPERTY + f: str(b) for f, b in self.batches.items()}}


def checkpoint_root(storage: str, spec_root: Path) -> str:
    """``<storage>/_checkpoints`` (a relative ``storage`` is read from the spec's folder)."""
    base = storage if warehouse.is_url(storage) or Path(storage).is_absolute() else str(spec_root / storage)
    return warehouse.join(base, "_checkpoints")


def streaming_error(flow: PythonFlow, exc: BaseException) -> SparkMvError:
    """The message of a flow whose function failed or whose DataFrame cannot run as a stream:
    ``<file>:<line>: flow <name>: <Spark's line>`` plus, for a source Spark cannot stream here,
    :data:`STREAM_SOURCES`."""
    from sparkmv.storage.spark_log import spark_error_line

    text = str(exc) if isinstance(exc, SparkMvError) else spark_error_line(exc)
    condition = getattr(exc, "getCondition", lambda: None)()
    if condition == "_LEGACY_ERROR_TEMP_1008":
        text = f"spark.readStream.table reads a table that is not a stream here: {STREAM_SOURCES}"
    elif "DATA_SOURCE_NOT_FOUND" in text:
        text = f"{text}; {STREAM_SOURCES}"
    return SparkMvError(f"{flow.where}: flow {flow.name}: {text}")


def refresh_streaming_table(
    client: Client,
    name: ObjectName,
    frames: list[tuple[PythonFlow, DataFrame]],
    checkpoints: str,
    force: bool,
    partition_by: str | None = None,
    sort: Sequence[str] = (),
    feeds: Mapping[str, list[Feed]] | None = None,
    expectations: Sequence[Expectation] = (),
) -> PythonRefresh:
    """Append the new rows of every flow's stream to streaming table ``name`` (rules in the
    module docstring); ``checkpoints``: :func:`checkpoint_root`; ``partition_by``: its
    partition column, ``sort``: its sort columns; ``feeds``: per flow, the feeds its stream
    reads (exported before the flow runs); ``expectations``: applied to each micro-batch
    (:class:`~sparkmv.refresh.expectations.ExpectationCheck`; counted over the new rows).

    Raises:
        SparkMvError: the name is another sparkmv object; a flow returns a batch DataFrame;
            flows give one column two types (:mod:`.flow_schema`); a recorded checkpoint is
            missing; a stream failed (``<file>:<line>: flow <name>: ...``; the table is unchanged).
        StorageError: the commit failed (the table is unchanged).
    """
    from sparkmv.storage.schema import normalize_for_iceberg, spark_to_arrow

    ensure_not_sparkmv_object(client, name)
    store = client.runtime.iceberg
    frames = [(flow, normalize_for_iceberg(_streaming(name, flow, df))) for flow, df in frames]
    schema, frames = _by_name(name, frames)
    columns = [f.name for f in schema.fields]
    if partition_by and partition_by not in [c.lower() for c in columns]:
        raise SparkMvError(
            f"{frames[0][0].where}: partition column {partition_by!r} is not a column of streaming table "
            f"{name.display} (columns: {', '.join(columns)})"
        )
    reason = None
    if store.exists(name) and _layout(store, name) != (columns, partition_by, list(sort)):
        _drop(client, name, checkpoints)
        reason = "its columns or layout changed: table recreated"
    if not store.exists(name):
        store.create_table(name, spark_to_arrow(schema), partition_by, sort)
        reason = reason or "created"
    table = store.load(name)
    old = _state(table)
    if force:
        state = StreamState(uuid.uuid4().hex, {})  # fresh checkpoints: every source from its start
    elif old is not None:
        state = StreamState(old.epoch, dict(old.batches))
    else:  # never committed: the table's own epoch, so a first run that died before its commit is resumed
        state = StreamState(str(table.metadata.table_uuid).replace("-", ""), {})
    root = warehouse.join(checkpoints, name.qualified, state.epoch)
    staged: dict[str, list[str]] = {}
    check = ExpectationCheck(name.display, expectations)
    for flow, df in frames:
        committed = state.batches.get(flow.name, -1)
        checkpoint = warehouse.join(root, flow.name)
        if committed >= 0 and not warehouse.exists(checkpoint):
            raise SparkMvError(
                f"{flow.where}: flow {flow.name}: its checkpoint {checkpoint} is missing (its rows up to "
                f"batch {committed} are in {name.display}): run with --full-refresh {name.name}"
            )
        staging = warehouse.join(table.location(), "data", f"stream-{state.epoch}", flow.name)
        try:
            for feed in (feeds or {}).get(flow.name, []):
                feed.export(client, force or reason is not None or old is None)
            selected = df.select(*[f"`{c}`" for c in columns])
            _run_stream(selected, checkpoint, staging, committed, partition_by, sort, check)
        except Exception as exc:
            if reason is not None:  # created by this run: left as it was before, no table
                _drop(client, name, checkpoints)
            raise streaming_error(flow, exc) from exc
        staged[flow.name], state.batches[flow.name] = _staged(staging, committed)
    refreshed = _commit(client, name, state, staged, force, checkpoints, reason)
    if check:
        from sparkmv.refresh import run_events

        with client.runtime.catalog.transaction() as s:
            run_events.expectations(s, client.runtime.catalog, name, None, check.results())
    return refreshed


def _streaming(name: ObjectName, flow: PythonFlow, df: DataFrame) -> DataFrame:
    if not df.isStreaming:
        raise SparkMvError(
            f"{flow.where}: flow {flow.name}: Streaming tables may only be defined by streaming relations, but the "
            f"flow {flow.name} attempts to write a batch relation to the streaming table {name.display} "
            "(return spark.readStream...; or define a @dp.materialized_view)"
        )
    return df


def _by_name(
    name: ObjectName, frames: list[tuple[PythonFlow, DataFrame]]
) -> tuple[Any, list[tuple[PythonFlow, DataFrame]]]:
    """The table's schema (a ``StructType``) inferred from its flows' as Spark's SDP infers it
    (:mod:`.flow_schema`), and each flow's DataFrame giving those columns in order (a column
    it lacks NULL)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    from sparkmv.pipeline.flow_schema import merged_columns

    given = [(flow.where, flow.name, list(df.schema.fields)) for flow, df in frames]
    columns = merged_columns(name.display, given)
    out = []
    for flow, df in frames:
        have = {f.name.lower(): f.name for f in df.schema.fields}
        picked = [
            F.col(f"`{have[c.name.lower()]}`").alias(c.name)
            if c.name.lower() in have
            else F.lit(None).cast(c.data_type).alias(c.name)
            for c in columns
        ]
        out.append((flow, df.select(*picked)))
    return StructType([StructField(c.name, c.data_type, c.nullable) for c in columns]), out


def _state(table: Any) -> StreamState | None:
    """The state recorded by the newest snapshot (of the current one's ancestry) that has one."""
    snap = table.current_snapshot()
    while snap is not None:
        summary = snap.summary.additional_properties if snap.summary is not None else {}
        if EPOCH_PROPERTY in summary:
            batches = {k[len(FLOW_PROPERTY) :]: int(v) for k, v in summary.items() if k.startswith(FLOW_PROPERTY)}
            return StreamState(summary[EPOCH_PROPERTY], batches)
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return None


def _layout(store: Any, name: ObjectName) -> tuple[list[str], str | None, list[str]]:
    """The table's columns, partition column and sort columns."""
    table = store.load(name)
    return table.schema().as_arrow().names, store.partition_column(table), list(store.sort_columns(table))


def _run_stream(
    df: DataFrame,
    checkpoint: str,
    staging: str,
    committed: int,
    partition_by: str | None,
    sort: Sequence[str],
    check: ExpectationCheck | None = None,
) -> None:
    """Run ``df`` until every row available now is processed; each micro-batch written as
    Parquet to ``<staging>/batch-<id>`` (batch ids at or below ``committed`` are skipped),
    one file per value of ``partition_by``, sorted by ``sort``; ``check``: expectations
    applied to each batch (a ``fail`` violation fails the stream at that batch)."""
    from sparkmv.storage.files import write_staged

    spark_staging = warehouse.spark_path(staging)

    def write_batch(batch: DataFrame, batch_id: int) -> None:  # runs on the driver (or Connect's server)
        if batch_id <= committed:
            return
        if check:
            batch = check.apply(batch)
        if partition_by or sort:
            write_staged(batch, warehouse.join(staging, f"batch-{batch_id}"), partition_by, cluster_by=sort)
        else:
            batch.write.mode("overwrite").parquet(f"{spark_staging}/batch-{batch_id}")
        if check:
            check.detail()

    run_available_now(df, write_batch, checkpoint)


def run_available_now(df: DataFrame, write_batch: Callable[[DataFrame, int], None], checkpoint: str) -> None:
    """Run stream ``df`` over the rows available now, then stop (``trigger(availableNow=True)``),
    each micro-batch handed to ``write_batch(batch, batch_id)``, progress in ``checkpoint``.

    Raises:
        StreamingQueryException: when a batch fails (the checkpoint keeps the last good one).
    """
    query = (
        df.writeStream.foreachBatch(write_batch)
        .trigger(availableNow=True)
        .option("checkpointLocation", warehouse.spark_path(checkpoint))
        .start()
    )
    query.awaitTermination()


def _staged(staging: str, committed: int) -> tuple[list[str], int]:
    """The Parquet files of the batches staged after ``committed``, and the last batch id."""
    files: list[str] = []
    last = committed
    for entry in warehouse.list_dir(staging):
        if not entry.name.startswith("batch-") or not entry.name[6:].isdigit() or int(entry.name[6:]) <= committed:
            continue
        last = max(last, int(entry.name[6:]))
        found = warehouse.list_files(warehouse.join(staging, entry.name))
        files += sorted(f.path for f in found if f.name.endswith(".parquet") and not f.name.startswith((".", "_")))
    return files, last


def _commit(
    client: Client,
    name: ObjectName,
    state: StreamState,
    staged: dict[str, list[str]],
    force: bool,
    checkpoints: str,
    reason: str | None,
) -> PythonRefresh:
    """One Iceberg commit of every flow's new files (replacing every file on a full refresh)."""
    store = client.runtime.iceberg
    files = [f for fs in staged.values() for f in fs]
    flows = ", ".join(staged)
    if not files and not force and not reason:
        return PythonRefresh("SKIPPED", "SKIP", f"flows {flows}: no new input", table_rows(store.load(name)))
    before = 0 if force else table_rows(store.load(name)) or 0
    store.publish(name, 0, files, None if force else [], extra_properties=state.properties())
    if force:  # the other epochs' checkpoints are no longer used
        for entry in warehouse.list_dir(warehouse.join(checkpoints, name.qualified)):
            if entry.name != state.epoch:
                warehouse.remove_tree(warehouse.join(checkpoints, name.qualified, entry.name))
    rows = table_rows(store.load(name))
    counts = ", ".join(f"{f} {_rows_of(fs)}" for f, fs in staged.items())
    if force or reason:
        why = reason or "full refresh requested"
        return PythonRefresh("SUCCESS", "FULL", f"flows {flows}: {why}: every source read from its start", rows)
    appended = (rows or 0) - before
    return PythonRefresh("SUCCESS", "INCREMENTAL", f"flows {flows}: appended {appended} rows ({counts})", rows)


def _rows_of(files: list[str]) -> int:
    return sum(int(warehouse.parquet_metadata(f).num_rows) for f in files)


def _drop(client: Client, name: ObjectName, checkpoints: str) -> None:
    """Drop the table and every checkpoint of it (its columns changed: built again)."""
    client.runtime.iceberg.drop_table(name)
    warehouse.remove_tree(warehouse.join(checkpoints, name.qualified))
