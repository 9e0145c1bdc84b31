"""Incremental refresh through the lifecycle: the technique chosen and why, the fallbacks
of a change that is not append-only, strict INCREMENTAL failing with the MV unchanged,
hidden state columns, and crashes during an INCREMENTAL run applied exactly once.

Contents are compared with the query recomputed by Spark over the current files; the
randomized comparison with DuckDB is ``tests/differential/test_incremental.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.errors import AnalysisError, RefreshFailedError
from sparkmv.names import ObjectName
from sparkmv.refresh.faults import FaultInjector
from tests.helpers import assert_mv_matches, rows_of, write_partition
from tests.refresh.procs import FAST_LEASE, object_row, wait_lease_expired
from tests.refresh.test_fault_inprocess import CrashAt, SimulatedCrash
from tests.sources.test_changes import compact

pytestmark = [pytest.mark.spark]

PROPS = ", ".join(f"'{k}' = '{v}'" for k, v in FAST_LEASE.items())
AGG = "SELECT p, k, sum(v) AS total, count(*) AS n, avg(v) AS mean, min(v) AS lo, max(v) AS hi FROM facts GROUP BY p, k"


def _facts(root: Path, p: str, rows: list[tuple[str | None, int | None]], file: str) -> Path:
    return write_partition(root, "p", p, {"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, file)


def _setup(make_client: Any, tmp_path: Path, mode: str = "INCREMENTAL", query: str = AGG, part: str = "p") -> Any:
    """Partition p=a holds 20,000 rows (so a small append is a small change), p=b one row."""
    data = tmp_path / "facts"
    many = [(None if i % 7 == 0 else f"k{i % 50}", None if i % 11 == 0 else i) for i in range(20_000)]
    _facts(data, "a", [("x", 1), ("y", None), (None, 3), *many], "f0.parquet")
    _facts(data, "b", [("x", 10)], "f0.parquet")
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE facts USING parquet LOCATION '{data}'")
    partition = f" PARTITION BY {part}" if part else ""
    client.sql(
        f"CREATE MATERIALIZED VIEW mv{partition} REFRESH DEFERRED "
        f"PROPERTIES ('refresh_mode' = '{mode}', {PROPS}) AS {query}"
    )
    first = client.refresh("mv")
    assert (first.state, first.mode) == ("SUCCESS", "FULL"), first
    return client


def _snapshot(client: Any) -> int:
    return int(client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id)


def test_an_append_is_applied_incrementally_to_the_affected_partition_only(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, mode="AUTO")
    _facts(tmp_path / "facts", "a", [("x", 5), ("z", 7), (None, None)], "f1.parquet")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert [c["mode"] for c in run.candidates] == ["INCREMENTAL", "PCT", "FULL"]
    assert [c["chosen"] for c in run.candidates] == [True, False, False]
    assert run.reason.startswith("INCREMENTAL: cheapest"), run.reason
    assert_mv_matches(client, "mv", AGG)
    # The run's estimate beside what its Spark jobs read (Spark's input metrics: the new
    # file and the MV partition it merges into) and its seconds.
    rows = client.sql("SELECT run_id, estimate_bytes, bytes_read, seconds FROM sparkmv.task_runs").collect()
    recorded = next(r for r in rows if r.run_id == run.run_id)
    assert recorded.estimate_bytes == run.candidates[0]["estimate_bytes"] > 0
    assert recorded.bytes_read > 0 and recorded.seconds > 0, recorded
    # The first (FULL) run read every data file of 'facts' (its footers alone are a few KiB).
    first = min((r for r in rows), key=lambda r: r.run_id)
    facts = sum(f.stat().st_size for f in (tmp_path / "facts").rglob("f0.parquet"))
    assert first.bytes_read >= facts * 0.5, (first, facts)
    table = client.runtime.iceberg.load(ObjectName.parse("mv"))
    summary = table.current_snapshot().summary
    assert summary["sparkmv.run-id"] == str(run.run_id)
    assert summary["changed-partition-count"] == "1", "only partition p=a is rewritten"
    again = client.refresh("mv")
    assert again.state == "SKIPPED"
    skipped = client.sql(f"SELECT bytes_read FROM sparkmv.task_runs WHERE run_id = {again.run_id}").collect()
    assert skipped[0].bytes_read is None, "a SKIPPED run reads nothing"


def test_hidden_state_columns_are_not_visible(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path)
    visible = ["p", "k", "total", "n", "mean", "lo", "hi"]
    assert client.table("mv").columns == visible
    assert client.sql("SELECT * FROM mv").columns == visible
    described = [r[0] for r in client.sql("DESCRIBE mv").collect()]
    assert not any(c.startswith("__smv_") for c in described), described
    stored = [f.name for f in client.runtime.iceberg.load(ObjectName.parse("mv")).schema().fields]
    assert stored == [*visible, "__smv_count", "__smv_nn_2", "__smv_sum_4", "__smv_nn_4"]


@pytest.mark.parametrize("mode", ["FULL", "PCT"])
def test_an_mv_never_refreshed_incrementally_keeps_no_state_columns(
    make_client: Any, tmp_path: Path, mode: str
) -> None:
    # Its refresh computes exactly its query (no state aggregates: the "Machinery tax" of
    # bench/RESULTS.md).
    client = _setup(make_client, tmp_path, mode=mode)
    stored = [f.name for f in client.runtime.iceberg.load(ObjectName.parse("mv")).schema().fields]
    assert stored == ["p", "k", "total", "n", "mean", "lo", "hi"]
    assert_mv_matches(client, "mv", AGG)
    # Made INCREMENTAL, it is maintained by recomputing the touched groups (no state needed).
    client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('refresh_mode' = 'INCREMENTAL')")
    _facts(tmp_path / "facts", "a", [("x", 5), ("z", 7), (None, None)], "f1.parquet")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert_mv_matches(client, "mv", AGG)


def test_a_removed_file_makes_auto_fall_back_with_the_reason(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, mode="AUTO")
    (tmp_path / "facts" / "p=b" / "f0.parquet").unlink()
    _facts(tmp_path / "facts", "b", [("x", 4)], "f1.parquet")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert not incremental["eligible"]
    assert "file 'f0.parquet' of base table 'default.facts' partition p=b was removed" in incremental["reason"]
    assert_mv_matches(client, "mv", AGG)
    # The positions advanced: the next append is incremental again.
    _facts(tmp_path / "facts", "a", [("w", 2)], "f2.parquet")
    assert client.refresh("mv").mode == "INCREMENTAL"
    assert_mv_matches(client, "mv", AGG)


def test_strict_incremental_fails_on_a_rewrite_and_leaves_the_mv_unchanged(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path)
    before, snapshot = rows_of(client.table("mv")), _snapshot(client)
    _facts(tmp_path / "facts", "a", [("x", 100)], "f0.parquet")  # rewritten in place
    with pytest.raises(RefreshFailedError) as failed:
        client.refresh("mv", raise_on_failure=True)
    message = str(failed.value)
    assert "incremental refresh of MV 'mv' is impossible" in message
    assert "file 'f0.parquet' of base table 'default.facts' partition p=a was modified" in message
    assert rows_of(client.table("mv")) == before and _snapshot(client) == snapshot
    rebuilt = client.refresh("mv", force=True)
    assert (rebuilt.state, rebuilt.mode) == ("SUCCESS", "FULL"), rebuilt
    assert_mv_matches(client, "mv", AGG)


def test_strict_incremental_refuses_a_query_it_cannot_maintain(make_client: Any, tmp_path: Path) -> None:
    data = tmp_path / "facts"
    _facts(data, "a", [("x", 1)], "f0.parquet")
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE facts USING parquet LOCATION '{data}'")
    with pytest.raises(AnalysisError) as refused:
        client.sql(
            "CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') "
            "AS SELECT p, k, row_number() OVER (ORDER BY k) AS r FROM facts"
        )
    assert str(refused.value).startswith(
        "materialized view 'mv' cannot use refresh_mode = 'INCREMENTAL': "
        "row_number() OVER (ORDER BY k) is not incrementally maintainable"
    ), str(refused.value)
    assert not client.runtime.iceberg.exists(ObjectName.parse("mv"))
    assert client.sql("SHOW MATERIALIZED VIEWS").count() == 0


def test_explain_shows_the_candidates_and_why_incremental_is_not_eligible(make_client: Any, tmp_path: Path) -> None:
    query = "SELECT p, k, row_number() OVER (ORDER BY k) AS r FROM facts"
    client = _setup(make_client, tmp_path, mode="AUTO", query=query)
    _facts(tmp_path / "facts", "a", [("q", 1)], "f1.parquet")
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv").message or ""
    assert "candidates:" in text, text
    line = next(x for x in text.splitlines() if x.strip().startswith("INCREMENTAL"))
    assert "row_number() OVER (ORDER BY k) is not incrementally maintainable" in line, text


def test_crash_after_publish_before_the_catalog_update_applies_the_delta_once(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path)
    _facts(tmp_path / "facts", "a", [("x", 5)], "f1.parquet")
    client.runtime.faults = CrashAt("after_publish")
    with pytest.raises(SimulatedCrash):
        client.refresh("mv")
    published = _snapshot(client)
    client.runtime.faults = FaultInjector()
    wait_lease_expired(client)
    outcome = client.recover()[0]
    assert outcome.run is not None and (outcome.run.state, outcome.run.mode) == ("SUCCESS", "INCREMENTAL")
    assert _snapshot(client) == published, "recovery found the commit and did not publish again"
    assert_mv_matches(client, "mv", AGG)
    assert client.refresh("mv").state == "SKIPPED", "the consumed positions advanced with the run"


def test_crash_after_the_chunk_is_staged_resumes_and_applies_the_delta_once(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path)
    _facts(tmp_path / "facts", "c", [("x", 5), ("y", 6)], "f1.parquet")
    client.runtime.faults = CrashAt("after_progress_recorded", 0)
    with pytest.raises(SimulatedCrash):
        client.refresh("mv")
    assert object_row(client).state != "IDLE"
    client.runtime.faults = FaultInjector()
    wait_lease_expired(client)
    outcome = client.recover()[0]
    assert outcome.run is not None and (outcome.run.state, outcome.run.mode) == ("SUCCESS", "INCREMENTAL")
    assert_mv_matches(client, "mv", AGG)


def _iceberg_facts(client: Any) -> Any:
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    client.runtime.iceberg.create_table(ObjectName.parse("ice"), schema, None)
    table = client.runtime.iceberg.load(ObjectName.parse("ice"))
    table.append(pa.table({"k": ["x", "y", None], "v": [1, 2, 3]}, schema=schema))
    return schema


ICE = "SELECT k, sum(v) AS total, count(*) AS n FROM ice GROUP BY k"


def _iceberg_setup(make_client: Any, tmp_path: Path, mode: str = "AUTO") -> tuple[Any, pa.Schema]:
    client = make_client(tmp_path / "home")
    schema = _iceberg_facts(client)
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = '{mode}') AS {ICE}")
    assert client.refresh("mv").mode == "FULL"
    return client, schema


def _ice(client: Any) -> Any:
    return client.runtime.iceberg.load(ObjectName.parse("ice"))


def test_iceberg_appends_are_incremental_and_a_whole_overwrite_is_recomputed(make_client: Any, tmp_path: Path) -> None:
    client, schema = _iceberg_setup(make_client, tmp_path, mode="INCREMENTAL")
    _ice(client).append(pa.table({"k": ["x", "w"], "v": [5, 6]}, schema=schema))
    _ice(client).append(pa.table({"k": [None], "v": [None]}, schema=schema))
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert_mv_matches(client, "mv", ICE)
    client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('refresh_mode' = 'AUTO')")
    _ice(client).overwrite(pa.table({"k": ["x"], "v": [9]}, schema=schema))
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "FULL"), run
    # The overwrite replaced every file: its signed change reads more than the table, a cost
    # decision with both estimates among the candidates.
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert "exceeds incremental_max_change_ratio" in incremental["reason"], incremental
    assert incremental["estimate_bytes"] > 0 and run.candidates[-1]["estimate_bytes"] > 0, run.candidates
    assert_mv_matches(client, "mv", ICE)


def test_strict_incremental_applies_an_iceberg_delete(make_client: Any, tmp_path: Path) -> None:
    client, _schema = _iceberg_setup(make_client, tmp_path, mode="INCREMENTAL")
    _ice(client).delete("v = 1")
    run = client.refresh("mv", raise_on_failure=True)
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert "base table 'default.ice': +2 / -3 rows (signed change log), 2 files read" in run.reason, run.reason
    assert_mv_matches(client, "mv", ICE)


def test_alter_to_incremental_refuses_a_query_it_cannot_maintain(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, mode="AUTO", query="SELECT p, k, v FROM facts ORDER BY v LIMIT 2", part="")
    with pytest.raises(AnalysisError) as refused:
        client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('refresh_mode' = 'INCREMENTAL')")
    assert "cannot use refresh_mode = 'INCREMENTAL': LIMIT 2 is not incrementally maintainable" in str(refused.value)
    row = object_row(client)
    assert (row.properties or {}).get("refresh_mode") == "AUTO"


def _dims(root: Path, rows: list[tuple[str | None, str]], file: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [r[0] for r in rows], "label": [r[1] for r in rows]}), root / file)


JOINED = "SELECT f.p, f.k, f.v, d.label FROM facts f JOIN dims d ON f.k = d.k"
UNION = "SELECT p, k, v FROM facts WHERE v > 2 UNION ALL SELECT 'dim' AS p, k, 1 AS v FROM dims"
JOIN_AGG = "SELECT d.label, count(*) AS n, sum(f.v) AS total FROM facts f JOIN dims d ON f.k = d.k GROUP BY d.label"


@pytest.mark.parametrize("query", [JOINED, UNION, JOIN_AGG], ids=["join", "union-all", "join-aggregate"])
def test_both_inputs_change_in_one_run(make_client: Any, tmp_path: Path, query: str) -> None:
    _dims(tmp_path / "dims", [("x", "ex"), ("y", "why"), ("k1", "one")], "d0.parquet")
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE dims USING parquet LOCATION '{tmp_path / 'dims'}'")
    data = tmp_path / "facts"
    _facts(data, "a", [("x", 1), ("y", None), (None, 3), ("k1", 4)], "f0.parquet")
    client.sql(f"CREATE EXTERNAL TABLE facts USING parquet LOCATION '{data}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}")
    assert client.refresh("mv").mode == "FULL"
    for step in range(2):
        _facts(data, "b", [("x", 10 + step), ("k2", 5), ("new", 6)], f"f{step + 1}.parquet")
        _dims(tmp_path / "dims", [("new", f"fresh{step}"), ("x", f"ex{step}")], f"d{step + 1}.parquet")
        run = client.refresh("mv")
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
        assert_mv_matches(client, "mv", query)


def test_a_compaction_between_refreshes_stays_incremental_and_applies_nothing_twice(
    make_client: Any, tmp_path: Path
) -> None:
    client, schema = _iceberg_setup(make_client, tmp_path, mode="INCREMENTAL")
    _ice(client).append(pa.table({"k": ["x", "w"], "v": [5, 6]}, schema=schema))
    assert client.refresh("mv").mode == "INCREMENTAL"
    compact(_ice(client), tmp_path)
    only_compacted = client.refresh("mv")
    assert (only_compacted.state, only_compacted.mode) == ("SUCCESS", "INCREMENTAL"), only_compacted
    assert "1 compaction snapshot(s) skipped" in only_compacted.reason, only_compacted.reason
    assert_mv_matches(client, "mv", ICE)
    compact(_ice(client), tmp_path)
    _ice(client).append(pa.table({"k": ["x"], "v": [100]}, schema=schema))
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert_mv_matches(client, "mv", ICE)


def test_auto_recomputes_a_small_table_rather_than_apply_its_signed_rows(make_client: Any, tmp_path: Path) -> None:
    client, _schema = _iceberg_setup(make_client, tmp_path)
    client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('incremental_max_change_ratio' = '1000')")
    _ice(client).delete("v = 1")
    run = client.refresh("mv")
    assert run.state == "SUCCESS" and run.mode in ("PCT", "FULL"), run
    # INCREMENTAL is eligible, but its fixed cost (more Spark jobs) exceeds reading a few bytes
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    chosen = next(c for c in run.candidates if c["chosen"])
    assert incremental["eligible"], incremental
    assert "applying signed rows costs about as much as reading 32.0 MiB" in incremental["reason"], incremental
    assert incremental["estimate_bytes"] > 32 * 1024 * 1024 > chosen["estimate_bytes"], run.candidates
    assert_mv_matches(client, "mv", ICE)
