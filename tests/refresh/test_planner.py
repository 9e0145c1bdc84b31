"""The refresh planner (no Spark): modes, strategies, ranges, TTL, retention, excluded
tables, auto_refresh_partitions_limit, vanished base partitions and ``consumed``."""

from __future__ import annotations

from datetime import date
from typing import Any

from sparkmv.analysis.lineage import Lineage, PartitionMapping, Transform
from sparkmv.refresh.planner import Plan, PlanInput, RefreshRequest, plan_refresh, sort_key
from sparkmv.refresh.properties import MvProperties
from sparkmv.sources.pinned import PinnedPartition, PinnedTable

FACT = "default.fact"
DIM = "default.dim"
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]


def table(name: str, parts: dict[str, str], column: str | None = "d", size: int = 1000) -> PinnedTable:
    """A pinned table: partition value -> version (``column=None``: unpartitioned)."""
    if column is None:
        partitions = {"": PinnedPartition([f"{name}/f"], parts[""], 100.0, size)}
        return PinnedTable(name, "parquet", "{}", [], partitions)
    partitions = {
        f"{column}={v}": PinnedPartition([f"{name}/{v}/f"], ver, 100.0, size, rows=size // 10)
        for v, ver in parts.items()
    }
    return PinnedTable(name, "parquet", "{}", [column], partitions)


def identity(name: str = FACT) -> PartitionMapping:
    return PartitionMapping(name, "d", Transform("identity"))


def versions(*tables: PinnedTable) -> dict[tuple[str, str], str]:
    return {(t.name, path): p.version for t in tables for path, p in t.partitions.items()}


def plan(
    pinned: list[PinnedTable],
    vmap: dict[tuple[str, str], str],
    mv_parts: set[str | None],
    props: dict[str, str] | None = None,
    lineage: Lineage | None = None,
    request: RefreshRequest | None = None,
    refreshed_before: bool = True,
    partition_by: str | None = "d",
    today: date = date(2024, 1, 6),
    retention: Any = None,
) -> Plan:
    return plan_refresh(
        PlanInput(
            partition_by=partition_by,
            lineage=lineage if lineage is not None else Lineage({FACT: identity()}),
            pinned={t.name: t for t in pinned},
            version_map=vmap,
            mv_partitions=mv_parts,
            refreshed_before=refreshed_before,
            properties=MvProperties.parse(props or {}),
            request=request or RefreshRequest(),
            today=today,
            retention=retention,
        )
    )


def chunk_parts(p: Plan) -> list[list[str | None]]:
    return [list(c.partitions or []) for c in p.chunks]


def test_sort_key_orders_null_numbers_text() -> None:
    assert sorted(["b", "10", None, "9", "a"], key=sort_key) == [None, "9", "10", "a", "b"]


def test_first_refresh_is_full_strict_chunks_five_into_three() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    p = plan(
        [fact],
        {},
        set(),
        {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2"},
        refreshed_before=False,
    )
    assert (p.mode, p.reason, p.replace_all) == ("FULL", "first refresh", True)
    assert chunk_parts(p) == [DAYS[0:2], DAYS[2:4], DAYS[4:5]]
    assert p.consumed == {FACT: ["*"]}


def test_pct_strict_chunks_changed_partitions() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, dict.fromkeys(DAYS, "v2"))
    p = plan([new], versions(old), set(DAYS), {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2"})
    assert p.mode == "PCT"
    assert len(p.chunks) == 3 and chunk_parts(p) == [DAYS[0:2], DAYS[2:4], DAYS[4:5]]
    assert all("changed" in why for why in p.partition_reasons.values())


def test_adaptive_chunks_by_bytes_and_rows_at_least_one() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"), size=1000)
    new = table(FACT, dict.fromkeys(DAYS, "v2"), size=1000)
    by_bytes = plan([new], versions(old), set(DAYS), {"mv_max_bytes_per_refresh": "2500"})
    assert chunk_parts(by_bytes) == [DAYS[0:2], DAYS[2:4], DAYS[4:5]]
    assert by_bytes.chunks[0].base_bytes == 2000 and by_bytes.chunks[0].base_rows == 200
    by_rows = plan([new], versions(old), set(DAYS), {"mv_max_rows_per_refresh": "1"})
    assert chunk_parts(by_rows) == [[d] for d in DAYS]  # each chunk takes at least one
    default = plan([new], versions(old), set(DAYS))
    assert chunk_parts(default) == [DAYS]


def test_one_changed_day_refreshes_one_partition_and_consumes_only_it() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, {**dict.fromkeys(DAYS, "v1"), DAYS[2]: "v2"})
    p = plan([new], versions(old), set(DAYS))
    assert p.mode == "PCT" and p.reason == "AUTO: partition lineage known"
    assert p.partitions == [DAYS[2]]
    assert p.changed_base_partitions == {FACT: [f"d={DAYS[2]}"]}
    assert p.partition_reasons == {DAYS[2]: f"{FACT} partition d={DAYS[2]} changed"}
    assert p.consumed == {FACT: [f"d={DAYS[2]}"]}
    assert not p.replace_all and p.drop_partitions == []


def test_no_change_skips_up_to_date() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    p = plan([fact], versions(fact), set(DAYS))
    assert (p.mode, p.reason, p.chunks, p.consumed) == ("SKIP", "up to date", [], {})


def test_month_rollup_maps_days_onto_months() -> None:
    days = ["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-02"]
    old = table(FACT, dict.fromkeys(days, "v1"))
    new = table(FACT, {**dict.fromkeys(days, "v1"), "2024-02-02": "v2"})
    lin = Lineage({FACT: PartitionMapping(FACT, "d", Transform("prefix", 7))})
    p = plan([new], versions(old), {"2024-01", "2024-02"}, lineage=lin)
    assert p.partitions == ["2024-02"]
    # Every base partition of the refreshed month is read and consumed, not only the changed one.
    assert p.consumed == {FACT: ["d=2024-02-01", "d=2024-02-02"]}
    assert p.chunks[0].base_bytes == 2000


def test_vanished_base_partition_recomputes_or_removes() -> None:
    days = ["2024-01-30", "2024-01-31", "2024-02-01"]
    old = table(FACT, dict.fromkeys(days, "v1"))
    lin = Lineage({FACT: PartitionMapping(FACT, "d", Transform("prefix", 7))})
    # One of January's two days vanished: January is recomputed from the remaining day.
    new = table(FACT, {"2024-01-30": "v1", "2024-02-01": "v1"})
    p = plan([new], versions(old), {"2024-01", "2024-02"}, lineage=lin)
    assert p.partitions == ["2024-01"]
    assert "disappeared" in p.partition_reasons["2024-01"]
    assert p.consumed == {FACT: ["d=2024-01-30", "d=2024-01-31"]}
    # February's only day vanished: February is recomputed (to nothing, so removed).
    gone = table(FACT, {"2024-01-30": "v1", "2024-01-31": "v1"})
    p2 = plan([gone], versions(old), {"2024-01", "2024-02"}, lineage=lin)
    assert p2.partitions == ["2024-02"]
    assert p2.consumed == {FACT: ["d=2024-02-01"]}


def test_mv_partition_without_base_data_is_removed() -> None:
    fact = table(FACT, {DAYS[0]: "v1"})
    p = plan([fact], versions(fact) | {(FACT, "d=2023-12-31"): "x"}, {DAYS[0], "2023-12-31"})
    assert p.partitions == ["2023-12-31"]
    assert p.partition_reasons == {"2023-12-31": "default.fact partition d=2023-12-31 disappeared"}
    assert p.consumed == {FACT: ["d=2023-12-31"]}


def test_unpartitioned_dimension_change_refreshes_all() -> None:
    fact = table(FACT, dict.fromkeys(DAYS[:3], "v1"))
    dim_old = table(DIM, {"": "a"}, column=None)
    dim_new = table(DIM, {"": "b"}, column=None)
    p = plan([fact, dim_new], versions(fact, dim_old), set(DAYS[:3]))
    assert p.mode == "PCT" and p.partitions == DAYS[:3]
    assert all("non-reference table default.dim changed" == w for w in p.partition_reasons.values())
    assert p.consumed == {FACT: [f"d={d}" for d in DAYS[:3]], DIM: ["*"]}
    # A fact change alone refreshes one partition and leaves the dimension's version alone.
    fact2 = table(FACT, {**dict.fromkeys(DAYS[:3], "v1"), DAYS[1]: "v2"})
    p2 = plan([fact2, dim_old], versions(fact, dim_old), set(DAYS[:3]))
    assert p2.partitions == [DAYS[1]] and DIM not in p2.consumed


def test_dimension_change_with_range_is_not_consumed() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    dim_old = table(DIM, {"": "a"}, column=None)
    dim_new = table(DIM, {"": "b"}, column=None)
    p = plan([fact, dim_new], versions(fact, dim_old), set(DAYS), request=RefreshRequest(start=DAYS[3]))
    assert p.partitions == DAYS[3:]
    assert DIM not in p.consumed  # the rest still needs it


def test_union_of_two_reference_tables() -> None:
    other = "default.other"
    f = table(FACT, dict.fromkeys(DAYS[:2], "v1"))
    g_old = table(other, dict.fromkeys(DAYS[1:3], "v1"))
    g_new = table(other, {DAYS[1]: "v1", DAYS[2]: "v2"})
    lin = Lineage({FACT: identity(), other: identity(other)})
    p = plan([f, g_new], versions(f, g_old), set(DAYS[:3]), lineage=lin)
    assert p.partitions == [DAYS[2]]
    assert p.consumed == {other: [f"d={DAYS[2]}"]}
    g_new2 = table(other, {DAYS[1]: "v3", DAYS[2]: "v1"})
    p2 = plan([f, g_new2], versions(f, g_old), set(DAYS[:3]), lineage=lin)
    # Day 2 is fed by both tables: both tables' partitions of that day are consumed.
    assert p2.partitions == [DAYS[1]]
    assert p2.consumed == {FACT: [f"d={DAYS[1]}"], other: [f"d={DAYS[1]}"]}


def test_unknown_lineage_falls_back_to_full_with_reason() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, {**dict.fromkeys(DAYS, "v1"), DAYS[0]: "v2"})
    lin = Lineage({}, "unsupported transform of the partition column: CONCAT(d, 'x')")
    p = plan([new], versions(old), set(DAYS), lineage=lin)
    assert p.mode == "FULL" and p.replace_all
    assert "partition lineage unknown" in p.reason and "CONCAT" in p.reason
    assert p.chunks[0].partitions is None and p.partition_reasons == {"<all>": p.reason}
    assert p.consumed == {FACT: ["*"]}
    forced_pct = plan([new], versions(old), set(DAYS), {"refresh_mode": "PCT"}, lineage=lin)
    assert forced_pct.mode == "FULL" and forced_pct.reason.startswith("PCT impossible")


def test_refresh_mode_full_recomputes_everything() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, {**dict.fromkeys(DAYS, "v1"), DAYS[0]: "v2"})
    p = plan([new], versions(old), set(DAYS), {"refresh_mode": "FULL"})
    assert p.mode == "FULL" and p.replace_all and p.partitions == DAYS
    assert p.reason.startswith("refresh_mode = FULL")


def test_unpartitioned_mv_is_full() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, {**dict.fromkeys(DAYS, "v1"), DAYS[0]: "v2"})
    p = plan([new], versions(old), set(), partition_by=None, lineage=Lineage({}, "unpartitioned MV"))
    assert p.mode == "FULL" and p.reason == "AUTO: unpartitioned MV; changed: default.fact (1 partitions)"


def test_force_rewrites_all_in_range_even_unchanged() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    p = plan([fact], versions(fact), set(DAYS), request=RefreshRequest(force=True))
    assert p.mode == "PCT" and p.partitions == DAYS
    assert set(p.partition_reasons.values()) == {"FORCE"}
    ranged = plan([fact], versions(fact), set(DAYS), request=RefreshRequest(True, DAYS[1], DAYS[3]))
    assert ranged.partitions == DAYS[1:3]
    strategy = plan([fact], versions(fact), set(DAYS), {"partition_refresh_strategy": "FORCE"})
    assert strategy.partitions == DAYS


def test_range_refreshes_only_changed_inside() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, {**dict.fromkeys(DAYS, "v2"), DAYS[2]: "v1"})
    p = plan([new], versions(old), set(DAYS), request=RefreshRequest(start=DAYS[1], end=DAYS[4]))
    assert p.partitions == [DAYS[1], DAYS[3]]  # start inclusive, end exclusive, unchanged day 3 skipped
    assert p.consumed == {FACT: [f"d={DAYS[1]}", f"d={DAYS[3]}"]}
    outside = plan([new], versions(old), set(DAYS), request=RefreshRequest(start="2025-01-01"))
    assert outside.mode == "SKIP" and "outside" in outside.reason and outside.consumed == {}


def test_full_with_range_keeps_other_partitions() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    p = plan([fact], {}, set(), refreshed_before=False, request=RefreshRequest(start=DAYS[3]))
    assert p.mode == "FULL" and not p.replace_all and p.partitions == DAYS[3:]
    assert p.consumed == {FACT: [f"d={d}" for d in DAYS[3:]]}


def test_ttl_drops_old_partitions_once_and_never_recomputes() -> None:
    days = ["2023-12-01", "2023-12-31", "2024-01-04", "2024-01-05"]
    old = table(FACT, dict.fromkeys(days, "v1"))
    new = table(FACT, {**dict.fromkeys(days, "v1"), "2024-01-05": "v2"})
    props = {"partition_ttl": "3 DAY"}
    p = plan([new], versions(old), set(days), props)
    assert p.drop_partitions == ["2023-12-01", "2023-12-31"]
    assert p.partitions == ["2024-01-05"]
    # Next time the dropped partitions are not in the MV: nothing left to do.
    again = plan([new], versions(new), {"2024-01-04", "2024-01-05"}, props)
    assert again.mode == "SKIP"
    # A late change in an expired base partition is consumed without recomputation.
    late = table(FACT, {**dict.fromkeys(days, "v1"), "2023-12-01": "v9"})
    p3 = plan([late], versions(old), {"2024-01-04", "2024-01-05"}, props)
    assert (p3.mode, p3.chunks) == ("SKIP", [])
    assert p3.consumed == {FACT: ["d=2023-12-01", "d=2023-12-31"]}
    # Time passes without base changes: partitions that leave the TTL are dropped anyway.
    later = plan([new], versions(new), {"2024-01-04", "2024-01-05"}, props, today=date(2024, 1, 8))
    assert (later.mode, later.drop_partitions, later.chunks) == ("PCT", ["2024-01-04"], [])
    first = plan([new], {}, set(), props, refreshed_before=False)
    assert first.partitions == ["2024-01-04", "2024-01-05"]


def test_ttl_months_on_month_partitions() -> None:
    months = {"2023-09": "v1", "2023-11": "v1", "2023-12": "v1", "2024-01": "v1"}
    fact = table(FACT, months)
    p = plan([fact], versions(fact), set(months), {"partition_ttl": "2 MONTH"}, request=RefreshRequest(force=True))
    assert p.drop_partitions == ["2023-09"]
    assert p.partitions == ["2023-11", "2023-12", "2024-01"]


def test_retention_condition_drops_partitions() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, dict.fromkeys(DAYS, "v2"))
    # The condition is evaluated by Spark in a refresh; here a Python stand-in keeps d >= 2024-01-04.
    keep = lambda values: {v for v in values if v is not None and v >= "2024-01-04"}  # noqa: E731
    p = plan([new], versions(fact), set(DAYS), {"partition_retention_condition": "d >= '2024-01-04'"}, retention=keep)
    assert p.drop_partitions == DAYS[:3] and p.partitions == DAYS[3:]


def test_excluded_tables_never_refresh_but_are_consumed() -> None:
    fact = table(FACT, dict.fromkeys(DAYS, "v1"))
    dim_old = table(DIM, {"": "a"}, column=None)
    dim_new = table(DIM, {"": "b"}, column=None)
    p = plan([fact, dim_new], versions(fact, dim_old), set(DAYS), {"excluded_refresh_tables": "dim"})
    assert p.mode == "SKIP" and p.reason == "up to date"
    assert p.consumed == {DIM: ["*"]}
    excluded_fact = table(FACT, {**dict.fromkeys(DAYS, "v1"), DAYS[0]: "v2"})
    p2 = plan([excluded_fact], versions(fact), set(DAYS), {"excluded_refresh_tables": "default.fact"})
    assert p2.mode == "SKIP" and p2.consumed == {FACT: ["*"]}


def test_auto_refresh_partitions_limit_only_for_automatic() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, dict.fromkeys(DAYS, "v2"))
    props = {"auto_refresh_partitions_limit": "2"}
    auto = plan([new], versions(old), set(DAYS), props, request=RefreshRequest(automatic=True))
    assert auto.partitions == DAYS[3:]
    assert auto.consumed == {FACT: [f"d={d}" for d in DAYS[3:]]}  # the older ones stay stale
    manual = plan([new], versions(old), set(DAYS), props)
    assert manual.partitions == DAYS


def test_new_base_partition_appears() -> None:
    old = table(FACT, dict.fromkeys(DAYS[:4], "v1"))
    new = table(FACT, dict.fromkeys(DAYS, "v1"))
    p = plan([new], versions(old), set(DAYS[:4]))
    assert p.partitions == [DAYS[4]] and "appeared" in p.partition_reasons[DAYS[4]]


def test_plan_json_round_trip() -> None:
    old = table(FACT, dict.fromkeys(DAYS, "v1"))
    new = table(FACT, dict.fromkeys(DAYS, "v2"))
    p = plan([new], versions(old), set(DAYS), {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2"})
    assert Plan.from_json(p.to_json()) == p


def test_rest_chunk_holds_partitions_only_non_reference_inputs_feed() -> None:
    """A UNION ALL with an unpartitioned table: NULL and 2030-01-01 exist only through it."""
    fact = table(FACT, dict.fromkeys(DAYS[:2], "v1"))
    dim_old = table(DIM, {"": "a"}, column=None)
    dim_new = table(DIM, {"": "b"}, column=None)
    mv_parts = {None, DAYS[0], DAYS[1], "2030-01-01"}
    incomplete = Lineage({FACT: identity()}, "unsupported transform", complete=False)
    full = plan([fact, dim_old], {}, set(), lineage=incomplete, refreshed_before=False)
    assert [(c.partitions, c.outside) for c in full.chunks] == [(DAYS[:2], None), ([], DAYS[:2])]
    # The unpartitioned table changed: every reference partition once, the rest in the rest chunk.
    p = plan([fact, dim_new], versions(fact, dim_old), mv_parts, lineage=incomplete)
    assert [(c.partitions, c.outside) for c in p.chunks] == [(DAYS[:2], None), ([None, "2030-01-01"], DAYS[:2])]
    assert p.partition_reasons["<outside reference partitions>"] == "non-reference table default.dim changed"
    assert p.consumed == {FACT: [f"d={d}" for d in DAYS[:2]], DIM: ["*"]}
    # Only a reference partition changed: no rest chunk.
    fact2 = table(FACT, {DAYS[0]: "v1", DAYS[1]: "v2"})
    p2 = plan([fact2, dim_old], versions(fact, dim_old), mv_parts, lineage=incomplete)
    assert [(c.partitions, c.outside) for c in p2.chunks] == [([DAYS[1]], None)]
    # A complete lineage (an inner join with the dimension) never needs a rest chunk.
    complete = Lineage({FACT: identity()}, complete=True)
    p3 = plan([fact, dim_new], versions(fact, dim_old), set(DAYS[:2]), lineage=complete)
    assert all(c.outside is None for c in p3.chunks) and p3.partitions == DAYS[:2]
