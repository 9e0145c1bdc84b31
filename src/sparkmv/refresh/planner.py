"""The refresh planner: which MV partitions to refresh, in which mode, cut into chunks.

Plain Python over the pinned input and the version map; no Spark, no catalog. The plan
is stored in the run, so a resumed run executes exactly the same chunks.

Modes (``refresh_mode``): FULL recomputes everything; PCT recomputes the MV partitions
whose base partitions changed (partition change tracking, as StarRocks); AUTO picks PCT
when the partition lineage is known and the MV was refreshed before, else FULL. A plan
with nothing to do has mode ``SKIP`` and reason ``up to date``.

Strategies (``partition_refresh_strategy``), as StarRocks': STRICT puts
``partition_refresh_number`` partitions in each chunk; ADAPTIVE adds partitions to a
chunk while its base rows and bytes stay under ``mv_max_rows_per_refresh`` /
``mv_max_bytes_per_refresh`` (at least one per chunk); FORCE refreshes every partition in
range, changed or not.
"""

from __future__ import annotations

from datetime import date

from sparkmv.refresh.chunking import Chunk, base_partitions_for, cut_chunks
from sparkmv.refresh.plans import PartitionValue, Plan, PlanInput, RefreshRequest, RetentionFilter
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.partition_values import sort_key, to_text

__all__ = [
    "Chunk",
    "PartitionValue",
    "Plan",
    "PlanInput",
    "RefreshRequest",
    "RetentionFilter",
    "base_partitions_for",
    "plan_refresh",
    "sort_key",
]


def changed_partitions(pinned: PinnedTable, version_map: dict[tuple[str, str], str]) -> list[str]:
    """Partition paths of ``pinned`` that appeared, disappeared or changed version."""
    consumed = {path: v for (table, path), v in version_map.items() if table == pinned.name}
    current = pinned.versions()
    return sorted(p for p in set(consumed) | set(current) if consumed.get(p) != current.get(p))


def _mv_value(inp: PlanInput, table: str, path: str) -> PartitionValue:
    mapping = inp.lineage.mappings[table]
    return mapping.transform.apply(inp.pinned[table].value(path, mapping.base_column))


def _image(inp: PlanInput) -> dict[PartitionValue, list[tuple[str, str]]]:
    """MV partition -> the reference base partitions (table, path) that feed it."""
    out: dict[PartitionValue, list[tuple[str, str]]] = {}
    for table in inp.lineage.mappings:
        pinned = inp.pinned.get(table)
        if pinned is None:
            continue
        for path in pinned.partitions:
            out.setdefault(_mv_value(inp, table, path), []).append((table, path))
    return out


def _ttl_cutoff(inp: PlanInput) -> str | None:
    ttl = inp.properties.partition_ttl
    if ttl is None:
        return None
    n, unit = ttl
    d = inp.today
    if unit == "DAY":
        from datetime import timedelta

        return to_text(d - timedelta(days=n))
    months = d.year * 12 + (d.month - 1) - (n if unit == "MONTH" else 12 * n)
    return to_text(date(months // 12, months % 12 + 1, 1))


def _expired(value: PartitionValue, cutoff: str | None) -> bool:
    # Partition values of date-like MVs are yyyy, yyyy-MM or yyyy-MM-dd text: comparing the
    # common prefix with the cutoff date decides whether the whole partition is older.
    if cutoff is None or value is None:
        return False
    text = str(value)
    return text < cutoff[: len(text)] if len(text) >= 4 and text[:4].isdigit() else False


def _dropped(inp: PlanInput, values: set[PartitionValue]) -> set[PartitionValue]:
    """Values outside ``partition_ttl`` or ``partition_retention_condition``."""
    cutoff = _ttl_cutoff(inp)
    out = {v for v in values if _expired(v, cutoff)}
    if inp.properties.partition_retention_condition and inp.retention is not None and values:
        out |= values - inp.retention(values)
    return out


def plan_refresh(inp: PlanInput) -> Plan:
    """Decide mode, partitions and chunks for one refresh of one MV.

    >>> from sparkmv.analysis.lineage import Lineage
    >>> from sparkmv.refresh.properties import MvProperties
    >>> from sparkmv.sources.pinned import PinnedPartition
    >>> pinned = {"default.t": PinnedTable("default.t", "parquet", "{}", [],
    ...           {"": PinnedPartition(["f"], "v1")})}
    >>> p = plan_refresh(PlanInput(None, Lineage({}), pinned, {("default.t", ""): "v1"}, set(), True,
    ...                            MvProperties()))
    >>> (p.mode, p.reason, len(p.chunks))
    ('SKIP', 'up to date', 0)
    """
    props = inp.properties
    excluded = set(props.excluded_refresh_tables)
    changes = {t: changed_partitions(p, inp.version_map) for t, p in inp.pinned.items()}
    changes = {t: c for t, c in changes.items() if c}
    considered = {t: c for t, c in changes.items() if t not in excluded}
    all_consumed = {t: ["*"] for t in inp.pinned}
    force = inp.request.force or props.partition_refresh_strategy == "FORCE"
    mode, mode_reason = _choose_mode(inp)

    if not inp.refreshed_before:
        return _full_plan(inp, "first refresh", changes, all_consumed)
    expiring = mode == "PCT" and bool(_dropped(inp, set(inp.mv_partitions)))
    if not considered and not force and not expiring:
        return Plan("SKIP", "up to date", changed_base_partitions=changes, consumed=_excluded(changes, excluded))
    if mode == "FULL":
        return _full_plan(inp, _full_reason(mode_reason, considered), changes, all_consumed)
    return _pct_plan(inp, mode_reason, changes, considered, excluded, force)


def _choose_mode(inp: PlanInput) -> tuple[str, str]:
    """The mode (FULL or PCT) ``refresh_mode`` resolves to for this MV, and why."""
    partitioned = inp.partition_by is not None and inp.lineage.known
    mode = inp.properties.refresh_mode
    if mode in ("AUTO", "INCREMENTAL"):
        mode = "PCT" if partitioned else "FULL"
        if partitioned:
            reason = "AUTO: partition lineage known"
        elif inp.partition_by is None:
            reason = "AUTO: unpartitioned MV"
        else:
            reason = f"AUTO: partition lineage unknown ({inp.lineage.reason})"
    else:
        reason = f"refresh_mode = {mode}"
    if mode == "PCT" and not partitioned:
        mode, reason = "FULL", f"PCT impossible: {inp.lineage.reason or 'unpartitioned MV'}"
    return mode, reason


def _full_reason(mode_reason: str, considered: dict[str, list[str]]) -> str:
    """The reason of a FULL run after the first: the mode's reason and the changed tables,
    or ``FORCE`` when nothing changed (only a forced refresh gets here then)."""
    if not considered:
        return "FORCE"
    return mode_reason + "; changed: " + ", ".join(f"{t} ({len(c)} partitions)" for t, c in sorted(considered.items()))


def _pct_plan(
    inp: PlanInput,
    mode_reason: str,
    changes: dict[str, list[str]],
    considered: dict[str, list[str]],
    excluded: set[str],
    force: bool,
) -> Plan:
    """The PCT plan: changed reference partitions mapped onto MV partitions (SKIP when none
    is selected and nothing expires)."""
    image = _image(inp)
    universe = set(image) | set(inp.mv_partitions)
    dropped = _dropped(inp, universe)
    universe -= dropped
    # Partitions outside TTL / retention are removed once and never recomputed.
    expired = sorted((v for v in dropped if v in inp.mv_partitions), key=sort_key)
    non_reference = sorted(t for t in considered if t not in inp.lineage.mappings)
    rest_reason = _rest_reason(inp, image, considered, non_reference, force)
    # With a rest chunk, the partitions no reference partition maps to are computed there only.
    per_partition = {v for v in universe if v in image} if rest_reason is not None else universe
    reasons = _pct_reasons(inp, considered, non_reference, force, per_partition, image, dropped)
    selected = _select(inp, reasons, universe)
    chosen = set(selected)
    everything = chosen >= per_partition
    consumed = _excluded(changes, excluded)
    consumed.update(
        _consumed_base_partitions(inp, excluded, chosen, everything, dropped, image, rest_reason is not None)
    )
    if not selected and not expired and rest_reason is None:
        pending = [v for v in reasons if v not in chosen]
        why = "up to date" if not pending else f"up to date in range ({len(pending)} changed partitions outside)"
        return Plan("SKIP", why, changed_base_partitions=changes, consumed=consumed)
    chunks = _cut(selected, image, inp)
    labels = {_label(v): reasons[v] for v in selected}
    if rest_reason is not None:
        chunks.append(_rest_chunk(inp, image, dropped))
        labels[OUTSIDE_LABEL] = rest_reason
    if non_reference and not force:
        # Say in the run record why a PCT run rewrites every partition.
        mode_reason += f"; non-reference table {', '.join(non_reference)} changed: every partition"
    return Plan(
        "PCT",
        mode_reason,
        chunks=chunks,
        replace_all=False,
        drop_partitions=expired,
        changed_base_partitions=changes,
        partition_reasons=labels,
        consumed=consumed,
    )


def _pct_reasons(
    inp: PlanInput,
    considered: dict[str, list[str]],
    non_reference: list[str],
    force: bool,
    per_partition: set[PartitionValue],
    image: dict[PartitionValue, list[tuple[str, str]]],
    dropped: set[PartitionValue],
) -> dict[PartitionValue, str]:
    """MV partition -> why a PCT run refreshes it (before the range and the auto limit)."""
    if force:
        return dict.fromkeys(per_partition, "FORCE")
    if non_reference:
        return dict.fromkeys(per_partition, f"non-reference table {', '.join(non_reference)} changed")
    reasons: dict[PartitionValue, str] = {}
    for table, paths in sorted(considered.items()):
        for path in paths:
            v = _mv_value(inp, table, path)
            if v in per_partition:
                reasons.setdefault(v, f"{table} partition {path or '<all>'} {_change_kind(inp, table, path)}")
    if not _has_non_reference_inputs(inp):
        for v in inp.mv_partitions - set(image) - dropped:
            reasons.setdefault(v, "no base data remains")
    return reasons


def _change_kind(inp: PlanInput, table: str, path: str) -> str:
    """How a changed base partition changed: ``appeared``, ``disappeared`` or ``changed``."""
    if path not in _consumed_paths(inp, table):
        return "appeared"
    return "disappeared" if path not in inp.pinned[table].partitions else "changed"


def _select(inp: PlanInput, reasons: dict[PartitionValue, str], universe: set[PartitionValue]) -> list[PartitionValue]:
    """The partitions with a reason inside the request's range (and, for automatic runs,
    among the ``auto_refresh_partitions_limit`` newest), sorted."""
    selected = sorted((v for v in reasons if inp.request.in_range(v)), key=sort_key)
    limit = inp.properties.auto_refresh_partitions_limit
    if inp.request.automatic and limit:
        newest = sorted(universe, key=sort_key)[-limit:]
        selected = [v for v in selected if v in newest]
    return selected


def _consumed_base_partitions(
    inp: PlanInput,
    excluded: set[str],
    chosen: set[PartitionValue],
    everything: bool,
    dropped: set[PartitionValue],
    image: dict[PartitionValue, list[tuple[str, str]]],
    has_rest: bool,
) -> dict[str, list[str]]:
    """Base table -> partition paths a PCT run consumes: those of refreshed or dropped MV
    partitions (and, with a rest chunk, those outside ``image``); a non-reference table is
    consumed whole (``["*"]``) only when ``everything`` per-partition is refreshed."""
    consumed: dict[str, list[str]] = {}
    for table in inp.pinned:
        if table in excluded:
            continue
        if table not in inp.lineage.mappings:
            if everything:
                consumed[table] = ["*"]
            continue
        all_paths = set(inp.pinned[table].partitions) | _consumed_paths(inp, table)
        paths_done = sorted(
            p for p in all_paths if (v := _mv_value(inp, table, p)) in chosen | dropped or (has_rest and v not in image)
        )
        if paths_done:
            consumed[table] = paths_done
    return consumed


OUTSIDE_LABEL = "<outside reference partitions>"
"""Label (in ``partition_reasons``) of the rest chunk's partitions."""


def _has_non_reference_inputs(inp: PlanInput) -> bool:
    """True when rows may carry MV partition values no reference partition maps to (a NULL
    from a UNION ALL branch over an unpartitioned table, an outer join's padding): the
    lineage is not complete and some base table is not a reference table."""
    return not inp.lineage.complete and any(t not in inp.lineage.mappings for t in inp.pinned)


def _rest_reason(
    inp: PlanInput,
    image: dict[PartitionValue, list[tuple[str, str]]],
    considered: dict[str, list[str]],
    non_reference: list[str],
    force: bool,
) -> str | None:
    """Why a PCT run recomputes the partitions outside the reference tables' image (the
    rest chunk), or None when it need not: only with non-reference inputs and no range."""
    if not _has_non_reference_inputs(inp) or inp.request.start is not None or inp.request.end is not None:
        return None
    if force:
        return "FORCE"
    if non_reference:
        return f"non-reference table {', '.join(non_reference)} changed"
    for table, paths in sorted(considered.items()):
        if table in inp.lineage.mappings:
            for path in paths:
                if _mv_value(inp, table, path) not in image:
                    return f"{table} partition {path or '<all>'} disappeared"
    return None


def _rest_chunk(
    inp: PlanInput, image: dict[PartitionValue, list[tuple[str, str]]], dropped: set[PartitionValue]
) -> Chunk:
    """The chunk of every MV partition that no reference partition maps to: computed over
    all input, keeping the rows whose partition value is outside ``image``; it replaces
    the published partitions of that kind."""
    existing = sorted((v for v in inp.mv_partitions if v not in image and v not in dropped), key=sort_key)
    size, rows = _total_cost(inp)
    return Chunk(existing, size, rows, outside=sorted(image, key=sort_key))


def _consumed_paths(inp: PlanInput, table: str) -> set[str]:
    return {p for (t, p) in inp.version_map if t == table}


def _excluded(changes: dict[str, list[str]], excluded: set[str]) -> dict[str, list[str]]:
    # Changes of excluded tables are consumed without a refresh, so they are not reported
    # as stale forever.
    return {t: ["*"] for t in changes if t in excluded}


def _label(value: PartitionValue) -> str:
    return "NULL" if value is None else value


def _full_plan(inp: PlanInput, reason: str, changes: dict[str, list[str]], consumed: dict[str, list[str]]) -> Plan:
    if inp.partition_by is None or not inp.lineage.known:
        return Plan(
            "FULL",
            reason,
            chunks=[Chunk(None, *_total_cost(inp))],
            replace_all=True,
            changed_base_partitions=changes,
            partition_reasons={"<all>": reason},
            consumed=consumed,
        )
    image = _image(inp)
    dropped = _dropped(inp, set(image))
    values = sorted((v for v in image if v not in dropped), key=sort_key)
    ranged = inp.request.start is not None or inp.request.end is not None
    if ranged:
        # A range refreshes only its partitions: the rest of the MV stays, and only the
        # base partitions of the refreshed MV partitions are consumed.
        values = [v for v in values if inp.request.in_range(v)]
        chosen = set(values)
        consumed = {
            t: sorted(p for p in inp.pinned[t].partitions if _mv_value(inp, t, p) in chosen)
            for t in inp.lineage.mappings
            if t in inp.pinned
        }
    chunks = _cut(values, image, inp)
    labels = {_label(v): reason for v in values}
    if not ranged and _has_non_reference_inputs(inp):
        # FULL computes the whole query: what the reference partitions do not map to comes
        # from the rest chunk, never filtered out.
        chunks.append(_rest_chunk(inp, image, dropped))
        labels[OUTSIDE_LABEL] = reason
    return Plan(
        "FULL",
        reason,
        chunks=chunks or [Chunk([], 0, 0)],
        replace_all=not ranged,
        changed_base_partitions=changes,
        partition_reasons=labels,
        consumed=consumed,
    )


def _total_cost(inp: PlanInput) -> tuple[int, int]:
    size = sum(p.bytes for t in inp.pinned.values() for p in t.partitions.values())
    rows = sum(p.rows or 0 for t in inp.pinned.values() for p in t.partitions.values())
    return size, rows


def _cut(
    values: list[PartitionValue], image: dict[PartitionValue, list[tuple[str, str]]], inp: PlanInput
) -> list[Chunk]:
    def cost(v: PartitionValue) -> tuple[int, int]:
        size = rows = 0
        for table, path in image.get(v, []):
            part = inp.pinned[table].partitions[path]
            size += part.bytes
            rows += part.rows if part.rows is not None else part.bytes // 100  # ~100 bytes a row
        return size, rows

    return cut_chunks(values, cost, inp.properties)
