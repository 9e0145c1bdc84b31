"""Reading sparkmv tables as DataFrames and analysing a query's output schema in Spark.

The Spark side of DDL: the services layer (``CREATE MATERIALIZED VIEW``, ``ALTER ...
ACTIVE``) asks here for the schema a query produces, without importing Spark itself.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from sparkmv.analysis.query import bind_tables, parse_query, referenced_tables
from sparkmv.catalog import ObjectKind
from sparkmv.errors import AnalysisError, ObjectNotFoundError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.resolve import pin_base, read_pinned
from sparkmv.storage.iceberg import snapshot_key
from sparkmv.storage.schema import normalize_for_iceberg, spark_to_arrow
from sparkmv.storage.spark_log import spark_error_text

_views = itertools.count()
# Per Spark session: MV -> (snapshot id, schema id, DataFrame over that snapshot's files).
# An Iceberg snapshot's files never change, so the DataFrame (and the file listing Spark did
# for it) is reused until the MV's current snapshot or schema moves on; query rewrite reads
# the same MVs query after query.
_MV_FRAMES: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, int, DataFrame]]] = weakref.WeakKeyDictionary()


def mv_with_state(rt: Runtime, name: ObjectName, empty: bool = False) -> DataFrame:
    """The current snapshot of MV ``name`` with its hidden state columns (what query rewrite
    reads: ``__smv_count``, ``__smv_sum_<i>``, ``__smv_nn_<i>``). The DataFrame of a snapshot
    is made once per Spark session and reused while that snapshot is current.

    Raises:
        ObjectNotFoundError: when the MV's table does not exist.
    """
    df = _mv_snapshot(rt, name)[1]
    return rt.spark.createDataFrame([], df.schema) if empty else df


def _mv_snapshot(rt: Runtime, name: ObjectName) -> tuple[Any, DataFrame]:
    """MV ``name``'s pyiceberg table and the (cached) DataFrame over its current snapshot's
    files, hidden state columns included.

    Raises:
        ObjectNotFoundError: when the MV's table does not exist.
    """
    from sparkmv.sources import iceberg

    if not rt.iceberg.exists(name):
        raise ObjectNotFoundError(f"table or view '{name}' does not exist")
    table = rt.iceberg.load(name)
    frames = _MV_FRAMES.setdefault(rt.spark, {})
    cached = frames.get(name.qualified)
    key = snapshot_key(table)
    if cached is not None and cached[:2] == key:
        return table, cached[2]
    df = read_pinned(rt.spark, iceberg.pin(name.qualified, table, hidden=True))
    if key[0] != -1:
        frames[name.qualified] = (*key, df)
    return table, df


def run_over_small_mvs(rt: Runtime, sql: str, mvs: set[ObjectName]) -> DataFrame | None:
    """Run rewritten SELECT ``sql`` over in-memory copies of the MVs it reads, on the session
    for tiny inputs (:mod:`sparkmv.refresh.small_mv`), when every table it reads is one of
    ``mvs`` and each is small; None otherwise (or on Spark Connect): run it the regular way.

    Raises:
        ParseError, ObjectNotFoundError, AnalysisError: as :func:`run_select`.
    """
    from sparkmv.refresh.small_mv import is_small, local_view, tiny_session

    session = tiny_session(rt.spark)
    query = parse_query(sql)
    names = referenced_tables(query)
    if session is None or not names or not set(names) <= mvs:
        return None
    snapshots = [(name, *_mv_snapshot(rt, name)) for name in names]
    if not all(is_small(table) for _, table, _ in snapshots):
        return None
    views = {name: local_view(session, name.qualified, table, df) for name, table, df in snapshots}
    try:
        return session.sql(bind_tables(query, views))
    except PySparkException as exc:
        raise AnalysisError(spark_error_text(exc)) from exc


def base_dataframe(rt: Runtime, name: ObjectName, empty: bool = False) -> DataFrame:
    """The current contents of a base table, MV or refreshable table (``empty``: schema only).

    Raises:
        ObjectNotFoundError: when nothing has that name.
    """
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, name)
        ext = rt.catalog.external_catalogs.find(s, name.catalog) if name.catalog else None
        props = dict(ext.properties) if ext is not None else None
    if row is None and not name.catalog and not rt.iceberg.exists(name):
        raise ObjectNotFoundError(f"table or view '{name}' does not exist")
    try:
        pinned = pin_base(name, row, rt.iceberg, props)
    except SparkMvError as exc:
        raise ObjectNotFoundError(str(exc)) from exc
    df = read_pinned(rt.spark, pinned, set() if empty else None)  # the schema only: read no file
    if row is not None and row.kind == ObjectKind.REFRESHABLE_TABLE:
        df = df.drop("_vnode")
    if empty:
        return rt.spark.createDataFrame([], df.schema)
    return df


def run_select(
    rt: Runtime,
    sql: str,
    read_table: Callable[[Runtime, ObjectName, bool], DataFrame] = base_dataframe,
    schema_only: bool = False,
) -> DataFrame:
    """Run SELECT ``sql`` on Spark with each referenced table read by ``read_table(rt, name,
    empty)`` (default: :func:`base_dataframe`); ``schema_only`` reads empty inputs.

    Raises:
        ParseError: when it does not parse.
        ObjectNotFoundError: for an unknown table.
        AnalysisError: when Spark cannot analyse it (unknown column, type error).
    """
    query = parse_query(sql)
    views: dict[ObjectName, str] = {}
    for name in referenced_tables(query):
        view = f"__smv_q{next(_views)}"
        read_table(rt, name, schema_only).createOrReplaceTempView(view)
        views[name] = view
    try:
        return rt.spark.sql(bind_tables(query, views))
    except PySparkException as exc:
        raise AnalysisError(spark_error_text(exc)) from exc


def query_schema(rt: Runtime, sql: str) -> pa.Schema:
    """The Arrow schema (normalised for Iceberg) of SELECT ``sql`` over sparkmv tables.

    Spark analyses the query over empty inputs: no data is read.

    Raises:
        ParseError, ObjectNotFoundError, AnalysisError: as :func:`run_select`.
    """
    return spark_to_arrow(normalize_for_iceberg(run_select(rt, sql, schema_only=True)).schema)
