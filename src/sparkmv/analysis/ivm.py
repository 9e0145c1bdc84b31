"""The outcome of the incremental-maintenance analysis of one defining query (or of an inner
stage of it): :class:`IvmAnalysis` with its :class:`OutputColumn` and :class:`Stage` parts.
Plain data, in a module of its own so that :mod:`sparkmv.analysis.incremental` (which makes
them) and :mod:`sparkmv.analysis.stages` (which nests them) both import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmv.analysis.keyed import KeyedPlan

if TYPE_CHECKING:  # correlated.py makes IvmAnalysis objects itself
    from sparkmv.analysis.correlated import CorrelatedPlan


@dataclass(frozen=True)
class OutputColumn:
    """One output column of the defining query.

    Attributes:
        name: the output name, lower-cased: the alias, the column name, or for other
            unaliased expressions a best-effort copy of Spark's generated name
            (``sum(x)``, ``count(1)`` for ``COUNT(*)``).
        role: ``group`` (a GROUP BY key), ``sum``, ``count``, ``avg``, ``min``, ``max``,
            ``plain`` (a column of a non-aggregate query), ``formula`` (an expression over
            SUM and COUNT calls, :mod:`sparkmv.analysis.formulas`), or ``value`` (any other
            column of a query maintained by affected-key recomputation).
        state: the hidden state columns it needs: SUM ``("__smv_nn_<i>",)`` (its non-NULL
            count, to tell a NULL sum from 0), AVG ``("__smv_sum_<i>", "__smv_nn_<i>")``,
            a formula its calls' state; others ``()``; ``<i>`` is the 0-based position in
            the select list.
        formula: for role ``formula``, the Spark SQL computing the column from its state.
    """

    name: str
    role: str
    state: tuple[str, ...] = ()
    formula: str = ""


@dataclass(frozen=True)
class Stage:
    """An inner stage of a query split at its non-linear operators
    (:mod:`sparkmv.analysis.stages`), read by the stage above as a virtual input.

    Attributes:
        name: the table name of its virtual input (``__smv_stage_<n>``).
        analysis: how it is maintained (affected-key recomputation); its ``augmented_sql``
            is the stage's query with its own inner stages inlined, its ``staged_sql`` and
            ``stages`` those inner stages as virtual inputs.
    """

    name: str
    analysis: IvmAnalysis


@dataclass(frozen=True)
class IvmAnalysis:
    """Whether a defining query is maintainable by incremental refresh, and how.

    Attributes:
        reason: None when maintainable, else ``"<construct> is not incrementally
            maintainable: <why>"``.
        aggregate: True for GROUP BY queries and global aggregates.
        columns: the output columns in select-list order (of the first branch of a
            ``UNION ALL``); empty when not maintainable.
        state_columns: the hidden columns :attr:`augmented_sql` appends, in order:
            ``ROW_COUNT`` then each column's ``state``; empty for non-aggregates and when
            not maintainable.
        augmented_sql: Spark SQL of the query with the state columns appended to the select
            list, table names as written (the query's own SQL when there are none).
        technique: ``delta rules`` (:data:`DELTA_RULES`), or for a keyed query whose top
            operator is not linear :data:`~sparkmv.analysis.keyed.TECHNIQUE` (affected-key
            recomputation, no state columns; ``aggregate`` is True).
        keyed: the affected-key recomputation plan (its technique only).
        stages: the inner stages of a query split at its non-linear operators
            (:mod:`sparkmv.analysis.stages`); then ``augmented_sql`` has them inlined as
            derived tables (a query Spark runs whole) and ``staged_sql`` reads them as
            virtual inputs (the query the refresh maintains over them).
        merged_sql: when the delta rules maintain the query with its select-project-join
            derived tables merged (:mod:`sparkmv.analysis.merge`), that merged query with
            its state columns: the query the incremental refresh derives deltas from
            (``augmented_sql`` stays the query as written, with the same state columns
            appended, for the MV's full refresh); else empty.
        correlated: when the query's relation is partitioned by a correlation key
            (:mod:`sparkmv.analysis.correlated`, TPC-H Q21): the references that key binds;
            the refresh then takes the delta of the aggregate's partial rows from the query
            over the touched keys' rows, new minus old; ``augmented_sql`` is the query with
            its columns qualified and the delta rules' state columns appended.
    """

    reason: str | None
    aggregate: bool
    columns: tuple[OutputColumn, ...]
    state_columns: tuple[str, ...]
    augmented_sql: str
    technique: str = "delta rules"
    keyed: KeyedPlan | None = None
    stages: tuple[Stage, ...] = ()
    staged_sql: str = ""
    merged_sql: str = ""
    correlated: CorrelatedPlan | None = None

    @property
    def maintainable(self) -> bool:
        """True when incremental refresh can maintain the materialized view."""
        return self.reason is None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The output columns (lower-cased) that identify the rows an incremental refresh
        rewrites: the affected keys of :attr:`keyed`, else the group keys of an aggregate;
        empty for a projection or when not maintainable. The MV's data files are clustered
        by them, so the files holding touched keys are few."""
        if self.reason is not None:
            return ()
        if self.keyed is not None:
            return tuple(self.keyed.keys)
        return tuple(c.name for c in self.columns if c.role == "group") if self.aggregate else ()
