"""The INCREMENTAL candidate's estimate in parts, and its reason text (a user
sees what the estimate counted: each change, the joins after pruning, the probes, the
inner stages, the fixed costs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkmv.analysis.incremental import IvmAnalysis
from sparkmv.refresh.incremental import probe
from sparkmv.refresh.incremental.candidates import size_text
from sparkmv.refresh.incremental.pruned import Joined
from sparkmv.sources.changes import APPLICABLE, SIGNED, BaseChange
from sparkmv.sources.delta_cdf import SOURCE_TEXT as FEED_TEXT
from sparkmv.sources.delta_cdf import from_feed


@dataclass(frozen=True)
class Costs:
    """The parts of an INCREMENTAL refresh's estimate, in bytes read (or their equivalent).

    Attributes:
        changed: the changed base tables whose change the refresh applies.
        join: what the delta terms join of the other tables.
        empty: ``(changed table, other table)`` -> the probe that emptied that term's read.
        kept: inner stage -> the bytes of its kept state.
        appended, rewritten, recomputed, keyed, staged, fixed, terms: the change's bytes,
            the MV's bytes rewritten, the MIN/MAX groups recomputed, the touched groups
            recomputed, the inner stages recomputed, the fixed cost of signed rows and of
            the join terms.
        reduced: bytes of the reduced state a correlation key's refresh reads instead of
            its kept tables (:mod:`sparkmv.refresh.incremental.reduced_state`); 0: none.
    """

    changed: dict[str, BaseChange]
    join: Joined
    empty: dict[tuple[str, str], probe.Emptied]
    kept: dict[str, int]
    appended: int
    rewritten: int
    recomputed: int
    keyed: int
    staged: int
    fixed: int
    terms: int
    reduced: int = 0

    @property
    def total(self) -> int:
        parts = (self.appended, self.join.bytes, self.rewritten, self.recomputed, self.keyed, self.staged, self.fixed)
        return sum(parts) + self.terms


def cost_text(analysis: IvmAnalysis, costs: Costs, changes: dict[str, BaseChange]) -> list[str]:
    """The parts of the INCREMENTAL candidate's reason: each change, then each cost."""
    changed, kept, join = costs.changed, costs.kept, costs.join
    parts = [change_text(c) for _, c in sorted(changed.items())] or ["no base table changed"]
    if analysis.keyed is not None:
        parts.insert(0, f"{analysis.technique} of the group keys ({', '.join(analysis.keyed.keys)})")
    if analysis.correlated is not None:
        parts.insert(0, f"{analysis.technique} ({analysis.correlated.key}): the touched keys' rows, new minus old")
    if costs.keyed:
        parts.append(
            f"recomputes the touched groups from the new input filtered by their keys (~{size_text(costs.keyed)})"
        )
    if kept:
        names = ", ".join(sorted(kept))
        parts.append(
            f"inner stages ({names}) merge their change into their kept state ({size_text(sum(kept.values()))})"
        )
    if costs.staged and any(s.name not in kept for s in analysis.stages):
        names = ", ".join(s.name for s in analysis.stages if s.name not in kept)
        staged = size_text(costs.staged)
        parts.append(f"inner stages ({names}) recompute their touched keys over the old and new input (~{staged})")
    for (table, other), e in sorted(costs.empty.items()):
        joins = "only its retracted rows join" if e.retracted else "no row joins"
        parts.append(f"term of '{table}': '{other}' {joins} ({e.column} probed for the keys of {e.source})")
    if costs.reduced:
        parts.append(f"its kept tables read from its reduced state ({size_text(costs.reduced)}), not scanned")
    if analysis.correlated is not None:
        parts.append(f"reads ~{size_text(join.bytes)} of its tables filtered to the touched keys")
    elif join.pruned_on:
        parts.append(
            f"joins {size_text(join.bytes)} of {size_text(join.whole)} (min/max pruning on {', '.join(join.pruned_on)})"
        )
    elif join.bytes:
        parts.append(f"joins {size_text(join.bytes)}")
    if costs.rewritten:
        parts.append(f"rewrites ~{size_text(costs.rewritten)} of the MV")
    if costs.recomputed:
        parts.append(f"recomputes MIN/MAX groups reaching a retracted value, reading ~{size_text(costs.recomputed)}")
    if costs.fixed:
        parts.append(f"applying signed rows costs about as much as reading {size_text(costs.fixed)}")
    if costs.terms and analysis.correlated is not None:
        parts.append(f"the query over each side costs about as much as reading {size_text(costs.terms)}")
    elif costs.terms:
        parts.append(f"{len(changed)} join term(s) cost about as much as reading {size_text(costs.terms)}")
    compactions = sum(c.compactions for c in changes.values())
    if compactions:
        parts.append(f"{compactions} compaction snapshot(s) skipped")
    return parts


def change_json(change: BaseChange) -> dict[str, Any]:
    """The change of one base table as stored with the INCREMENTAL candidate
    (:attr:`Candidate.changes`)."""
    return {
        "table": change.table,
        "kind": change.kind,
        "rows_added": change.delta_rows if change.kind in APPLICABLE else 0,
        "rows_retracted": change.rows_retracted,
        "files_read": change.files_read or _files(change),
        "bytes_read": change.delta_bytes,
        "reason": change.reason,
        "source": FEED_TEXT if from_feed(change.delta) else None,
    }


def _files(change: BaseChange) -> int:
    return sum(len(p.files) for p in change.delta.partitions.values()) if change.delta is not None else 0


def change_text(change: BaseChange) -> str:
    """The change of one base table for the INCREMENTAL candidate's reason.

    >>> from sparkmv.sources.changes import APPEND
    >>> from sparkmv.sources.pinned import PinnedTable
    >>> old = PinnedTable("t", "iceberg", "{}", [])
    >>> change_text(BaseChange("t", SIGNED, None, old, old, 2048, 10, rows_retracted=4, files_read=2))
    "base table 't': +10 / -4 rows (signed change log), 2 files read (2.0 KiB)"
    >>> change_text(BaseChange("t", APPEND, None, old, old, 10, None))
    "base table 't': 10 bytes appended"
    """
    if change.kind == SIGNED and change.netted_rows is not None:
        return (
            f"base table '{change.table}': {change.netted_rows} rows netted from +{change.delta_rows or 0} / "
            f"-{change.rows_retracted} (signed change log, change cache: {size_text(change.delta_bytes)})"
        )
    if change.kind == SIGNED:
        source = f", {FEED_TEXT}" if from_feed(change.delta) else ""
        return (
            f"base table '{change.table}': +{change.delta_rows or 0} / -{change.rows_retracted} rows (signed change "
            f"log{source}), {change.files_read} files read ({size_text(change.delta_bytes)})"
        )
    rows = f" ({change.delta_rows} rows)" if change.delta_rows is not None else ""
    return f"base table '{change.table}': {size_text(change.delta_bytes)} appended{rows}"
