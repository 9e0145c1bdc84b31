"""The stale partitions of an MV candidate of a query rewrite: which MV partitions a
rewrite must compute from the base instead, and which base partitions feed them. Held by
:class:`~sparkmv.analysis.rewrite.shape.MvCandidate`, used by
:func:`~sparkmv.analysis.rewrite.union.union_source`: a module of its own so both import it
and neither imports the other at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sparkmv.analysis.query import partition_predicate
from sparkmv.names import ObjectName
from sparkmv.storage.partition_values import PartitionText


@dataclass(frozen=True)
class BaseFilter:
    """The base partitions of a reference table that feed the stale MV partitions: rows of
    ``table`` whose partition column ``column`` (values of ``kind``) is one of ``values``."""

    table: ObjectName
    column: str
    kind: str
    values: tuple[PartitionText, ...]

    def condition(self) -> exp.Expr:
        """The condition over the table's unqualified columns."""
        return partition_predicate(exp.column(self.column), self.values, self.kind)


@dataclass(frozen=True)
class StalePartitions:
    """The stale partitions of an MV, to be computed from the base in a rewrite.

    Attributes:
        column: the MV partition column.
        kind: the kind of its typed values (:mod:`sparkmv.storage.partition_values`).
        values: the stale MV partition values (text form, None for NULL).
        query: the MV's defining query (Spark SQL).
        base_filters: per reference table, the base partitions feeding ``values`` (empty:
            the base tables are read whole and only the MV partition column is filtered).
    """

    column: str
    kind: str
    values: tuple[PartitionText, ...]
    query: str
    base_filters: tuple[BaseFilter, ...] = ()

    def describe(self) -> str:
        """For EXPLAIN: ``3 stale partitions and consistency CHECKED: compensated from base``."""
        return f"{len(self.values)} stale partitions and consistency CHECKED: compensated from base"
