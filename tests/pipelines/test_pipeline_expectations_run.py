"""A project using Databricks' expectation decorators and SQL constraints runs under
``sparkmv pipeline run``: the datasets hold the rows DuckDB's filter keeps, each run records
the counts DuckDB computes over the same rows, and a ``FAIL UPDATE`` fails its dataset with the
table unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.cli.pipeline import EventFollower
from sparkmv.demo.oracle import oracle_rows
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import monthly_sales, write_partition
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import write_project

pytestmark = [pytest.mark.spark]

DEFS = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()

@dp.materialized_view(partition_cols=["m"])
@dp.expect_or_drop("not_tiny", "amount >= 2")
@dp.expect("below_six", "amount < 6")
def kept() -> DataFrame:
    return spark.table("sales").select("m", "id", "amount")

@dp.expect_all_or_drop({"even_id": "id % 2 = 0"})
@dp.materialized_view
def with_udf() -> DataFrame:
    plus = F.udf(lambda x: x + 1, "double")
    return spark.table("sales").select("id", plus("amount").alias("a1"))
"""
SQL = """CREATE MATERIALIZED VIEW guarded (
  CONSTRAINT at_most_41 EXPECT (n <= 41) ON VIOLATION FAIL UPDATE
) AS SELECT m, count(*) AS n FROM sales GROUP BY m;
"""


def _newest(client: Any, dataset: str, count: int) -> list[tuple[Any, ...]]:
    """(expectation, action, passed, failed) of the newest ``count`` results of ``dataset``, by name."""
    rows = client.sql(
        "SELECT recorded_at, expectation, action, rows_passed, rows_failed FROM sparkmv.expectations "
        f"WHERE dataset = '{dataset}'"
    ).collect()
    newest = sorted(rows, key=lambda r: r.recorded_at, reverse=True)[:count]
    return sorted((r.expectation, r.action, r.rows_passed, r.rows_failed) for r in newest)


def _duck_counts(client: Any, query: str, condition: str) -> tuple[int, int]:
    sql = f"SELECT count(*), count_if(coalesce(({condition}), false)) FROM ({query}) q"
    [(n, passed)] = oracle_rows(client, sql)
    return int(passed), int(n) - int(passed)


def test_decorators_and_constraints_run_under_pipeline_run(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 40)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    project = write_project(tmp_path / "proj", {"defs.py": DEFS, "guarded.sql": SQL})
    run = run_pipeline(client, load_project(project, lambda: client.spark))
    assert run.state == "COMPLETED", [(r.name, r.reason) for r in run.results]
    base = "SELECT m, id, amount FROM sales"
    assert_mv_matches(client, "kept", f"{base} WHERE amount >= 2")
    assert _newest(client, "kept", 2) == [
        ("below_six", "warn", *_duck_counts(client, base, "amount < 6")),
        ("not_tiny", "drop", *_duck_counts(client, base, "amount >= 2")),
    ]
    assert _newest(client, "kept", 2)[1][3] > 0, "the data has rows to drop"
    even = _duck_counts(client, "SELECT id FROM sales", "id % 2 = 0")
    udf_rows = client.sql("SELECT count(*) AS n, max(id % 2) AS odd FROM with_udf").collect()[0]
    assert (udf_rows.n, udf_rows.odd) == (even[0], 0)
    assert _newest(client, "with_udf", 1) == [("even_id", "drop", *even)]
    assert _newest(client, "guarded", 1) == [("at_most_41", "fail", 3, 0)]

    events = client.events("shop")
    assert (events[0].event_type, events[-1].event_type) == ("pipeline_started", "pipeline_ended")
    assert events[-1].details["counts"] == {"SUCCESS": 3} and events[-1].level == "INFO"
    outcomes = {e.dataset: (e.event_type, e.run_id) for e in events if e.event_type.startswith("dataset_")}
    guarded_run = client.runs("guarded")[0].run_id
    assert {d: t for d, (t, _) in outcomes.items()} == dict.fromkeys(
        ("kept", "with_udf", "guarded"), "dataset_refreshed"
    )
    assert outcomes["guarded"][1] == guarded_run

    write_partition(sales, "m", "2024-02", {"id": [9001, 9002], "amount": [1.0, 3.0]}, "more.parquet")
    follower, printed = EventFollower(client, "shop"), {}
    again = run_pipeline(
        client,
        load_project(project, lambda: client.spark),
        on_result=lambda r: printed.setdefault(r.name.display, follower.lines_of(r.name.display)),
    )
    by_name = {r.name.name: r for r in again.results}
    assert by_name["kept"].state == "SUCCESS", by_name["kept"]
    assert_mv_matches(client, "kept", f"{base} WHERE amount >= 2")
    if by_name["kept"].technique == "INCREMENTAL":  # the appended rows: 1.0 dropped, 3.0 kept
        assert _newest(client, "kept", 2) == [("below_six", "warn", 2, 0), ("not_tiny", "drop", 1, 1)]
    # 2024-02 now has 42 rows: the FAIL UPDATE expectation fails the dataset, its table unchanged.
    assert by_name["guarded"].state == "FAILED", by_name["guarded"]
    assert "expectation 'at_most_41' of 'guarded' failed (ON VIOLATION FAIL UPDATE)" in by_name["guarded"].reason
    # sparkmv pipeline run prints, under each dataset, its lines of the event log.
    assert (
        printed["kept"] == [line for line in printed["kept"] if line.startswith("expectation: expectation '")]
        and len(printed["kept"]) == 2
    )
    assert printed["guarded"][-1].startswith("run_failed: run ") and "at_most_41" in printed["guarded"][-1]
    ended = client.events("shop")[-1]
    assert (ended.event_type, ended.level, ended.details["state"]) == ("pipeline_ended", "ERROR", "FAILED")
    failed = [e for e in client.events("shop") if e.event_type == "dataset_failed"]
    assert [(e.dataset, e.level) for e in failed] == [("guarded", "ERROR")]
    assert sorted(tuple(r) for r in client.sql("SELECT m, n FROM guarded").collect()) == [
        ("2024-01", 40),
        ("2024-02", 40),
        ("2024-03", 40),
    ]
