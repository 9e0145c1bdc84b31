"""Inner stages as virtual inputs, with Spark (:mod:`sparkmv.analysis.stages`).

For each inner stage of the MV's query (innermost first), three frames are registered in
the run's :class:`~sparkmv.refresh.incremental.delta.Views` under its name, as a base
table's three positions are:

- ``new``: the stage's query over the new inputs (base tables and its own inner stages);
- ``old``: the same over the old (consumed) inputs, read by time travel;
- ``delta`` (only when a key of the stage is touched and its rows changed): its rows of
  the touched keys over the new input with sign +1 and over the old input with sign -1,
  netted per distinct row (identical rows cancel), with the sign column
  :data:`~sparkmv.analysis.signed.SIGN` as a base table's signed change has it.

Then ``new = old + delta`` as multisets, which is all the stage above needs: the delta rules
are multilinear in their inputs, and affected-key recomputation reads each input's delta
(signs ignored) and its new input. A decomposable stage whose state the MV keeps is read
from that state and merged with its change instead
(:mod:`sparkmv.refresh.incremental.stage_state`); any other stage keeps nothing: its old
side is the base tables' time travel.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.query import bind_tables, parse_query
from sparkmv.analysis.signed import SIGN
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.delta import Views
from sparkmv.refresh.incremental.keyed import touched_keys
from sparkmv.refresh.incremental.merge_rows import first_rows, key_filter
from sparkmv.refresh.incremental.stage_cost import StageKey, stage_key
from sparkmv.refresh.incremental.stage_state import StateStore, frames_from_state
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable

STAGE_KIND = "stage"
"""The kind of a virtual input's placeholder :class:`PinnedTable` (its frames are in the
run's :attr:`Views.frames`)."""


@dataclass
class StagedInputs:
    """The inputs of the MV's query above its inner stages.

    Attributes:
        analysis: the query above the stages (its ``augmented_sql`` reads them as virtual
            inputs), or with its derived tables merged (its ``augmented_sql`` the
            ``merged_sql``); the MV's analysis itself when it has neither.
        views: the run's temporary views (virtual inputs among them).
        new, old, delta: the base tables' positions, with the virtual inputs added
            (``delta`` only for a stage some key of which was touched).
        state: the MV's stage state (:mod:`sparkmv.refresh.incremental.stage_state`);
            None: every stage is recomputed over both inputs.
    """

    analysis: IvmAnalysis
    views: Views
    new: dict[str, PinnedTable]
    old: dict[str, PinnedTable]
    delta: dict[str, PinnedTable]
    state: StateStore | None = None


@contextmanager
def staged_inputs(
    rt: Runtime,
    analysis: IvmAnalysis,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
    state: StateStore | None = None,
) -> Iterator[StagedInputs]:
    """The run's inputs with the inner stages of ``analysis`` registered as virtual inputs
    (a decomposable stage from its ``state`` when kept); the temporary views are dropped
    when the context exits."""
    views = Views(rt)
    out = StagedInputs(analysis, views, dict(new), dict(old), dict(delta), state)
    try:
        for stage in analysis.stages:
            _add_stage(rt, stage, out)
        if analysis.stages:
            out.analysis = replace(analysis, augmented_sql=analysis.staged_sql, staged_sql="", stages=())
        elif analysis.merged_sql:  # derived tables merged (sparkmv.analysis.merge)
            out.analysis = replace(analysis, augmented_sql=analysis.merged_sql, merged_sql="")
        yield out
    finally:
        views.drop()


def _add_stage(rt: Runtime, stage: Stage, inputs: StagedInputs) -> None:
    """Register the frames of ``stage`` (its own inner stages first)."""
    for inner in stage.analysis.stages:
        _add_stage(rt, inner, inputs)
    own = stage.analysis
    if own.stages:
        own = replace(own, augmented_sql=own.staged_sql, staged_sql="", stages=())
    query = parse_query(own.augmented_sql)
    views = inputs.views
    kept = None
    if inputs.state is not None:
        kept = frames_from_state(rt, inputs.state, stage, inputs.new, inputs.old, inputs.delta, views)
    fresh = kept.new if kept is not None else views.over(query, "new", inputs.new)
    before = kept.old if kept is not None else views.over(query, "old", inputs.old)
    placeholder = PinnedTable(stage.name, STAGE_KIND, "{}", [])
    views.frames[(stage.name, "new")] = fresh
    views.frames[(stage.name, "old")] = before
    inputs.new[stage.name] = inputs.old[stage.name] = placeholder
    if kept is not None:
        if kept.changed:  # the old and new state netted: rows of unchanged keys cancel
            _add_delta(stage, inputs, netted(fresh, before))
        return
    assert own.keyed is not None
    key = None if stage.analysis.stages else stage_key(own, inputs.new)
    if key is not None and key.tables == frozenset({key.table}):
        views.stage_keys[stage.name] = key
        retracted = _retracted_delta(rt, key, query, fresh, inputs)
        if retracted is not None:
            _add_delta(stage, inputs, retracted)
            return
    with touched_keys(rt, own, fresh.schema, inputs.new, inputs.old, inputs.delta, views) as terms:
        if terms.union is None:
            return
        restrict = key_filter(terms.union, own.keyed.keys, fresh)
    if restrict is None:  # no key of the stage touched: it did not change
        return
    _add_delta(stage, inputs, netted(restrict(fresh, True), restrict(before, True)))


def _add_delta(stage: Stage, inputs: StagedInputs, delta: DataFrame) -> None:
    """Register ``delta`` as the signed delta of ``stage`` unless it holds no row: its
    touched keys' rows came out the same (TPC-H RF1's new orders under Q18's stage of
    orders over 300 units: none qualifies), so the stage did not change and no term reads
    it, rather than a term over an empty delta that reduces none of its other inputs.
    Cached: the check computes it, and every term reading it, and their reductions, reuse it.
    """
    frame = inputs.views.persist(delta)
    if not first_rows(frame, 1):
        return
    inputs.views.frames[(stage.name, "delta")] = frame
    inputs.delta[stage.name] = PinnedTable(stage.name, "signed", "{}", [])


def _retracted_delta(
    rt: Runtime, key: StageKey, query: exp.Query, fresh: DataFrame, inputs: StagedInputs
) -> DataFrame | None:
    """The delta of a stage keyed by a column of its one base table ``T`` when ``T``'s
    change only retracted rows and a probe finds none of their keys in ``T`` now
    (:mod:`sparkmv.refresh.incremental.probe`; TPC-H RF2 under Q4's and Q18's stages of
    order keys): the stage over the new input holds none of the touched keys, and over the
    old input, ``T``'s rows of those keys are exactly the retracted ones, so the delta is
    the stage over the retracted rows, signed -1, and no scan of ``T``. None otherwise."""
    change = inputs.delta.get(key.table)
    if change is None or change.kind != "signed" or not probe.retracts_only(rt, change, key.column):
        return None
    deltas = {t: d for t, d in inputs.delta.items() if t in inputs.new and inputs.new[t].kind != STAGE_KIND}
    target = inputs.new[key.table]
    if not probe.joins_nothing(rt, key.table, target, key.column, change, key.column, run=True, deltas=deltas):
        return None
    view = inputs.views.retracted(key.table, change)
    before = rt.spark.sql(bind_tables(query, {ObjectName.parse(key.table, allow_reserved=True): view}))
    return netted(fresh.where(F.lit(False)), before)


def netted(plus: DataFrame, minus: DataFrame) -> DataFrame:
    """The signed rows ``plus`` (+1) and ``minus`` (-1) with the same columns, netted per
    distinct row: a row ``n`` times more in ``plus`` than in ``minus`` appears ``|n|``
    times with :data:`SIGN` the sign of ``n``; rows in both equally often disappear."""
    columns = [F.col(f"`{c}`") for c in plus.columns]
    both = plus.withColumn(SIGN, F.lit(1)).unionByName(minus.withColumn(SIGN, F.lit(-1)))
    counted = both.groupBy(*columns).agg(F.sum(SIGN).alias("__smv_n")).where(F.col("__smv_n") != 0)
    repeated = F.explode(F.array_repeat(F.signum("__smv_n").cast("int"), F.abs("__smv_n").cast("int")))
    return counted.select(*columns, repeated.alias(SIGN))
