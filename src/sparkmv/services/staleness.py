"""Partition staleness of an MV as the planner sees it: for each MV partition, whether the
next refresh would recompute it and why.

The one answer front ends show, decided by the planner itself (:func:`sparkmv.refresh.planner.plan_refresh`
over :func:`sparkmv.refresh.context.plan_input`: every base table pinned now, its partition
versions against the MV's version map, mapped onto MV partitions through the partition
lineage), so it says what ``EXPLAIN REFRESH`` says: ``default.lineitem partition
l_shipmonth=1995-06 changed`` for a changed reference partition, ``non-reference table
default.lineitem changed`` for every partition when a table without lineage changed.

Plain Python over catalog-level information (no Spark): the MV's
``partition_retention_condition`` is evaluated by Spark, so it is left out here (a partition
it would drop shows as the planner sees it without the condition); the refresh mode is the
planner's own choice between PCT and FULL (an AUTO MV that would apply its change
incrementally recomputes, per partition, what PCT would).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from sparkmv.catalog.models import ObjectRow
from sparkmv.refresh.context import MvDefinition, pin_all, plan_input
from sparkmv.refresh.planner import OUTSIDE_LABEL, PartitionValue, Plan, RefreshRequest, plan_refresh
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.partition_values import sort_key

WHOLE_MV = "<all>"
"""Key of :attr:`PartitionStaleness.reasons` when the plan recomputes the whole MV."""


@dataclass(frozen=True)
class PartitionStaleness:
    """What the next refresh of one MV would recompute, per MV partition.

    Attributes:
        mode: the planner's mode (``SKIP`` when up to date, ``PCT``, ``FULL``).
        reason: the planner's reason for the mode.
        changed_base_partitions: qualified base table -> changed partition paths.
        reasons: MV partition value -> why it would be recomputed; a whole-MV plan has the
            one key :data:`WHOLE_MV`.
        new_partitions: partitions the refresh would create (not published yet), sorted.
        published: number of MV partitions published now.
    """

    mode: str
    reason: str
    changed_base_partitions: dict[str, list[str]]
    reasons: dict[PartitionValue, str]
    whole_mv: str | None = None
    new_partitions: tuple[PartitionValue, ...] = ()
    published: int = 0

    @property
    def is_fresh(self) -> bool:
        """True when the next refresh would recompute nothing."""
        return self.mode == "SKIP"

    def reason_for(self, value: PartitionValue) -> str | None:
        """Why partition ``value`` would be recomputed, None when it would not."""
        return self.whole_mv if self.whole_mv is not None else self.reasons.get(value)

    def scope(self) -> str:
        """What the next refresh recomputes, in words: ``nothing``, ``every MV partition (80)``,
        ``1 of 80 MV partitions``, ``1 new MV partition``, or both."""
        if self.is_fresh:
            return "nothing"
        if self.whole_mv is not None:
            return "the whole MV"
        old, new = len(self.reasons) - len(self.new_partitions), len(self.new_partitions)
        parts = []
        if old:
            parts.append(
                f"every MV partition ({old})" if old == self.published else f"{old} of {self.published} MV partitions"
            )
        if new:
            parts.append(f"{new} new MV partition{'s' if new != 1 else ''}")
        return ", ".join(parts)

    @property
    def changed_base_count(self) -> int:
        """Number of changed base partitions."""
        return sum(len(v) for v in self.changed_base_partitions.values())


def _without_spark(row: ObjectRow) -> MvDefinition:
    mv = MvDefinition.from_row(row)
    return dataclasses.replace(mv, properties=dataclasses.replace(mv.properties, partition_retention_condition=None))


def plan_now(rt: Runtime, row: ObjectRow) -> tuple[Plan, set[PartitionValue]]:
    """The planner's plan of a manual refresh of MV ``row`` now and the MV's published
    partitions.

    Raises:
        SourceError: when a base table is gone or cannot be read.
    """
    mv = _without_spark(row)
    pinned = pin_all(rt.catalog, rt.iceberg, mv.base_tables)
    inp = plan_input(rt, mv, pinned, RefreshRequest())
    return plan_refresh(inp), set(inp.mv_partitions)


def partition_staleness(rt: Runtime, row: ObjectRow) -> PartitionStaleness:
    """Per MV partition, whether the next refresh of MV ``row`` would recompute it and why.

    Raises:
        SourceError: when a base table is gone or cannot be read.
    """
    plan, published = plan_now(rt, row)
    return staleness_of(plan, published)


def staleness_of(plan: Plan, published: set[PartitionValue]) -> PartitionStaleness:
    """:class:`PartitionStaleness` from a plan and the MV's published partitions."""
    base = (plan.mode, plan.reason, plan.changed_base_partitions)
    if plan.mode == "SKIP":
        return PartitionStaleness(*base, {}, published=len(published))
    if WHOLE_MV in plan.partition_reasons or plan.replace_all:
        why = plan.partition_reasons.get(WHOLE_MV) or plan.reason
        return PartitionStaleness(*base, {}, whole_mv=why, published=len(published))
    reasons: dict[PartitionValue, str] = {}
    for chunk in plan.chunks:
        for value in chunk.partitions or []:
            label = "NULL" if value is None else value
            reasons[value] = plan.partition_reasons.get(label) or plan.partition_reasons.get(OUTSIDE_LABEL, plan.reason)
    new = tuple(sorted((v for v in reasons if v not in published), key=sort_key))
    return PartitionStaleness(*base, reasons, new_partitions=new, published=len(published))
