"""Applying staged change rows to an AUTO CDC target: the keys they touch recomputed, the files
holding those keys rewritten, the companion state table and the target committed
(rules in :mod:`sparkmv.pipeline.auto_cdc`).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from sparkmv.names import ObjectName
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from sparkmv.client.client import Client
    from sparkmv.pipeline.auto_cdc import PlanView
    from sparkmv.pipeline.python_stream import StreamState

_SEQ, _DEL, _PRIO = "__spark_autocdc_seq", "__spark_autocdc_del", "__spark_autocdc_prio"
_FILE = "__spark_autocdc_file"
META, START_AT, END_AT, RECORD_START_AT = "__spark_autocdc_metadata", "__START_AT", "__END_AT", "__RECORD_START_AT"


def apply_changes(
    client: Client,
    pv: PlanView,
    name: ObjectName,
    aux: ObjectName,
    files: list[str],
    old: StreamState | None,
    state: StreamState,
    force: bool,
) -> int:
    """Apply the change rows of Parquet ``files`` to target ``name`` and companion ``aux``,
    read at the position ``old`` (None: empty); commit both recording ``state``.

    Returns:
        The number of keys the change rows touched.

    Raises:
        StorageError: a commit failed (the target is then unchanged).
    """
    from pyspark.sql import functions as F

    from sparkmv.storage.files import read_files

    spark, store = client.spark, client.runtime.iceberg
    table = store.load(name)
    target_files = [] if force or old is None else [f.path for f in store.data_files(table)]
    aux_files = [] if force or old is None else _aux_files(store, aux, old)
    target = read_files(spark, target_files, pv.schema).withColumn(_FILE, F.input_file_name())
    state_rows = read_files(spark, aux_files, pv.aux_schema)
    new = read_files(spark, files, _event_schema(pv)).withColumn(_PRIO, F.lit(1))
    touched = new.select(*[F.col(f"`{k}`") for k in pv.keys]).distinct().cache()
    affected = target.join(touched, pv.keys, "left_semi")
    read_as = [str(r[0]) for r in affected.select(_FILE).distinct().collect()]  # as Spark names them
    old_files = {_path(p) for p in read_as}
    old_aux = state_rows.join(touched, pv.keys, "left_semi")
    events = _events_of(pv, affected.drop(_FILE), old_aux).unionByName(new)
    rows, aux_rows = _scd2(pv, events) if pv.scd_type == 2 else _scd1(pv, events)
    kept = target.where(F.col(_FILE).isin(read_as) if read_as else F.lit(False))
    kept = kept.drop(_FILE).join(touched, pv.keys, "left_anti")
    out = kept.select(*_cols(pv.schema.fieldNames())).unionByName(rows)
    aux_out = state_rows.join(touched, pv.keys, "left_anti").unionByName(aux_rows)
    aux_written = _write(aux_out, store.load(aux).location(), state.epoch)
    store.publish(aux, 0, aux_written, None, extra_properties=state.properties())
    written = _write(out, table.location(), state.epoch)
    replaced = [] if force else _raw(target_files, old_files)
    store.publish(name, 0, written, None if force else [], extra_properties=state.properties(), replace_files=replaced)
    count = int(touched.count())
    touched.unpersist()
    return count


def _cols(names: list[str]) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.col(f"`{n}`") for n in names]


def _event_schema(pv: PlanView) -> Any:
    from pyspark.sql.types import BooleanType, StructField, StructType

    fields = [pv.schema[c] for c in pv.columns]
    return StructType([*fields, StructField(_SEQ, pv.seq_type), StructField(_DEL, BooleanType())])


def _path(uri: str) -> str:
    return unquote(urlparse(uri).path) if "://" in uri or uri.startswith("file:") else uri


def _raw(listed: list[str], wanted: set[str]) -> list[str]:
    """The paths of ``listed`` (as the snapshot lists them) whose plain path is in ``wanted``."""
    return [p for p in listed if _path(p) in wanted]


def _aux_files(store: Any, aux: ObjectName, old: StreamState) -> list[str]:
    """The companion's files at its snapshot recording position ``old`` (the target's)."""
    table = store.load(aux)
    want = old.properties()
    snap = table.current_snapshot()
    while snap is not None:
        summary = snap.summary.additional_properties if snap.summary is not None else {}
        if all(summary.get(k) == v for k, v in want.items()):
            return [f.path for f in store.data_files(table, snap.snapshot_id)]
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return []


def _write(df: DataFrame, location: str, epoch: str) -> list[str]:
    """``df`` written as Parquet under ``<location>/data/cdc-<epoch>/<uuid>``; its files."""
    out = warehouse.join(location, "data", f"cdc-{epoch}", uuid.uuid4().hex)
    df.write.mode("overwrite").parquet(warehouse.spark_path(out))
    found = warehouse.list_files(out)
    return sorted(f.path for f in found if f.name.endswith(".parquet") and not f.name.startswith((".", "_")))


def _events_of(pv: PlanView, target: DataFrame, aux: DataFrame) -> DataFrame:
    """The events the stored state represents, as change rows (``_PRIO`` 0)."""
    from pyspark.sql import functions as F

    user = _cols(pv.columns)
    if pv.scd_type == 1:
        upserts = target.select(*user, F.col(f"{META}.upsertSequence").alias(_SEQ), F.lit(False).alias(_DEL))
        nulls = [F.lit(None).cast(pv.schema[c].dataType).alias(c) for c in pv.columns if c not in pv.keys]
        tombs = aux.select(
            *_cols(pv.keys), *nulls, F.col(f"{META}.deleteSequence").alias(_SEQ), F.lit(True).alias(_DEL)
        ).select(*user, _SEQ, _DEL)
        return upserts.unionByName(tombs).withColumn(_PRIO, F.lit(0))
    record = F.col(f"{META}.{RECORD_START_AT}")
    upserts = target.select(*user, record.alias(_SEQ), F.lit(False).alias(_DEL))
    # a row closed at a sequence where no row of its key starts was closed by a delete
    starts = target.select(*_cols(pv.keys), F.col(START_AT).alias(_SEQ))
    closes = target.where(F.col(END_AT).isNotNull()).select(*user, F.col(END_AT).alias(_SEQ), F.lit(True).alias(_DEL))
    closes = closes.join(starts, [*pv.keys, _SEQ], "left_anti").select(*user, _SEQ, _DEL)
    tomb = F.col(END_AT).isNotNull()
    stored = aux.select(*user, record.alias(_SEQ), tomb.alias(_DEL))
    return upserts.unionByName(closes).unionByName(stored).withColumn(_PRIO, F.lit(0))


def _scd1(pv: PlanView, events: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Per key the winning event: greatest sequence, an upsert before a delete, the newer
    row before an applied one. Target rows for upserts, tombstones for deletes."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*_cols(pv.keys)).orderBy(F.col(_SEQ).desc(), F.col(_DEL).asc(), F.col(_PRIO).desc())
    won = events.withColumn("__rank", F.row_number().over(order)).where("__rank = 1")
    seq_null = F.lit(None).cast(pv.seq_type)
    rows = won.where(~F.col(_DEL)).select(
        *_cols(pv.columns), F.struct(seq_null.alias("deleteSequence"), F.col(_SEQ).alias("upsertSequence")).alias(META)
    )
    tombs = won.where(F.col(_DEL)).select(
        *_cols(pv.keys), F.struct(F.col(_SEQ).alias("deleteSequence"), seq_null.alias("upsertSequence")).alias(META)
    )
    return rows, tombs


def _scd2(pv: PlanView, events: DataFrame) -> tuple[DataFrame, DataFrame]:
    """Per key, the events in sequence order cut into runs (module docstring of
    :mod:`.auto_cdc`): the last event of each run is a target row, the others and the deletes
    that follow no upsert are companion rows."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = _cols(pv.keys)
    same = Window.partitionBy(*keys, F.col(_SEQ)).orderBy(F.col(_DEL).desc(), F.col(_PRIO).desc())
    events = events.withColumn("__n", F.row_number().over(same)).where("__n = 1").drop("__n")
    w = Window.partitionBy(*keys).orderBy(F.col(_SEQ))

    def equal(fn: Any) -> Column:
        eq = F.lit(True)
        for c in pv.tracked:
            eq = eq & F.col(f"`{c}`").eqNullSafe(fn(F.col(f"`{c}`"), 1).over(w))
        return eq

    prev_del = F.lag(F.col(_DEL), 1).over(w)
    next_del = F.lead(F.col(_DEL), 1).over(w)
    head = ~F.col(_DEL) & (prev_del.isNull() | prev_del | ~equal(F.lag))
    tail = ~F.col(_DEL) & (next_del.isNull() | next_del | ~equal(F.lead))
    marked = (
        events.withColumn("__head", head)
        .withColumn("__tail", tail)
        .withColumn("__next", F.lead(F.col(_SEQ), 1).over(w))
        .withColumn("__prev_del", prev_del)
    )
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    grouped = marked.withColumn("__run", F.sum(F.when(F.col("__head") | F.col(_DEL), 1).otherwise(0)).over(running))
    grouped = grouped.withColumn("__first", F.min(F.col(_SEQ)).over(Window.partitionBy(*keys, F.col("__run"))))
    meta = F.struct(F.col(_SEQ).alias(RECORD_START_AT)).alias(META)
    user = _cols(pv.columns)
    seq_null = F.lit(None).cast(pv.seq_type)
    rows = grouped.where(F.col("__tail")).select(
        *user, F.col("__first").alias(START_AT), F.col("__next").cast(pv.seq_type).alias(END_AT), meta
    )
    inner = grouped.where(~F.col(_DEL) & ~F.col("__tail")).select(
        *user, F.col("__first").alias(START_AT), seq_null.alias(END_AT), meta
    )
    tombs = grouped.where(F.col(_DEL) & (F.col("__prev_del").isNull() | F.col("__prev_del"))).select(
        *user, F.col(_SEQ).alias(START_AT), F.col(_SEQ).alias(END_AT), meta
    )
    return rows, inner.unionByName(tombs)
