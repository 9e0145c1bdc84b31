"""Fire-time arithmetic and dependency order without Spark or a catalog."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from sparkmv.errors import AnalysisError
from sparkmv.scheduler.dag import check_no_cycle, downstream_closure, find_cycle, topological_order
from sparkmv.scheduler.due import check_due, initial_fire_time, next_fire_after, retry_delay

T0 = datetime(2026, 1, 1, 0, 0, 0)


def test_fire_times_never_drift_however_late_the_ticks_are() -> None:
    nxt = initial_fire_time(T0, 2, T0 - timedelta(seconds=1))
    assert nxt == T0
    fires = []
    now = T0
    for late in (0.1, 0.7, 1.3, 0.01, 0.9):  # each tick comes late by a different amount
        now = nxt + timedelta(seconds=late)
        fire = check_due(nxt, 2, now)
        assert fire is not None and fire.missed == 1
        fires.append(fire.due_time)
        nxt = fire.next_fire_time
    assert fires == [T0 + timedelta(seconds=2 * k) for k in range(5)]
    assert check_due(nxt, 2, now) is None


def test_missed_fires_coalesce_into_one() -> None:
    fire = check_due(T0, 2, T0 + timedelta(seconds=60.5))
    assert fire is not None
    assert fire.missed == 31
    assert fire.due_time == T0 + timedelta(seconds=60)
    assert fire.next_fire_time == T0 + timedelta(seconds=62)


def test_initial_fire_without_start_is_one_period_after_creation() -> None:
    assert initial_fire_time(None, 3600, T0) == T0 + timedelta(hours=1)
    assert next_fire_after(T0, 86400, T0 + timedelta(days=3, seconds=1)) == T0 + timedelta(days=4)
    with pytest.raises(ValueError):
        next_fire_after(T0, 0, T0)


def test_backoff_doubles_and_is_capped() -> None:
    assert [retry_delay(a, 0.5) for a in (2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0]
    assert retry_delay(100, 0.5, cap_seconds=10) == 10


def test_dag_order_upstream_first_and_cycles() -> None:
    deps = {"d.c": ["d.b"], "d.b": ["d.a", "d.t"], "d.a": ["d.t"], "d.x": []}
    order, cyclic = topological_order(deps)
    assert order.index("d.a") < order.index("d.b") < order.index("d.c")
    assert cyclic == set()
    assert find_cycle(deps) is None
    assert downstream_closure(deps, ["d.a"]) == {"d.b", "d.c"}

    deps["d.a"] = ["d.c"]
    assert find_cycle(deps) == ["d.a", "d.c", "d.b", "d.a"]
    order, cyclic = topological_order(deps)
    assert order == ["d.x"] and cyclic == {"d.a", "d.b", "d.c"}


def test_cycle_check_names_the_cycle() -> None:
    check_no_cycle("d.a", ["d.b"], {"d.b": ["d.t"]})
    with pytest.raises(AnalysisError, match=r"d\.a -> d\.b -> d\.c -> d\.a"):
        check_no_cycle("d.a", ["d.b"], {"d.b": ["d.c"], "d.c": ["d.a"]})
