"""Expectations of materialized views under FULL, PCT and INCREMENTAL refreshes.

The MV's rows and each run's counts are compared with the same filter and counts computed
by DuckDB over the same rows (the whole query for FULL, the recomputed partition for PCT,
the appended rows or the touched groups for INCREMENTAL); ``FAIL UPDATE`` leaves the MV
unchanged and the run FAILED; the event log agrees with the run history.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sparkmv.demo.oracle import oracle_rows
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName
from tests.helpers import write_partition
from tests.oracle import assert_mv_matches

pytestmark = [pytest.mark.spark]

LINEAR = "SELECT p, k, v FROM facts WHERE (v IS NULL OR v >= -50)"
LINEAR_EXPECT = "CONSTRAINT has_k EXPECT (k IS NOT NULL) ON VIOLATION DROP ROW, CONSTRAINT small_v EXPECT (v < 900)"
GROUPED = "SELECT k, sum(v) AS total, count(*) AS n FROM facts GROUP BY k"


def _rows(rng: random.Random, n: int, keys: int) -> dict[str, list[Any]]:
    """``n`` rows: keys k0..k<keys-1> with one in nine NULL, values in [-100, 1000) with one
    in thirteen NULL (seeded: every run the same, none trivial)."""
    k = [None if rng.random() < 1 / 9 else f"k{rng.randrange(keys)}" for _ in range(n)]
    v = [None if rng.random() < 1 / 13 else rng.randrange(-100, 1000) for _ in range(n)]
    return {"k": k, "v": v}


def _lake(make_client: Any, tmp_path: Path) -> tuple[Any, Path, random.Random]:
    rng = random.Random(20261203)
    data = tmp_path / "facts"
    for p in ("a", "b", "c"):
        write_partition(data, "p", p, _rows(rng, 400, 30), "f0.parquet")
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE facts USING parquet LOCATION '{data}'")
    return client, data, rng


def _counts(client: Any, query: str, conditions: list[str], where: str = "TRUE") -> list[tuple[int, int]]:
    """(passed, failed) per condition over the rows of ``query`` meeting ``where``, by DuckDB."""
    cols = ", ".join(f"count_if(coalesce(({c}), false)) AS p{i}" for i, c in enumerate(conditions))
    [row] = oracle_rows(client, f"SELECT count(*) AS n, {cols} FROM ({query}) AS q WHERE {where}")
    return [(int(row[i + 1]), int(row[0]) - int(row[i + 1])) for i in range(len(conditions))]


def _recorded(client: Any, run_id: int) -> list[tuple[int, int]]:
    rows = client.sql(
        f"SELECT expectation, rows_passed, rows_failed FROM sparkmv.expectations WHERE run_id = {run_id}"
    ).collect()
    by_name = {r.expectation: (r.rows_passed, r.rows_failed) for r in rows}
    return [by_name[n] for n in sorted(by_name)]


def test_linear_mv_drops_rows_and_counts_under_full_incremental_and_pct(make_client: Any, tmp_path: Path) -> None:
    client, data, rng = _lake(make_client, tmp_path)
    client.sql(
        f"CREATE MATERIALIZED VIEW clean ({LINEAR_EXPECT}) PARTITION BY p REFRESH DEFERRED "
        f"PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {LINEAR}"
    )
    conditions = ["k IS NOT NULL", "v < 900"]  # has_k, small_v: sorted by name
    full = client.refresh("clean")
    assert (full.state, full.mode) == ("SUCCESS", "FULL"), full
    assert_mv_matches(client, "clean", f"{LINEAR} AND k IS NOT NULL")
    assert _recorded(client, full.run_id) == _counts(client, LINEAR, conditions)
    assert _recorded(client, full.run_id)[0][1] > 0, "the data has rows to drop"

    before = _counts(client, LINEAR, conditions)
    write_partition(data, "p", "a", _rows(rng, 120, 30), "f1.parquet")
    inc = client.refresh("clean")
    assert (inc.state, inc.mode) == ("SUCCESS", "INCREMENTAL"), inc
    assert_mv_matches(client, "clean", f"{LINEAR} AND k IS NOT NULL")
    after = _counts(client, LINEAR, conditions)
    appended = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(after, before, strict=True)]
    assert _recorded(client, inc.run_id) == appended

    client.sql("ALTER MATERIALIZED VIEW clean SET PROPERTIES ('refresh_mode' = 'PCT')")
    write_partition(data, "p", "b", _rows(rng, 300, 30), "f0.parquet")  # rewritten in place: PCT of p=b
    pct = client.refresh("clean")
    assert (pct.state, pct.mode) == ("SUCCESS", "PCT"), pct
    assert_mv_matches(client, "clean", f"{LINEAR} AND k IS NOT NULL")
    assert _recorded(client, pct.run_id) == _counts(client, LINEAR, conditions, "p = 'b'")


def test_aggregate_mv_recomputes_touched_groups_and_counts_them(make_client: Any, tmp_path: Path) -> None:
    client, data, _ = _lake(make_client, tmp_path)
    client.sql(
        "CREATE MATERIALIZED VIEW big (CONSTRAINT big_total EXPECT (total > 4000) ON VIOLATION DROP ROW) "
        f"REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {GROUPED}"
    )
    full = client.refresh("big")
    assert_mv_matches(client, "big", f"{GROUPED} HAVING sum(v) > 4000")
    assert _recorded(client, full.run_id) == _counts(client, GROUPED, ["total > 4000"])
    appended: dict[str, list[Any]] = {"k": ["k1", "k2", None, "k2"], "v": [5000, -3000, 7, None]}
    write_partition(data, "p", "c", appended, "f1.parquet")
    inc = client.refresh("big")
    assert (inc.state, inc.mode) == ("SUCCESS", "INCREMENTAL"), inc
    assert_mv_matches(client, "big", f"{GROUPED} HAVING sum(v) > 4000")
    touched = "k IN ('k1', 'k2') OR k IS NULL"
    assert _recorded(client, inc.run_id) == _counts(client, GROUPED, ["total > 4000"], touched)


def test_fail_update_fails_the_run_and_leaves_the_mv_unchanged(make_client: Any, tmp_path: Path) -> None:
    client, data, _ = _lake(make_client, tmp_path)
    query = "SELECT p, k, v FROM facts WHERE v >= 0"
    client.sql(
        "CREATE MATERIALIZED VIEW strict (CONSTRAINT v_small EXPECT (v < 5000) ON VIOLATION FAIL UPDATE) "
        f"PARTITION BY p REFRESH DEFERRED AS {query}"
    )
    assert client.refresh("strict").state == "SUCCESS"
    snapshot = client.runtime.iceberg.load(ObjectName.parse("strict")).current_snapshot().snapshot_id
    write_partition(data, "p", "a", {"k": ["bad", "ok"], "v": [7000, 3]}, "f1.parquet")
    run = client.refresh("strict")
    assert run.state == "FAILED", run
    assert run.error.startswith("expectation 'v_small' of 'strict' failed (ON VIOLATION FAIL UPDATE): 1 of "), run.error
    assert '"k": "bad"' in run.error and '"v": 7000' in run.error, run.error
    assert client.runtime.iceberg.load(ObjectName.parse("strict")).current_snapshot().snapshot_id == snapshot
    assert _recorded(client, run.run_id)[0][1] == 1
    events = client.sql(
        f"SELECT event_type, level FROM sparkmv.pipeline_events WHERE run_id = {run.run_id} ORDER BY id"
    ).collect()
    assert [(e.event_type, e.level) for e in events][-2:] == [("expectation", "WARN"), ("run_failed", "ERROR")]


@pytest.mark.parametrize(
    ("clause", "message"),
    [
        (
            "CONSTRAINT r EXPECT (rand() > 0.5)",
            "expectation 'r' of 'bad' must be a deterministic boolean over the row: 'rand() > 0.5': "
            "rand() is not deterministic",
        ),
        (
            "CONSTRAINT s EXPECT (v + 1)",
            "expectation 's' of 'bad' must be a deterministic boolean over the row: 'v + 1' is of type BIGINT",
        ),
        (
            "CONSTRAINT m EXPECT (max(v) > 1)",
            "expectation 'm' of 'bad' must be a deterministic boolean over the row: 'max(v) > 1': "
            "max(v) is an aggregate, not a condition over one row",
        ),
    ],
)
def test_a_condition_that_is_not_a_deterministic_boolean_is_refused(
    make_client: Any, tmp_path: Path, clause: str, message: str
) -> None:
    client, _, _ = _lake(make_client, tmp_path)
    with pytest.raises(AnalysisError) as err:
        client.sql(f"CREATE MATERIALIZED VIEW bad ({clause}) AS SELECT p, k, v FROM facts")
    assert str(err.value) == message
    assert not client.runtime.iceberg.exists(ObjectName.parse("bad"))
    assert [r.name for r in client.sql("SELECT name FROM sparkmv.materialized_views").collect()] == []


def test_event_log_agrees_with_the_run_history(make_client: Any, tmp_path: Path) -> None:
    client, data, rng = _lake(make_client, tmp_path)
    client.sql(f"CREATE MATERIALIZED VIEW clean ({LINEAR_EXPECT}) REFRESH DEFERRED AS {LINEAR}")
    client.refresh("clean")
    write_partition(data, "p", "c", _rows(rng, 50, 30), "f1.parquet")
    client.refresh("clean")
    client.refresh("clean")  # nothing changed: SKIPPED
    runs = {r.run_id: r.state for r in client.sql("SELECT run_id, state FROM sparkmv.task_runs").collect()}
    events = client.sql("SELECT run_id, event_type, dataset FROM sparkmv.pipeline_events ORDER BY id").collect()
    ended = {"run_succeeded": "SUCCESS", "run_skipped": "SKIPPED", "run_failed": "FAILED"}
    for run_id, state in runs.items():
        of_run = [e.event_type for e in events if e.run_id == run_id]
        assert of_run[0] == "run_started" and [ended[t] for t in of_run if t in ended] == [state], of_run
    assert {e.dataset for e in events} == {"clean"}
    succeeded = [e for e in events if e.event_type == "expectation"]
    assert len(succeeded) == 4, "two expectations in each of the two runs that computed rows"
