"""Eight processes request a refresh of the same MV at the same instant (SQLite and
PostgreSQL): exactly one runs, the seven others fail at once, before starting Spark, with
the busy error naming the state, the run and the owner; the result is correct."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_mv_matches
from tests.refresh.procs import QUERY, STRICT_2, create_mv, object_row, read_log, reap, spawn, wait_for, write_events

pytestmark = [pytest.mark.slow, pytest.mark.spark]

BUSY = re.compile(
    r"^MV 'mv' is being refreshed \(state (REFRESHING|FINISHING), run (\d+), owner ([^:\s]+):(\d+), since [0-9: -]+\)$"
)


def test_eight_processes_refresh_at_once(make_client: Any, tmp_path: Path, catalog_url: str) -> None:
    data = tmp_path / "events"
    write_events(data, 1)
    home = tmp_path / "home"
    client = make_client(home, catalog_url)
    create_mv(client, data, STRICT_2)
    runs_before = {r.run_id for r in client.runs("mv")}
    write_events(data, 2)

    go = tmp_path / "go"
    procs = [
        spawn(home, catalog_url, ["refresh", "mv", "--go", str(go)], tmp_path / f"worker-{i}.log") for i in range(8)
    ]
    try:
        wait_for(lambda: len(list(tmp_path.glob("go.ready.*"))) == 8, 180, "eight workers ready")
        go.touch()  # all eight call refresh() now
        rcs = [reap(p) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                reap(p, timeout=1)
    results = []
    for i, p in enumerate(procs):
        lines = [ln for ln in read_log(tmp_path / f"worker-{i}.log").splitlines() if ln.startswith("{")]
        assert lines, read_log(tmp_path / f"worker-{i}.log")
        results.append((p.pid, rcs[i], json.loads(lines[-1])))

    winners = [r for r in results if r[1] == 0]
    losers = [r for r in results if r[1] == 3]
    assert len(winners) == 1 and len(losers) == 7, results
    winner_pid, _, outcome = winners[0]
    assert outcome["state"] == "SUCCESS", outcome
    for _pid, _rc, busy in losers:
        m = BUSY.match(busy["busy"])
        assert m, busy["busy"]
        assert int(m.group(2)) == outcome["run_id"]
        assert int(m.group(4)) == winner_pid
        assert busy["spark"] is False, "a refused refresh must not start Spark"
        assert busy["seconds"] < 5, busy
    assert object_row(client).state == "IDLE"
    new_runs = {r.run_id for r in client.runs("mv")} - runs_before
    assert new_runs == {outcome["run_id"]}, "the refused requests leave no run behind"
    assert_mv_matches(client, "mv", QUERY)
