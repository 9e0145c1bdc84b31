"""Running SELECTs on Spark with every registered table, MV and system table visible."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkmv.client.system_tables import SYSTEM_TABLES, system_table
from sparkmv.errors import ObjectNotFoundError
from sparkmv.names import ObjectName
from sparkmv.refresh.analyze import base_dataframe, mv_with_state, run_over_small_mvs, run_select
from sparkmv.refresh.runtime import Runtime

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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
    return base_dataframe(rt, name, empty)


def run_query(rt: Runtime, sql: str, schema_only: bool = False) -> DataFrame:
    """Run a SELECT on Spark; table names resolve to sparkmv tables, MVs and system tables.

    Raises:
        ParseError: when it does not parse.
        ObjectNotFoundError: for an unknown table.
        AnalysisError: when Spark cannot analyse it (unknown column, type error).
    """
    return run_select(rt, sql, table_dataframe, schema_only)


def run_rewritten(rt: Runtime, sql: str, mvs: list[ObjectName]) -> DataFrame:
    """Run a rewritten SELECT (:mod:`sparkmv.services.rewrite`): the ``mvs`` it reads are
    read with their hidden state columns, everything else as by :func:`run_query`. When it
    reads only small MVs, it runs over in-memory copies of them on a Spark session for tiny
    inputs (:func:`sparkmv.refresh.analyze.run_over_small_mvs`).

    Raises:
        AnalysisError, ObjectNotFoundError: as :func:`run_query`.
    """
    used = set(mvs)
    small = run_over_small_mvs(rt, sql, used)  # small MVs: in memory, on a session for tiny inputs
    if small is not None:
        return small

    def read(rt: Runtime, name: ObjectName, empty: bool) -> DataFrame:
        return mv_with_state(rt, name, empty) if name in used else table_dataframe(rt, name, empty)

    return run_select(rt, sql, read)
