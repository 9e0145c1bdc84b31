"""Refreshable tables whose ``refresh_interval_sec`` passed are reloaded (no Spark: the
reload itself is replaced by a recorder)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sparkmv.catalog import ObjectKind, RefreshState
from sparkmv.catalog.clock import utcnow
from sparkmv.config import Settings
from sparkmv.names import ObjectName
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.scheduler.loop import Scheduler
from sparkmv.scheduler.metrics import SchedulerMetrics


def test_interval_passed_reloads_and_busy_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sparkmv.refresh.run_now as reload_executor

    calls: list[tuple[str, str]] = []

    def fake_reload(rt: Any, name: ObjectName, trigger: Any, progress: Any = None) -> RefreshRun:
        calls.append((name.qualified, str(trigger)))
        return RefreshRun(
            len(calls), name.display, "SUCCESS", str(trigger), "FULL_RELOAD", None, 1, 1, 1, 1, 0, 0.1, None, None, None
        )

    monkeypatch.setattr(reload_executor, "reload_table", fake_reload)
    rt = Runtime(Settings.resolve(home=tmp_path / "home"))
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.insert(
            s, ObjectName("default", "r"), ObjectKind.REFRESHABLE_TABLE, options={"refresh_interval_sec": "60"}
        )
        rt.catalog.objects.insert(s, ObjectName("default", "plain"), ObjectKind.REFRESHABLE_TABLE, options={})
    metrics = SchedulerMetrics()
    sched = Scheduler(rt, metrics=metrics)
    now = utcnow()
    assert sched.tick(now).outcome("r") == "SUCCESS"  # never loaded: due at once
    assert calls == [("default.r", "SCHEDULED")]
    assert sched.tick(now + timedelta(seconds=30)).outcome("r") == "IDLE"
    assert sched.tick(now + timedelta(seconds=30)).outcome("plain") == "IDLE"  # no interval: never
    with rt.catalog.transaction() as s:
        rt.catalog.objects.set_fields(s, row.id, state=RefreshState.REFRESHING, current_run_id=99)
    assert sched.tick(now + timedelta(seconds=61)).outcome("r") == "BUSY"
    assert metrics.busy.labels("r")._value.get() == 1
    with rt.catalog.transaction() as s:
        rt.catalog.objects.set_fields(s, row.id, state=RefreshState.IDLE, current_run_id=None)
    assert sched.tick(now + timedelta(seconds=61)).outcome("r") == "SUCCESS"
    assert len(calls) == 2
    rt.close()
