"""Maintenance state of inner stages: a decomposable stage kept per key, so a refresh merges
the change into it instead of recomputing the stage over the old and the new input.

An inner stage (:mod:`sparkmv.analysis.stages`) is otherwise recomputed for its touched
keys over both inputs (:mod:`sparkmv.refresh.incremental.stages`): two scans of its base
tables when its keys are spread over every file (TPC-H Q17's ``avg(l_quantity)`` per part,
Q15's revenue per supplier, Q20's quantity per part and supplier). A stage that is a
*decomposable* aggregate (:func:`~sparkmv.analysis.incremental.stage_state_analysis`: SUM,
COUNT, AVG and formulas over them, grouped by its keys) keeps its output with the hidden
state columns (row count, non-NULL counts and sums) as the MV's **stage state**: Parquet
files in a companion directory of the MV's table, ``<MV location>/state/<stage>/<key>/``,
never part of the MV's Iceberg table (an outside reader of the MV sees none of it). A run
then reads the old frame of the stage from the state, derives the stage's partial rows from
the base tables' change by the delta rules, merges them into the state per key (as an
aggregate MV merges its delta, :func:`~sparkmv.refresh.incremental.merge_rows.combine`), writes
the new state, and gives the stage above the old and new state netted (the rows of the keys
that changed): the stage costs its change and its state, not its base tables.
This is how Feldera and RisingWave keep an aggregate's state per key between steps.

The state is a cache checked on read, so no crash or mode switch can make it wrong: its
``<key>`` is a digest of the stage's query and the snapshot ids of the base tables it reads,
and it is used only by a run whose consumed positions give the same digest, with its marker
file (:data:`MARKER`, written after the data) present. Anything else (no state yet, a base
table without snapshot ids, a PCT run in between, a failed write) falls back to the
recomputation over both inputs, exact as before. A FULL refresh (of an MV with
``refresh_mode = 'INCREMENTAL'``) writes the state of the
MV's decomposable stages (one more Spark job computing the stages over the new input); an
INCREMENTAL run writes the new state and keeps only it and the one it read. Dropping the MV
deletes its location, the state with it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmv.analysis.incremental import stage_state_analysis
from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.query import parse_query, referenced_tables
from sparkmv.names import ObjectName
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage import warehouse

if TYPE_CHECKING:  # pyspark is imported where a state is read or written, not by AUTO's estimate
    from pyspark.sql import DataFrame

    from sparkmv.refresh.incremental.delta import Views

log = logging.getLogger("sparkmv.refresh")

STATE_DIRECTORY = "state"
"""The companion directory of an MV's table location holding its stage state."""
MARKER = "_sparkmv_state.json"
"""Written last into a state directory: its stage query and positions (a state without it
is incomplete and never read)."""


def decomposable(stage: Stage) -> IvmAnalysis | None:
    """The state analysis of ``stage`` when its state can be kept (a decomposable aggregate
    with no inner stage of its own), else None."""
    if stage.analysis.stages:
        return None
    return stage_state_analysis(stage.analysis.augmented_sql)


def kept_stages(stages: tuple[Stage, ...]) -> Iterator[tuple[Stage, IvmAnalysis]]:
    """Every stage of ``stages`` (nested ones too) whose state can be kept, with its
    state analysis."""
    for stage in stages:
        yield from kept_stages(stage.analysis.stages)
        state = decomposable(stage)
        if state is not None:
            yield stage, state


@dataclass(frozen=True)
class StateStore:
    """The stage state of one MV, under ``root`` (``<MV location>/state``)."""

    root: str

    @classmethod
    def of(cls, location: str) -> StateStore:
        """The store of the MV whose Iceberg table is at ``location``."""
        return cls(warehouse.join(location, STATE_DIRECTORY))

    def directory(self, stage: Stage, state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> str | None:
        """The directory of ``stage``'s state at ``positions`` (qualified base table ->
        pinned position); None when a base table of the stage has no snapshot id (a
        Parquet listing), so no state is kept."""
        digest = _digest(state, positions)
        return None if digest is None else warehouse.join(self.root, stage.name, digest)

    def find(self, stage: Stage, state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> str | None:
        """The complete state of ``stage`` at ``positions``, or None."""
        directory = self.directory(stage, state, positions)
        if directory is None or not warehouse.exists(warehouse.join(directory, MARKER)):
            return None
        return directory

    def write(self, frame: DataFrame, stage: Stage, state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> str:
        """Write ``frame`` (the stage's augmented rows at ``positions``) as its state, the
        marker last; returns the directory. Raises Spark's or the file system's errors."""
        directory = self.directory(stage, state, positions)
        assert directory is not None
        warehouse.remove_tree(directory)
        frame.write.mode("overwrite").parquet(warehouse.spark_path(warehouse.normalize(directory)))
        with warehouse.open_output(warehouse.join(directory, MARKER)) as out:
            out.write(json.dumps({"query": state.augmented_sql, "positions": _positions(state, positions)}).encode())
        return directory

    def prune(self, stage: Stage, keep: set[str]) -> None:
        """Remove ``stage``'s states other than the directories in ``keep``."""
        kept = {warehouse.normalize(k) for k in keep}
        for entry in warehouse.list_dir(warehouse.join(self.root, stage.name)):
            if entry.is_dir and warehouse.normalize(entry.path) not in kept:
                warehouse.remove_tree(entry.path)

    def size(self, stage: Stage, state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> int | None:
        """Bytes of ``stage``'s state at ``positions``; None when there is none."""
        directory = self.find(stage, state, positions)
        if directory is None:
            return None
        return sum(f.size for f in warehouse.list_files(directory) if f.name.endswith(".parquet"))


def read_state(rt: Runtime, directory: str) -> DataFrame:
    """The rows of the state written under ``directory``."""
    return rt.spark.read.parquet(warehouse.spark_path(warehouse.normalize(directory)))


def _positions(state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> dict[str, int | None]:
    tables = {str(t) for t in referenced_tables(parse_query(state.augmented_sql))}
    return {
        t: p.snapshot_id
        for t, p in sorted(positions.items())
        if str(ObjectName.parse(t, allow_reserved=True)) in tables
    }


def _digest(state: IvmAnalysis, positions: Mapping[str, PinnedTable]) -> str | None:
    mine = _positions(state, positions)
    if not mine or any(v is None for v in mine.values()):
        return None
    text = json.dumps([state.augmented_sql, mine], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def write_states(rt: Runtime, location: str, stages: tuple[Stage, ...], pinned: dict[str, PinnedTable]) -> int:
    """Write the state of every decomposable stage of ``stages`` over the ``pinned`` input
    (a FULL refresh); returns how many were written. A stage whose base tables have no
    snapshot ids is skipped."""
    from sparkmv.refresh.incremental.delta import Views

    store = StateStore.of(location)
    views = Views(rt)
    written = 0
    try:
        for stage, state in kept_stages(stages):
            if store.directory(stage, state, pinned) is None or store.find(stage, state, pinned) is not None:
                continue
            frame = views.over(parse_query(state.augmented_sql), "new", pinned)
            store.write(frame, stage, state, pinned)
            store.prune(stage, {store.directory(stage, state, pinned) or ""})
            written += 1
    finally:
        views.drop()
    return written


@dataclass
class StateFrames:
    """The frames of a stage maintained from its state: ``old`` and ``new`` (its visible
    columns); ``changed`` False when no key of the stage was touched (``new`` is ``old``)."""

    old: DataFrame
    new: DataFrame
    changed: bool


def frames_from_state(
    rt: Runtime,
    store: StateStore,
    stage: Stage,
    new: dict[str, PinnedTable],
    old: dict[str, PinnedTable],
    delta: dict[str, PinnedTable],
    views: Views,
) -> StateFrames | None:
    """The stage's frames from its state at the ``old`` positions merged with the change
    (module docstring), the new state written; None when the stage keeps no state or none
    is found at ``old`` (the caller recomputes it over both inputs).

    The merge groups the whole state with the change's partial rows by the stage's keys
    (one Spark job writing the new state, no collection of the touched keys to the
    driver): a state is far smaller than the base tables it summarizes (TPC-H SF1's
    ``avg(l_quantity)`` per part: 200,000 rows, 2.6 MiB, for 6 million rows of
    ``lineitem``)."""
    from sparkmv.refresh.incremental.delta import delta_terms, project_to
    from sparkmv.refresh.incremental.merge_rows import combine

    state = decomposable(stage)
    if state is None:
        return None
    found = store.find(stage, state, old)
    if found is None:
        return None
    current = read_state(rt, found)
    visible = [f"`{c.name}`" for c in state.columns]
    with delta_terms(rt, state, new, old, delta, views) as terms:
        if terms.union is None:  # no base table of the stage changed: the state carries over
            fresh_state = current
            if store.directory(stage, state, new) != found:
                store.write(current, stage, state, new)
        else:
            rows = project_to(terms.union, current.schema)
            merged = combine(current.unionByName(rows), state, current.schema)
            written = store.write(merged, stage, state, new)
            fresh_state = read_state(rt, written)
    store.prune(stage, {found, store.directory(stage, state, new) or found})
    log.info("stage %s maintained from its state (%s)", stage.name, found)
    return StateFrames(current.select(*visible), fresh_state.select(*visible), terms.union is not None)


@dataclass(frozen=True)
class StagedFull:
    """A FULL refresh computed over the kept states of the MV's inner stages: ``query``
    (the query above the stages, :attr:`~sparkmv.analysis.ivm.IvmAnalysis.staged_sql`)
    reading each stage's virtual input from its state directory in ``states`` (stage name
    -> directory) as the stage's visible ``columns``. The stages are then computed once,
    into their state, rather than once inside the query and once more for the state."""

    query: str
    states: dict[str, str]
    columns: dict[str, list[str]]

    def frames(self, rt: Runtime) -> dict[str, DataFrame]:
        """Stage name -> its rows read from its state."""
        return {
            name: read_state(rt, d).select(*[f"`{c}`" for c in self.columns[name]]) for name, d in self.states.items()
        }


def full_over_states(
    rt: Runtime, location: str, analysis: IvmAnalysis, pinned: dict[str, PinnedTable], columns: list[str]
) -> StagedFull | None:
    """Write the state of every decomposable stage of ``analysis`` over ``pinned`` (those not
    written yet) and, when every stage of the query's top level keeps its state and the
    query above them yields every column of the MV's table (``columns``), the
    :class:`StagedFull` computing the MV from those states; else None (the MV's query is run
    as written)."""
    write_states(rt, location, analysis.stages, pinned)
    if not analysis.staged_sql:
        return None
    store = StateStore.of(location)
    states: dict[str, str] = {}
    visible: dict[str, list[str]] = {}
    for stage in analysis.stages:
        state = decomposable(stage)
        found = store.find(stage, state, pinned) if state is not None else None
        if state is None or found is None:
            return None
        states[stage.name], visible[stage.name] = found, [c.name for c in state.columns]
    query = parse_query(analysis.staged_sql)
    names = {e.alias_or_name.lower() for e in getattr(query, "expressions", [])}
    if not all(c.lower() in names for c in columns):
        return None
    return StagedFull(analysis.staged_sql, states, visible)
