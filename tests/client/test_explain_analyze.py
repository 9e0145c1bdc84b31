"""``EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW``: the plan's estimate, then the run it made
and where its time went; every run records its timings (``sparkmv.task_runs.timings``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.errors import ParseError
from sparkmv.names import ObjectName
from sparkmv.refresh.timing import PHASES
from tests.oracle import assert_mv_matches

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])
QUERY = "SELECT k, sum(v) AS total, count(*) AS n FROM fact GROUP BY k"


def test_explain_analyze_runs_the_refresh_and_shows_where_its_time_went(make_client: Any, tmp_path: Path) -> None:
    client = make_client(tmp_path / "home")
    client.runtime.iceberg.create_table(ObjectName.parse("fact"), SCHEMA, None)
    fact = client.runtime.iceberg.load(ObjectName.parse("fact"))
    fact.append(pa.table({"k": ["a", "b", None], "v": [1, 2, 3]}, schema=SCHEMA))
    client.sql(f"CREATE MATERIALIZED VIEW mv PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    fact.append(pa.table({"k": ["a", "c"], "v": [10, 20]}, schema=SCHEMA))

    result = client.execute("EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW mv", raise_on_failure=True)
    text = result.message or ""
    estimate, actual = text.split("\nactual:\n")
    assert estimate.startswith("mode: INCREMENTAL\n"), text
    assert result.run is not None and result.run.state == "SUCCESS" and result.run.mode == "INCREMENTAL"
    lines = actual.splitlines()
    assert lines[0].startswith(f"  run {result.run.run_id}: SUCCESS, mode INCREMENTAL, "), text
    assert lines[1].startswith("  estimate: ") and "; Spark read " in lines[1], text
    shown = [line.split()[0] for line in lines if line.startswith("    ") and line.split()[0] in PHASES]
    assert {"plan", "pin", "compute", "commit", "catalog"} <= set(shown), text
    assert any(line.startswith("  Spark jobs: ") for line in lines), text
    assert_mv_matches(client, "mv", QUERY)

    # The same timings are stored with the run, and their phases add up to its total.
    stored = client.sql(f"SELECT timings FROM sparkmv.task_runs WHERE run_id = {result.run.run_id}").collect()
    timings = json.loads(stored[0]["timings"])
    assert timings == result.run.timings
    assert abs(sum(timings["phases"].values()) - timings["total"]) < 0.01, timings
    assert timings["spark_jobs"]["count"] >= 1, timings

    # Two runs are too few to fit AUTO's cost model: its system table says so.
    model = client.sql("SELECT * FROM sparkmv.cost_model ORDER BY technique").collect()
    assert [(r["technique"], r["fixed_seconds"], r["runs_fitted"]) for r in model] == [
        ("FULL", None, 0),
        ("INCREMENTAL", None, 0),
        ("PCT", None, 0),
    ]

    # Nothing changed since: the run is SKIPPED, and says so with its (planning) time.
    again = client.execute("EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW mv").message or ""
    assert "\nactual:\n" in again and ": SKIPPED, mode SKIP, 0 rows" in again, again


def test_explain_analyze_refuses_what_it_cannot_run(make_client: Any, tmp_path: Path) -> None:
    client = make_client(tmp_path / "home")
    for statement, message in [
        ("EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW mv WITH ASYNC MODE", "WITH ASYNC MODE does not apply"),
        ("EXPLAIN ANALYZE SELECT 1", "expected REFRESH MATERIALIZED VIEW after EXPLAIN ANALYZE"),
        ("EXPLAIN REFRESH MATERIALIZED VIEW a, b", "EXPLAIN REFRESH takes one materialized view"),
    ]:
        with pytest.raises(ParseError, match=message):
            client.execute(statement)
