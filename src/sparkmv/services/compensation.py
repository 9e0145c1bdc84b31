"""Partition compensation for query rewrite: which partitions of a stale MV must be computed
from the base, and from which base partitions.

Decided as a PCT refresh of the MV would decide it now (:func:`sparkmv.refresh.planner.plan_refresh`
over :func:`sparkmv.refresh.context.plan_input`: base versions against the MV's version map,
mapped onto MV partitions through the partition lineage), with the properties that only
shape a refresh (mode, strategy, TTL, retention, excluded tables, automatic limits) set so the
plan names every stale partition. The base partitions feeding them come from the same
function a PCT chunk reads through (:func:`sparkmv.refresh.chunking.base_partitions_for`).

Not compensated, with the reason: an unpartitioned MV or one whose partition lineage is
unknown, a change in a non-reference table (every partition would be stale), a change
reaching MV partitions no reference partition maps to, and an MV whose lineage is not
complete because of an outer join (its NULL-padded rows may change in any partition).
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from sparkmv.analysis.query import parse_query
from sparkmv.analysis.rewrite import BaseFilter, MvCandidate, StalePartitions
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.refresh.chunking import Chunk, base_partitions_for
from sparkmv.refresh.context import MvDefinition, pin_all, plan_input
from sparkmv.refresh.planner import OUTSIDE_LABEL, Plan, PlanInput, RefreshRequest, plan_refresh
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.partition_values import sort_key


def compensate(rt: Runtime, row: ObjectRow, candidate: MvCandidate) -> MvCandidate | str:
    """``candidate`` with its stale partitions to compute from the base (:attr:`MvCandidate.stale`;
    None when nothing is stale any more), or why they cannot be computed from the base
    (``not compensated from base: non-reference table default.cust changed``).

    Never raises for a base table that cannot be read: that is a reason.
    """
    mv = MvDefinition.from_row(row)
    if mv.partition_by is None:
        return "not compensated from base: unpartitioned MV"
    try:
        stale = stale_partitions(_plan_input(rt, mv), row.definition or "")
    except SparkMvError as exc:
        return f"not compensated from base: {exc}"
    if isinstance(stale, str):
        return f"not compensated from base: {stale}"
    return dataclasses.replace(candidate, stale=stale)


def stale_partitions(inp: PlanInput, definition: str) -> StalePartitions | str | None:
    """The stale partitions of the MV whose planner input is ``inp`` (its defining query
    ``definition``), as a PCT refresh now would compute them, with the base partitions
    feeding them; None when none is stale; or why they cannot be computed from the base.

    Raises:
        SparkMvError: when the planner's input cannot be evaluated.
    """
    if inp.partition_by is None:
        return "unpartitioned MV"
    if not inp.lineage.complete and any(j.args.get("side") for j in parse_query(definition).find_all(exp.Join)):
        # A NULL-padded row of an outer join can appear or vanish in a partition no changed
        # base partition maps to: only a full recomputation would be right.
        return "its query has an outer join: a base change may reach partitions the lineage does not map"
    plan = plan_refresh(
        dataclasses.replace(inp, properties=_every_stale_partition(inp.properties), request=RefreshRequest())
    )
    why = _not_compensable(plan)
    if why is not None:
        return why
    values = sorted(plan.partitions, key=lambda v: sort_key(v, inp.partition_kind))
    if not values:
        return None
    return StalePartitions(inp.partition_by, inp.partition_kind, tuple(values), definition, _base_filters(inp, values))


def _plan_input(rt: Runtime, mv: MvDefinition) -> PlanInput:
    """The planner's input for a refresh of ``mv`` now (no retention condition: it would be
    evaluated by Spark, and :func:`stale_partitions` ignores it)."""
    mv = dataclasses.replace(mv, properties=_every_stale_partition(mv.properties))
    pinned = pin_all(rt.catalog, rt.iceberg, mv.base_tables)
    return plan_input(rt, mv, pinned, RefreshRequest())


def _every_stale_partition(props: MvProperties) -> MvProperties:
    """``props`` with the properties that only shape a refresh set so a PCT plan names
    every stale partition."""
    return dataclasses.replace(
        props,
        refresh_mode="PCT",
        partition_refresh_strategy="ADAPTIVE",
        partition_ttl=None,
        partition_retention_condition=None,
        excluded_refresh_tables=(),  # an excluded table's change still makes the MV stale
        auto_refresh_partitions_limit=None,
    )


def _not_compensable(plan: Plan) -> str | None:
    """Why the stale partitions of ``plan`` cannot be computed from the base, or None."""
    if plan.mode == "SKIP":
        return None
    if plan.mode != "PCT":
        return plan.reason.removeprefix("PCT impossible: ").split("; changed: ")[0]
    if OUTSIDE_LABEL in plan.partition_reasons:
        return f"rows outside the reference partitions changed ({plan.partition_reasons[OUTSIDE_LABEL]})"
    for why in plan.partition_reasons.values():
        if why.startswith("non-reference table"):
            return why
    return None


def _base_filters(inp: PlanInput, values: list[str | None]) -> tuple[BaseFilter, ...]:
    """Per reference table, the base partitions feeding the MV partitions ``values``: the
    paths a PCT chunk of them reads, as values of the mapped partition column. Only with
    complete lineage (no outer join, every row's partition from a reference table);
    otherwise the base is read whole and only the MV partition column is filtered."""
    if not inp.lineage.complete:
        return ()
    paths = base_partitions_for(Chunk(list(values)), inp.lineage, inp.pinned)
    out = []
    for table, chosen in sorted(paths.items()):
        column = inp.lineage.mappings[table].base_column
        pinned = inp.pinned[table]
        kind = pinned.partition_kinds().get(column.lower(), "string")
        found = sorted({pinned.value(p, column) for p in chosen}, key=lambda v: sort_key(v, kind))
        out.append(BaseFilter(ObjectName.parse(table, allow_reserved=True), column, kind, tuple(found)))
    return tuple(out)
