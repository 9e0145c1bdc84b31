"""Running SELECTs on Spark with every registered table, MV and system table visible."""

from __future__ import annotations

import itertools

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from sparkmv.analysis.query import bind_tables, parse_query, referenced_tables
from sparkmv.client.system_tables import SYSTEM_TABLES, system_table
from sparkmv.errors import AnalysisError, ObjectNotFoundError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.executor import spark_error_text
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.resolve import pin_base, read_pinned

_counter = itertools.count()


def table_dataframe(rt: Runtime, name: ObjectName, empty: bool = False) -> DataFrame:
    """The current contents of a table, MV or system table (``empty``: schema only).

    Raises:
        ObjectNotFoundError: when nothing has that name.
    """
    if name.namespace == "sparkmv":
        if name.name not in SYSTEM_TABLES:
            raise ObjectNotFoundError(f"system table 'sparkmv.{name.name}' does not exist")
        if empty:
            return rt.spark.createDataFrame([], SYSTEM_TABLES[name.name][0].ddl)
        return system_table(rt, name.name)
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.find(s, name)
    if row is None and not rt.iceberg.exists(name):
        raise ObjectNotFoundError(f"table or view '{name}' does not exist")
    try:
        pinned = pin_base(name, row, rt.iceberg)
    except SparkMvError as exc:
        raise ObjectNotFoundError(str(exc)) from exc
    df = read_pinned(rt.spark, pinned)
    if row is not None and row.kind == "REFRESHABLE_TABLE":
        df = df.drop("_vnode")
    if empty:
        return rt.spark.createDataFrame([], df.schema)
    return df


def run_query(rt: Runtime, sql: str, schema_only: bool = False) -> DataFrame:
    """Run a SELECT on Spark; table names resolve to sparkmv tables, MVs and system tables.

    Raises:
        ParseError: when it does not parse.
        ObjectNotFoundError: for an unknown table.
        AnalysisError: when Spark cannot analyse it (unknown column, type error).
    """
    query = parse_query(sql)
    views: dict[ObjectName, str] = {}
    for name in referenced_tables(query):
        view = f"__smv_q{next(_counter)}"
        table_dataframe(rt, name, empty=schema_only).createOrReplaceTempView(view)
        views[name] = view
    try:
        return rt.spark.sql(bind_tables(query, views))
    except PySparkException as exc:
        raise AnalysisError(spark_error_text(exc)) from exc
