"""``sparkmv events`` and ``sparkmv runs``: the event log and the expectations' results as
the catalog holds them (the commands are catalog-only: no JVM), ``--since`` and
``--pipeline`` filters, a bad ``--since`` refused as a usage error, and ``--follow``
printing an event as soon as it is logged."""

from __future__ import annotations

import csv
import io
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sparkmv.client.client import Client
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
QUERY = "SELECT m, id, amount FROM sales"
CONSTRAINT = "CONSTRAINT positive EXPECT (amount > 0) ON VIOLATION DROP ROW"


def sparkmv(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARKMV_CATALOG_URL"}
    cmd = [SPARKMV, "--home", str(home), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def _amounts(n: int, bad_every: int) -> dict[str, list[Any]]:
    """``n`` rows; every ``bad_every``-th amount is negative (the expectation drops it)."""
    ids = list(range(n))
    return {"id": ids, "amount": [-1.0 * i if i % bad_every == 0 else 0.5 + i for i in ids]}


def _home(spark: Any, tmp_path: Path) -> tuple[Path, Path]:
    """A home with MV ``clean`` (one DROP ROW expectation) built, then refreshed after an append."""
    sales, home = tmp_path / "sales", tmp_path / "home"
    write_partition(sales, "m", "2024-01", _amounts(30, 4))
    with Client(home=home, spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        client.sql(
            f"CREATE MATERIALIZED VIEW clean ({CONSTRAINT}) PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}"
        )
        write_partition(sales, "m", "2024-02", _amounts(20, 5), "more.parquet")
        client.refresh("clean")
    return home, sales


def test_events_and_runs_show_what_the_catalog_holds(spark: Any, tmp_path: Path) -> None:
    home, _ = _home(spark, tmp_path)
    with Client(home=home, spark=spark) as client:
        logged = [(e.id, e.event_type, e.run_id, e.message) for e in client.events()]
        run_ids = sorted(r.run_id for r in client.runs("clean"))
    done = sparkmv(home, "events", "--format", "json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert [(e["id"], e["event_type"], e["run_id"], e["message"]) for e in shown] == logged
    assert [t for _, t, r, _ in logged if r == run_ids[-1]] == [
        "run_started",
        "run_planned",
        "expectation",
        "run_succeeded",
    ]
    details = [json.loads(e["details"]) for e in shown if e["event_type"] == "expectation"]
    # 30 rows with ids 0, 4, ..., 28 negative (8 of them); then 20 rows with 0, 5, 10, 15 (4).
    assert [(d["rows_passed"], d["rows_failed"]) for d in details] == [(22, 8), (16, 4)]

    assert len(json.loads(sparkmv(home, "events", "--since", "1h", "--format", "json").stdout)) == len(logged)
    future = sparkmv(home, "events", "--since", "2999-01-01T00:00:00", "--format", "json")
    assert json.loads(future.stdout) == []
    assert json.loads(sparkmv(home, "events", "--pipeline", "nope", "--format", "json").stdout) == []
    lines = sparkmv(home, "events").stdout.splitlines()
    assert len(lines) == len(logged) and "run_succeeded" in lines[-1] and "clean" in lines[-1]

    runs = sparkmv(home, "runs", "clean", "--format", "csv", "--no-chunks")
    assert runs.returncode == 0, runs.stderr
    tables = [list(csv.reader(io.StringIO(t))) for t in runs.stdout.split("run,expectation")[1:]]
    assert tables[0][1:] == [
        [str(run_ids[1]), "positive", "drop", "16", "4", "amount > 0"],
        [str(run_ids[0]), "positive", "drop", "22", "8", "amount > 0"],
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "xyz"), "--since must be an ISO timestamp or <n>s|m|h|d, not 'xyz'"),
        (("--since", "5 weeks"), "--since must be an ISO timestamp or <n>s|m|h|d, not '5 weeks'"),
        (("--follow", "--format", "json"), "--follow prints log lines: it takes --format table"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = sparkmv(tmp_path / "home", "events", *args)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"error: {message}"
    assert done.stdout == ""


def _lines(stream: Any) -> queue.Queue[str]:
    out: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [out.put(line) for line in stream], daemon=True).start()
    return out


def _wait_for(lines: queue.Queue[str], text: str, seconds: float = 60) -> list[str]:
    """Lines read until one contains ``text`` (fails after ``seconds``)."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            break
        if text in seen[-1]:
            return seen
    raise AssertionError(f"no line with {text!r} in {seen}")


def test_follow_prints_each_new_event(spark: Any, tmp_path: Path) -> None:
    home, sales = _home(spark, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "SPARKMV_CATALOG_URL"}
    follower = subprocess.Popen(
        [SPARKMV, "--home", str(home), "events", "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = _lines(follower.stdout)
        _wait_for(lines, "run_succeeded")  # the history so far
        with Client(home=home, spark=spark) as client:
            write_partition(sales, "m", "2024-03", _amounts(10, 2), "third.parquet")
            run = client.refresh("clean")
        seen = _wait_for(lines, f"run {run.run_id}  run_succeeded")
        assert [line.split("  ")[4] for line in seen if f"run {run.run_id} " in line] == [
            "run_started",
            "run_planned",
            "expectation",
            "run_succeeded",
        ]
        assert any("5 rows passed, 5 failed (dropped 5)" in line for line in seen), seen
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=30)
    assert follower.returncode == 130
