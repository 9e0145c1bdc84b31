"""Partition staleness as the planner sees it (no Spark): for each MV partition, whether the
next refresh recomputes it and the planner's reason, from the real planner's plan."""

from __future__ import annotations

import dataclasses

from sparkmv.refresh.planner import plan_refresh
from sparkmv.services.staleness import staleness_of
from tests.services.test_compensation import _input

PUBLISHED = {"1995-01-01", "1995-02-01", None}


def test_a_changed_day_makes_its_month_stale_with_the_planner_reason() -> None:
    inp = _input({"1995-01-20": "v2"})
    stale = staleness_of(plan_refresh(inp), PUBLISHED)
    assert (stale.mode, stale.is_fresh, stale.changed_base_count) == ("PCT", False, 1)
    assert stale.reasons == {"1995-01-01": "default.fact partition d=1995-01-20 changed"}
    assert [stale.reason_for(v) for v in ("1995-01-01", "1995-02-01", None)] == [
        "default.fact partition d=1995-01-20 changed",
        None,
        None,
    ]
    assert stale.scope() == "1 of 3 MV partitions"


def test_a_non_reference_table_makes_every_partition_stale() -> None:
    stale = staleness_of(plan_refresh(_input({}, dim_changed=True)), PUBLISHED)
    assert stale.reasons == dict.fromkeys(PUBLISHED, "non-reference table default.dim changed")
    assert stale.scope() == "every MV partition (3)"
    assert stale.changed_base_partitions == {"default.dim": [""]}


def test_a_new_month_and_nothing_changed() -> None:
    stale = staleness_of(plan_refresh(_input({"1995-03-01": "v1"})), PUBLISHED)
    assert stale.new_partitions == ("1995-03-01",)
    assert stale.reasons == {"1995-03-01": "default.fact partition d=1995-03-01 appeared"}
    assert stale.scope() == "1 new MV partition"
    fresh = staleness_of(plan_refresh(_input({})), PUBLISHED)
    assert (fresh.is_fresh, fresh.mode, fresh.reasons, fresh.scope()) == (True, "SKIP", {}, "nothing")


def test_a_full_plan_recomputes_the_whole_mv() -> None:
    inp = _input({"1995-01-20": "v2"})
    inp = dataclasses.replace(inp, properties=dataclasses.replace(inp.properties, refresh_mode="FULL"))
    stale = staleness_of(plan_refresh(inp), PUBLISHED)
    assert stale.mode == "FULL" and stale.whole_mv is not None and stale.whole_mv.startswith("refresh_mode = FULL")
    assert stale.reason_for("1995-02-01") == stale.whole_mv and stale.scope() == "the whole MV"
