"""AUTO: choosing the refresh technique of one run (INCREMENTAL, PCT or FULL), and the
input of an incremental refresh.

Used by the MV job when it plans and by ``EXPLAIN REFRESH`` alike, so both show the same
candidates. ``refresh_mode = 'INCREMENTAL'`` is strict, as StarRocks' incremental mode:
after the first build, a change that cannot be applied incrementally fails the run with the
reason and leaves the MV unchanged (``REFRESH ... FORCE`` rebuilds it).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from sparkmv.analysis.correlated import used_columns
from sparkmv.analysis.expectations import row_level
from sparkmv.analysis.incremental import IvmAnalysis, analyze_for_table, without_correlation
from sparkmv.analysis.query import parse_query
from sparkmv.errors import RefreshError
from sparkmv.names import ObjectName, changelog_name
from sparkmv.refresh import cost_model
from sparkmv.refresh.chunking import Chunk, base_partitions_for
from sparkmv.refresh.context import MvDefinition, plan_input
from sparkmv.refresh.incremental import netting, probe
from sparkmv.refresh.incremental.candidates import Candidate, choose, describe
from sparkmv.refresh.incremental.correlated_keys import correlated_bytes
from sparkmv.refresh.incremental.estimate import Costs, change_json, cost_text
from sparkmv.refresh.incremental.pruned import Joined, iceberg_table, joined_bytes
from sparkmv.refresh.incremental.reduced_state import reduced_bytes
from sparkmv.refresh.incremental.stage_cost import kept_states, stage_bytes, staged_joined_bytes
from sparkmv.refresh.planner import Plan, PlanInput, RefreshRequest, plan_refresh
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources import change_cache
from sparkmv.sources.changes import APPEND, APPLICABLE, NOT_APPEND_ONLY, SIGNED, UNCHANGED, BaseChange, base_change
from sparkmv.sources.pinned import PinnedTable
from sparkmv.sources.refreshable import changelog_delta
from sparkmv.storage.iceberg import IcebergStore


@dataclass(frozen=True)
class IncrementalInput:
    """What an incremental run reads of one base table besides its pinned input.

    Attributes:
        old: the consumed position (the contents the MV was last computed from); for a
            table that did not change, its pinned position (the same contents).
        delta: only the files appended since ``old`` (None: the table did not change).
        consumed: the snapshot id the MV consumed (None: a Parquet listing, or unknown).
    """

    old: PinnedTable
    delta: PinnedTable | None
    consumed: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (stored in the run's plan)."""
        delta = None if self.delta is None else self.delta.to_json()
        return {"old": self.old.to_json(), "delta": delta, "consumed": self.consumed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IncrementalInput:
        """Inverse of :meth:`to_json`."""
        delta = data.get("delta")
        old = PinnedTable.from_json(data["old"])
        return cls(old, None if delta is None else PinnedTable.from_json(delta), data.get("consumed"))


@dataclass(frozen=True)
class Decision:
    """The technique of one run.

    Attributes:
        plan: the plan run (FULL / PCT / SKIP from the planner, or INCREMENTAL: one chunk).
        inputs: qualified base table -> incremental input (INCREMENTAL only, else empty).
        candidates: the techniques weighed (empty when nothing was weighed: SKIP, the
            first build, or ``refresh_mode`` FULL / PCT).
        planner_input: what the planner read (partition lineage, MV snapshot).
    """

    plan: Plan
    inputs: dict[str, IncrementalInput]
    candidates: list[Candidate]
    planner_input: PlanInput


def decide(rt: Runtime, mv: MvDefinition, pinned: dict[str, PinnedTable], request: RefreshRequest) -> Decision:
    """Plan one refresh of ``mv`` over ``pinned``: weigh INCREMENTAL, PCT and FULL when
    ``refresh_mode`` is AUTO or INCREMENTAL and the MV has been refreshed before.

    Raises:
        RefreshError: ``refresh_mode = 'INCREMENTAL'`` and the change cannot be applied
            incrementally (the reason names the base table and snapshot or file).
    """
    inp = plan_input(rt, mv, pinned, request)
    base = plan_refresh(inp)
    mode = mv.properties.refresh_mode
    if mode not in ("AUTO", "INCREMENTAL") or base.mode == "SKIP" or not inp.refreshed_before:
        return Decision(base, {}, [], inp)
    if mode == "INCREMENTAL" and request.force:
        return Decision(_forced_full(inp, "FORCE: the strict INCREMENTAL MV is rebuilt"), {}, [], inp)
    analysis = mv_analysis(rt, mv, inp.pinned)
    incremental, inputs = incremental_candidate(rt, mv, inp, analysis)
    if mode == "INCREMENTAL":
        if not incremental.eligible:
            raise RefreshError(
                f"incremental refresh of MV '{mv.name}' is impossible: {incremental.reason}; the MV is unchanged "
                "(refresh_mode = 'INCREMENTAL' is strict: REFRESH ... FORCE rebuilds it)"
            )
        chosen = [replace(incremental, chosen=True)]
        return Decision(
            _incremental_plan(inp, f"refresh_mode = INCREMENTAL: {incremental.reason}"), inputs, chosen, inp
        )
    model = cost_model.learned(rt.catalog)  # bytes compared until the catalog's runs fit it
    candidates = choose([incremental, _pct_candidate(base, inp), _full_candidate(inp)], model)
    winner = next((c for c in candidates if c.chosen), None)
    why = describe(candidates)
    if winner is not None and winner.mode == "INCREMENTAL":
        return Decision(_incremental_plan(inp, why), inputs, candidates, inp)
    plan = base if winner is None or winner.mode == base.mode else _forced_full(inp, why)
    return Decision(replace(plan, reason=why), {}, candidates, inp)


def _forced_full(inp: PlanInput, reason: str) -> Plan:
    props = replace(inp.properties, refresh_mode="FULL")
    return replace(plan_refresh(replace(inp, properties=props)), reason=reason)


def _incremental_plan(inp: PlanInput, reason: str) -> Plan:
    size = sum(p.bytes for t in inp.pinned.values() for p in t.partitions.values())
    return Plan(
        "INCREMENTAL",
        reason,
        chunks=[Chunk(None, size, 0)],
        partition_reasons={"<all>": reason},
        consumed={t: ["*"] for t in inp.pinned},
    )


def _full_candidate(inp: PlanInput) -> Candidate:
    return Candidate("FULL", True, sum(p.total_bytes() for p in inp.pinned.values()), "recomputes every partition")


def _pct_candidate(base: Plan, inp: PlanInput) -> Candidate:
    if base.mode != "PCT":
        return Candidate("PCT", False, None, base.reason)
    total = 0
    for chunk in base.chunks:
        restrict = base_partitions_for(chunk, inp.lineage, inp.pinned)
        for table, pinned in inp.pinned.items():
            paths = restrict.get(table)
            total += sum(p.bytes for k, p in pinned.partitions.items() if paths is None or k in paths)
    return Candidate("PCT", True, total, f"recomputes {len(base.partitions)} changed partitions")


def base_columns(pinned: dict[str, PinnedTable]) -> dict[str, list[str]]:
    """Each pinned base table's column names (qualified table -> names), for
    :func:`~sparkmv.analysis.incremental.analyze_incremental` to qualify a query's columns."""
    from sparkmv.storage.schema import schema_from_json

    return {t: [f.name for f in schema_from_json(p.schema_json).fields] for t, p in pinned.items()}


def mv_analysis(rt: Runtime, mv: MvDefinition, pinned: dict[str, PinnedTable]) -> IvmAnalysis:
    """How incremental refresh maintains ``mv`` over ``pinned``, for the state columns its
    table holds (:func:`~sparkmv.analysis.incremental.analyze_for_table`)."""
    table_columns = [f.name for f in rt.iceberg.load(mv.name).schema().fields]
    columns = base_columns(pinned)
    analysis = analyze_for_table(mv.query, table_columns, columns)
    return row_level(analysis, mv.query, columns) if mv.expectations else analysis


def incremental_candidate(
    rt: Runtime, mv: MvDefinition, inp: PlanInput, analysis: IvmAnalysis
) -> tuple[Candidate, dict[str, IncrementalInput]]:
    """INCREMENTAL as a candidate of this run (``analysis``: :func:`mv_analysis`), with what
    it would read when eligible."""
    problem = _static_problem(rt, mv, inp, analysis)
    if problem is not None:
        return Candidate("INCREMENTAL", False, None, problem), {}
    with rt.catalog.read() as s:
        positions = rt.catalog.positions.load(s, mv.object_id)
    changes: dict[str, BaseChange] = {}
    for table, new in sorted(inp.pinned.items()):
        if table not in positions:
            why = f"no consumed position of base table '{table}' (the last refresh did not cover every change)"
            return Candidate("INCREMENTAL", False, None, why), {}
        change = _change(rt, PinnedTable.from_json(positions[table]), new)
        if change.kind == "not_append_only":
            read = [change_json(c) for c in [*changes.values(), change]]
            return Candidate("INCREMENTAL", False, None, change.reason or f"'{table}' changed", changes=read), {}
        changes[table] = change
    analysis = for_changes(analysis, [t for t, c in changes.items() if c.kind in APPLICABLE])
    changes = _netted_where_worth_it(rt, mv, inp, analysis, changes)
    inputs = {
        t: IncrementalInput(c.old, c.delta, c.old.snapshot_id)
        if c.kind in APPLICABLE
        else IncrementalInput(inp.pinned[t], None, c.old.snapshot_id)
        for t, c in changes.items()
    }
    return _estimate(rt, mv, inp, analysis, changes), inputs


def for_changes(analysis: IvmAnalysis, changed: Collection[str]) -> IvmAnalysis:
    """``analysis`` as it maintains a change of the tables ``changed``: a query maintained
    through a correlation key (:mod:`sparkmv.analysis.correlated`) whose change reaches a
    table the key does not bind is maintained by affected-key recomputation of its group
    keys instead (over the same augmented query, so the MV's state columns are recomputed
    with its rows)."""
    if analysis.correlated is None or analysis.correlated.problem(changed) is None:
        return analysis
    return without_correlation(analysis)


def _change(rt: Runtime, consumed: PinnedTable, new: PinnedTable) -> BaseChange:
    """The change of one base table since ``consumed``: appended files, or for a
    refreshable table the signed changelog rows of its later reload runs."""
    name = ObjectName.parse(new.name, allow_reserved=True)
    if new.kind == "refreshable" and consumed.kind == "refreshable":
        delta, reason = changelog_delta(consumed, new, rt.iceberg.load(changelog_name(name)))
        if reason is not None:
            return BaseChange(new.name, NOT_APPEND_ONLY, reason, consumed, None)
        if delta is None:
            return BaseChange(new.name, UNCHANGED, None, new, None)
        part = delta.partitions[""]
        return BaseChange(new.name, APPEND, None, consumed, delta, part.bytes, part.rows)
    if name.catalog:  # a table of an external Iceberg catalog
        from sparkmv.sources.external import load_table

        return base_change(consumed, new, load_table(name, new.catalog_properties))
    return base_change(consumed, new, rt.iceberg.load(name) if new.kind == "iceberg" else None)


def _netted_where_worth_it(
    rt: Runtime, mv: MvDefinition, inp: PlanInput, analysis: IvmAnalysis, changes: dict[str, BaseChange]
) -> dict[str, BaseChange]:
    """``changes``, each measured by its netted rows (:func:`netting.netted`), read now where
    AUTO should pay for it: a change of at most :data:`SIGNED_FIXED_BYTES` always (for
    AUTO's delta rules); a dearer one only when INCREMENTAL could win at all (its estimate,
    with each such change at this MV's share of reading it, under FULL's) and that share is
    at most this MV's FULL read. The share of a copy-on-write change is its netting
    (:func:`netting.netting_bytes`), whole for a refresh alone, split among the MVs of a
    refresh pass that consume it; that of a merge-on-read change is split among the MVs it
    serves (:func:`netting.shared_read_bytes`)."""
    full = _full_candidate(inp).estimate_bytes or 0
    pending = {
        t
        for t, c in changes.items()
        if netting.iceberg_signed(c)
        and c.delta is not None
        and c.delta_bytes > SIGNED_FIXED_BYTES  # netting a small rewrite costs little either way
        and change_cache.cached_rows(rt.iceberg.warehouse, c.delta) is None
    }
    # An affected-key recomputation reads the new input whole: netting a rewrite for it
    # rarely pays, while a merge-on-read change is cheap to read and shared.
    exact = all(netting.read_exactly(changes[t]) for t in pending)
    eager = mv.properties.refresh_mode == "AUTO" and (analysis.keyed is None or exact)
    # This MV's cost of reading each pending change: a copy-on-write one whole, a
    # merge-on-read one its share; with a rewrite netted to nothing, could INCREMENTAL win?
    cost = {t: netting.shared_read_bytes(rt, changes[t]) for t in pending}
    if eager and pending:
        # A change already in the change cache counts as its netted rows (not its files).
        floor = {
            t: replace(c, delta_bytes=cost[t] if netting.read_exactly(c) else 0)
            if t in pending
            else netting.netted(rt, c, False)
            for t, c in changes.items()
        }
        estimate = _estimate(rt, mv, inp, analysis, floor, assume=True).estimate_bytes
        eager = estimate is not None and estimate < full
    limit = max(full, SIGNED_FIXED_BYTES)
    return {t: netting.netted(rt, c, eager and cost.get(t, c.delta_bytes) <= limit) for t, c in changes.items()}


def _static_problem(rt: Runtime, mv: MvDefinition, inp: PlanInput, analysis: IvmAnalysis) -> str | None:
    """Why INCREMENTAL cannot serve this run, before looking at the change; or None."""
    if analysis.reason is not None:
        return analysis.reason
    if analysis.aggregate and not has_state_columns(rt.iceberg, mv.name, analysis):
        return (
            f"MV '{mv.name}' has no incremental state columns "
            "(it was created with refresh_mode = 'FULL' or 'PCT', or before incremental refresh)"
        )
    keys = {c.name for c in analysis.columns if c.role == "group"}
    if analysis.aggregate and mv.partition_by is not None and mv.partition_by.lower() not in keys:
        # A group's partition would move when its aggregate changes: only GROUP BY keys stay put.
        return f"the partition column '{mv.partition_by}' is an aggregate, not a GROUP BY key"
    if inp.request.start is not None or inp.request.end is not None:
        return "a PARTITION START/END range refreshes whole partitions"
    if inp.request.force or mv.properties.partition_refresh_strategy == "FORCE":
        return "FORCE recomputes partitions"
    if mv.properties.partition_ttl is not None:
        return "partition_ttl drops partitions, which PCT does"
    if mv.properties.excluded_refresh_tables:
        return "excluded_refresh_tables leaves changes unapplied, which PCT tracks"
    return None


def has_state_columns(store: IcebergStore, name: ObjectName, analysis: IvmAnalysis) -> bool:
    """True when the MV's Iceberg table holds every hidden state column ``analysis`` needs."""
    names = {f.name.lower() for f in store.load(name).schema().fields}
    return all(c.lower() in names for c in analysis.state_columns)


def _estimate(
    rt: Runtime,
    mv: MvDefinition,
    inp: PlanInput,
    analysis: IvmAnalysis,
    changes: dict[str, BaseChange],
    assume: bool = False,
) -> Candidate:
    """The INCREMENTAL candidate's estimate and the change-ratio cap (see module
    :mod:`sparkmv.refresh.incremental.candidates`); ``assume``: a signed change not yet
    read counts as if its probes found nothing (the floor estimate)."""
    costs = _costs(rt, mv, inp, analysis, changes, assume)
    changed = costs.changed
    parts = cost_text(analysis, costs, changes)
    base_bytes = sum(inp.pinned[t].total_bytes() for t in changed) or 1
    shares = (netting.changed_share(c, inp.pinned[t], inp.pinned[t].total_bytes()) for t, c in changed.items())
    ratio = sum(shares) / base_bytes
    limit = mv.properties.incremental_max_change_ratio
    read = [change_json(c) for _, c in sorted(changes.items())]
    if changed and ratio > limit and mv.properties.refresh_mode == "AUTO":
        why = f"change ratio {ratio:.2f} exceeds incremental_max_change_ratio {limit:g} ({'; '.join(parts)})"
        return Candidate("INCREMENTAL", False, costs.total, why, changes=read)
    return Candidate("INCREMENTAL", True, costs.total, "; ".join(parts), changes=read)


def _costs(
    rt: Runtime, mv: MvDefinition, inp: PlanInput, analysis: IvmAnalysis, changes: dict[str, BaseChange], assume: bool
) -> Costs:
    """The :class:`Costs` of refreshing ``mv`` incrementally from ``changes``."""
    changed = {t: c for t, c in changes.items() if c.kind in APPLICABLE}
    load = lambda p: iceberg_table(rt, p)  # noqa: E731
    location = rt.iceberg.load(mv.name).location() if changed else ""
    kept = kept_states(location, analysis, changes) if changed else {}
    if mv.properties.refresh_mode == "INCREMENTAL" and not assume:
        # A strict run reads its signed changes anyway: read them now, into the change
        # cache, where the probes find their keys.
        for c in changed.values():
            if c.kind == SIGNED:
                netting.netted(rt, c, True)
    if analysis.correlated is not None and changed:
        return _correlated_costs(rt, (mv, location), inp, analysis, (changes, changed), assume)
    prober = _stage_prober(rt, inp.pinned, changed, assume)
    join = staged_joined_bytes(analysis, inp.pinned, changed, load, kept, prober) if changed else None
    empty = _probed(rt, analysis, inp.pinned, changed, assume) if join is None and changed else {}
    join = join or joined_bytes(analysis, inp.pinned, changed, load, {k: e.probed_bytes for k, e in empty.items()})
    return Costs(
        changed,
        join,
        empty,
        kept,
        appended=sum(c.delta_bytes for c in changed.values()),
        rewritten=_rewritten_bytes(rt, mv, analysis, changed) if changed else 0,
        recomputed=_recomputed_bytes(inp, analysis, changed),
        keyed=_keyed_bytes(inp) if analysis.keyed is not None and changed else 0,
        staged=stage_bytes(inp.pinned, analysis.stages, changed, load, kept, prober) if changed else 0,
        fixed=SIGNED_FIXED_BYTES if any(c.kind == SIGNED for c in changed.values()) else 0,
        terms=JOIN_TERM_FIXED_BYTES * len(changed) if len(inp.pinned) > 1 and analysis.keyed is None else 0,
    )


def _correlated_costs(
    rt: Runtime,
    target: tuple[MvDefinition, str],
    inp: PlanInput,
    analysis: IvmAnalysis,
    changes: tuple[dict[str, BaseChange], dict[str, BaseChange]],
    assume: bool,
) -> Costs:
    """The :class:`Costs` of a refresh through a correlation key (``target``: the MV and its
    table's location; ``changes``: every base table's, and the applied ones): from the
    reduced state when one is kept
    (:func:`~sparkmv.refresh.incremental.reduced_state.reduced_bytes`), else the bound
    tables read filtered to the touched keys."""
    assert analysis.correlated is not None
    mv, location = target
    every, changed = changes
    used = used_columns(parse_query(analysis.augmented_sql))
    from_state = reduced_bytes(location, analysis.correlated, inp.pinned, every, used)
    if from_state is None:
        read, state = correlated_bytes(rt, analysis.correlated, inp.pinned, changed, assume), 0
    else:
        read, state = from_state
    whole = sum(p.total_bytes() for p in inp.pinned.values())
    return Costs(
        changed,
        Joined(read, whole, ()),
        {},
        {},
        appended=sum(c.delta_bytes for c in changed.values()),
        rewritten=_rewritten_bytes(rt, mv, analysis, changed),
        recomputed=0,
        keyed=0,
        staged=0,
        fixed=SIGNED_FIXED_BYTES if any(c.kind == SIGNED for c in changed.values()) else 0,
        terms=2 * JOIN_TERM_FIXED_BYTES,  # the query over the new side and over the old one
        reduced=state,
    )


def _probed(
    rt: Runtime,
    analysis: IvmAnalysis,
    pinned: dict[str, PinnedTable],
    changed: dict[str, BaseChange],
    assume: bool,
) -> dict[tuple[str, str], probe.Emptied]:
    """The probes of the delta terms of signed changes (:mod:`sparkmv.refresh.incremental.probe`),
    run now unless ``assume``; none for an affected-key recomputation."""
    if analysis.keyed is not None or not any(c.kind == SIGNED for c in changed.values()):
        return {}
    from sparkmv.analysis.query import parse_query

    query = parse_query(analysis.merged_sql or analysis.augmented_sql)
    return probe.term_emptied(rt, query, pinned, {t: c.delta for t, c in changed.items()}, assume)


def _stage_prober(
    rt: Runtime, pinned: dict[str, PinnedTable], changed: dict[str, BaseChange], assume: bool
) -> probe.Prober | None:
    """The probes of the inner stages' reads (:mod:`sparkmv.refresh.incremental.stage_cost`)
    when a change is signed."""
    if not any(c.kind == SIGNED for c in changed.values()):
        return None
    return probe.Prober(rt, pinned, {t: c.delta for t, c in changed.items()}, assume)


JOIN_TERM_FIXED_BYTES = 16 * 1024 * 1024
"""The fixed cost of one delta term of a join (a changed base table joined with the others),
in bytes read: its own Spark jobs (the semi-join reduction's key collection, the term, its
caching). Measured on TPC-H SF 0.1 after RF1 (bench/RESULTS.md, TPC-H refresh): forced
INCREMENTAL of Q3, Q5, Q10 and Q12 read 1.6-3.9 MiB yet took 3-5 s against 1.8-3 s for FULL
reading ~23 MiB, so two terms cost about what ~30 MiB of reading does; at SF 1 the joins'
~230 MiB outweigh it."""

SIGNED_FIXED_BYTES = 32 * 1024 * 1024
"""The fixed cost of an INCREMENTAL run that applies signed rows (Iceberg / Delta deletes and
updates), in bytes read: it runs about six more Spark jobs than a recomputation (the signed
terms cached, the affected partitions, the flagged MIN / MAX groups, the merge), which on
TPC-H SF 0.1 (bench/RESULTS.md, deletes and updates) cost more than FULL reading ~6 MiB of ``orders``
or ~22 MiB of the three joined tables; so AUTO recomputes tables this small."""


def _keyed_bytes(inp: PlanInput) -> int:
    """Bytes an affected-key recomputation costs about as much as reading: the whole new
    input. It scans it (unless its key filter prunes partitions or row groups), though it
    joins and aggregates only the touched keys' rows; measured on TPC-H SF 0.1
    (bench/RESULTS.md, TPC-H refresh), every forced affected-key recomputation was slower than
    FULL (1.1x to 7x: the key queries and the merge are Spark jobs of their own), and
    counting a quarter of the input made AUTO pick it for Q22 at 2.1x FULL's time. Also
    over inner stages kept as state (TPC-H Q15 at SF 1: 7.4 s against a 1 s FULL that
    reads one quarter of ``lineitem``), as their Spark jobs, not their reads, dominate."""
    return sum(p.total_bytes() for p in inp.pinned.values())


def _recomputed_bytes(inp: PlanInput, analysis: IvmAnalysis, changed: dict[str, BaseChange]) -> int:
    """Bytes the recomputation of MIN / MAX groups may read: a group is recomputed (from its
    rows of the new input, pruned by its key) only when a retracted value reaches its
    extreme, so about one base partition of every table per retracting file, at most the
    whole input (FULL's read)."""
    if not any(c.role in ("min", "max") for c in analysis.columns):
        return 0
    files = sum(c.files_read for c in changed.values() if c.kind == SIGNED and c.rows_retracted)
    if not files:
        return 0
    full = sum(p.total_bytes() for p in inp.pinned.values())
    widest = max(len(p.partitions) for p in inp.pinned.values()) or 1
    return min(full, files * full // widest)


def _rewritten_bytes(rt: Runtime, mv: MvDefinition, analysis: IvmAnalysis, changed: dict[str, BaseChange]) -> int:
    """Bytes of the MV the merge rewrites: none for an append-only projection; the whole
    MV when unpartitioned; else about one MV partition per changed file."""
    if not analysis.aggregate and not any(c.kind == SIGNED for c in changed.values()):
        return 0
    parts = IcebergStore.partitions(rt.iceberg.load(mv.name))
    total = sum(p.size_bytes for p in parts)
    if mv.partition_by is None or not parts:
        return total
    files = sum(len(p.files) for c in changed.values() if c.delta is not None for p in c.delta.partitions.values())
    return min(total, max(1, files) * total // len(parts))
