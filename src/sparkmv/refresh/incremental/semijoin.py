"""Semi-join reduction of the delta terms, with Spark (the cost of a refresh follows the
change).

A delta term ``T1 ⋈ .. ⋈ ΔTi ⋈ .. ⋈ Tn`` read every other table in full. When an inner
equi-join ties a column of ``Tj`` to a column of ``Ti`` (:mod:`sparkmv.analysis.semijoin`
says where that is sound), ``Tj`` is read filtered by the values ``ΔTi`` holds in that column
(collected first: one small Spark job over the delta, which the term reads anyway):

- up to :data:`MAX_IN_VALUES` distinct non-NULL values: ``Tj.y IN (<literals>)`` (one SQL
  expression, :mod:`~sparkmv.refresh.incremental.literals`); Spark
  pushes it into the Parquet scan (as an IN filter, or beyond
  ``spark.sql.parquet.pushdown.inFilterThreshold`` values as their min/max range), which
  skips row groups, and the join reads far fewer rows;
- more: ``Tj.y BETWEEN min AND max`` of the delta's values (always pushed);
- none (an empty delta, or NULL keys only): no row of ``Tj`` can match; ``FALSE``.

NULL keys never match an equi-join, so they are left out. Columns of types without exact
literals (timestamps, nested types) or of floating point are not reduced
(:func:`_literal_type`). A delta of more than :data:`MAX_DELTA_ROWS` known rows is not
reduced (collecting its values would cost about what the reduction saves), nor is a target
table of at most :data:`MIN_TARGET_BYTES` (a broadcast join reads it whole for less than
the Spark job collecting the delta's values costs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sparkmv.analysis.semijoin import INTEGER_TYPES, Reduction, reductions
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental.literals import in_list_sql

MAX_IN_VALUES = 1000
"""Most distinct delta values filtered as an IN list of literals (else as their range)."""
MAX_DELTA_ROWS = 5_000_000
"""Most rows of a delta (when known) whose values are collected for a reduction."""
MIN_TARGET_BYTES = 16 * 1024 * 1024
"""A table of at most this many bytes is not reduced: at TPC-H SF1 after RF1, collecting
the 7,400 part keys of ``lineitem``'s delta (two Spark jobs, 0.3-0.8 s) to filter the 6 MiB
``part`` table cost Q14 more than its FULL refresh (bench/RESULTS.md, TPC-H refresh)."""
ENABLED = True
"""Module switch (tests and benchmarks compare with it off)."""


def _q(name: str) -> str:
    return f"`{name}`"


def column_types(frame: DataFrame) -> dict[str, object]:
    """Column (lower case) -> Spark JSON type of ``frame``."""
    return {f.name.lower(): f.dataType.jsonValue() for f in frame.schema.fields}


@dataclass(frozen=True)
class Reduced:
    """The filter of one base table in one delta term.

    Attributes:
        text: names the filter (for the run's log).
        cond: the filter.
        bounds: ``(column, (min, max))`` of each integer column it filters (``()``: no
            value can match), which the table's files' bounds must overlap to hold a
            matching row (:func:`~sparkmv.refresh.incremental.pruned.files_within`).
    """

    text: str
    cond: Column
    bounds: list[tuple[str, tuple[Any, ...]]]


class Reducer:
    """The reductions of one run's delta terms; the delta values of each (table, column)
    are collected once."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], tuple[str, list[object]]] = {}

    def conditions(
        self,
        query: exp.Query,
        changed: str,
        frames: Mapping[str, DataFrame],
        delta_rows: int | None,
        sizes: Mapping[str, int | None] | None = None,
        skips: Callable[[str, str, str], bool] | None = None,
        ranges: Callable[[str, object], tuple[object, ...] | None] | None = None,
    ) -> dict[str, Reduced]:
        """Base table (qualified) -> the :class:`Reduced` filter of the term of
        ``changed`` in ``query``; ``frames``: every base table's frame as the term reads
        it (``changed``: its delta); ``sizes``: their bytes where known (a table of at most
        :data:`MIN_TARGET_BYTES` is not reduced); ``skips(table, column, source)``: False
        when a filter of the table's column by the delta's ``source`` values cannot skip a
        file (:func:`~sparkmv.refresh.incremental.pruned.prunes`), so it is not reduced;
        ``ranges(source, type)``: the (min, max) of the delta's ``source`` column when known
        without a Spark job (``()``: NULLs only; :func:`~sparkmv.refresh.incremental.pruned.known_range`),
        used as the filter's range instead of collecting the values. Empty when nothing can
        be reduced."""
        if not ENABLED or (delta_rows is not None and delta_rows > MAX_DELTA_ROWS):
            return {}
        names = {ObjectName.parse(t, allow_reserved=True): t for t in frames}
        columns = {n: column_types(frames[t]) for n, t in names.items()}
        changed_name = ObjectName.parse(changed, allow_reserved=True)
        small = {n for n, t in names.items() if (size := (sizes or {}).get(t)) is not None and size <= MIN_TARGET_BYTES}
        found = [
            r
            for r in reductions(query, changed_name, columns)
            if _literal_type(columns[changed_name][r.source])
            and r.target not in small
            and (skips is None or skips(names[r.target], r.column, r.source))
        ]
        if not found:
            return {}
        sources = sorted({r.source for r in found})
        for source in sources:
            if ranges is not None and (changed, source) not in self.values:
                known = ranges(source, columns[changed_name][source])
                if known is not None:
                    self.values[(changed, source)] = ("range", list(known)) if known else ("in", [])
        values = self._collect(changed, sources, frames[changed])
        out: dict[str, Reduced] = {}
        for r in found:
            table = names[r.target]
            text, cond = _condition(r, *values[r.source], columns[r.target][r.column])
            got = values[r.source][1]
            integer = columns[r.target][r.column] in INTEGER_TYPES
            bounds = [(r.column, (got[0], got[-1]) if got else ())] if integer else []
            if table in out:
                text, cond, bounds = f"{out[table].text} AND {text}", out[table].cond & cond, out[table].bounds + bounds
            out[table] = Reduced(text, cond, bounds)
        return out

    def _collect(self, table: str, columns: list[str], delta: DataFrame) -> dict[str, tuple[str, list[object]]]:
        """Column -> ("in", its distinct values) or ("range", [min, max]) in ``delta``
        (NULLs left out; an empty list when none), for each of ``columns``: one Spark job
        over the delta for all of them (each column's minimum, maximum and distinct values,
        of which at most :data:`MAX_IN_VALUES` + 1 reach the driver)."""
        wanted = [c for c in columns if (table, c) not in self.values]
        if wanted:
            cols = [F.col(_q(c)) for c in wanted]
            aggs = [
                agg
                for col in cols
                for agg in (F.min(col), F.max(col), F.slice(F.collect_set(col), 1, MAX_IN_VALUES + 1))
            ]
            row = delta.agg(*aggs).first()
            for i, c in enumerate(wanted):
                low, high, some = (row[3 * i], row[3 * i + 1], row[3 * i + 2]) if row is not None else (None, None, [])
                if len(some or []) <= MAX_IN_VALUES:
                    self.values[(table, c)] = ("in", sorted(some or []))
                else:
                    self.values[(table, c)] = ("range", [low, high] if low is not None else [])
        return {c: self.values[(table, c)] for c in columns}


def _literal_type(kind: object) -> bool:
    """Types whose collected values make exact literals that match as the join does
    (integers, decimals, strings, dates, booleans): no timestamp (PySpark turns it into a
    local-time datetime), binary or nested type, and no float / double (a join equates
    ``-0.0`` and ``0.0``, which Parquet statistics may tell apart)."""
    if not isinstance(kind, str):
        return False
    return not kind.startswith(("timestamp", "binary")) and kind not in ("void", "variant", "float", "double")


def _condition(r: Reduction, kind: str, values: list[object], target_type: object) -> tuple[str, Column]:
    """The filter of ``r``'s target column (of Spark JSON type ``target_type``) by the
    collected ``values``: an IN list as one SQL expression of literals of the target's type
    (:mod:`~sparkmv.refresh.incremental.literals`; ``isin`` costs a Py4J call per value)."""
    column = F.col(_q(r.column))
    if not values:
        return f"FALSE (no non-NULL {r.source} in the delta)", F.lit(False)
    if kind == "in":
        sql = in_list_sql(r.column, values, target_type)
        return f"{r.column} IN ({len(values)} values of {r.source})", F.expr(sql) if sql else column.isin(values)
    return f"{r.column} BETWEEN min and max of {r.source}", column.between(F.lit(values[0]), F.lit(values[1]))
