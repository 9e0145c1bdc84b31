"""Refresh passes (``REFRESH MATERIALIZED VIEW a, b, ...``, ``REFRESH ALL MATERIALIZED
VIEWS``): dependency order, one read of a shared change, a failed MV's dependents not run,
bad names refused before anything runs; every MV equal to DuckDB's result of its query."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.errors import ObjectNotFoundError, ParseError, RefreshFailedError
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import netting
from sparkmv.refresh.pass_context import CURRENT, RefreshPass
from sparkmv.sources import change_cache
from sparkmv.sources.changes import SIGNED, BaseChange
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from sparkmv.sources.signed import ADDED, REMOVED
from tests.oracle import assert_mv_matches

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])
BY_K = "SELECT k, sum(v) AS total, count(*) AS n FROM fact GROUP BY k"
JOINED = "SELECT f.k, f.v, d.label FROM fact f JOIN dim d ON f.k = d.k"
NESTED = "SELECT count(*) AS groups, sum(total) AS total FROM by_k"
CHECKED = "SELECT k, v, assert_true(v < 1000) AS ok FROM fact"


def _world(make_client: Any, tmp_path: Path, mode: str) -> Any:
    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    store.create_table(ObjectName.parse("fact"), SCHEMA, None)
    store.create_table(ObjectName.parse("dim"), pa.schema([("k", pa.string()), ("label", pa.string())]), None)
    store.load(ObjectName.parse("fact")).append(
        pa.table({"k": ["a", "b", "c", "a", None, "b"], "v": [1, 2, 3, 40, 5, -6]}, schema=SCHEMA)
    )
    store.load(ObjectName.parse("dim")).append(pa.table({"k": ["a", "b", "x"], "label": ["A", "B", "X"]}))
    for name, query in (("by_k", BY_K), ("joined", JOINED), ("nested", NESTED)):
        client.sql(
            f"CREATE MATERIALIZED VIEW {name} REFRESH DEFERRED PROPERTIES ('refresh_mode' = '{mode}') AS {query}"
        )
    return client


def _check_all(client: Any) -> None:
    for name, query in (("by_k", BY_K), ("joined", JOINED), ("nested", NESTED)):
        assert_mv_matches(client, name, query)


@pytest.mark.spark
def test_a_pass_refreshes_in_dependency_order_and_reads_a_shared_delete_once(make_client: Any, tmp_path: Path) -> None:
    client = _world(make_client, tmp_path, "INCREMENTAL")
    result = client.execute("REFRESH MATERIALIZED VIEW nested, by_k, joined", raise_on_failure=True)
    lines = (result.message or "").splitlines()
    assert [line.split(":")[0] for line in lines] == ["nested", "by_k", "joined"], lines
    assert all(": SUCCESS (FULL" in line for line in lines), lines
    runs = client.refresh_many(["by_k"]).runs  # nothing changed: SKIPPED
    assert [r.state for r in runs.values()] == ["SKIPPED"]
    _check_all(client)
    with client.runtime.catalog.read() as s:
        done = {r.object_name: r for r in client.runtime.catalog.runs.list(s, limit=20)}
    assert done["by_k"].finished <= done["nested"].started, "nested read by_k before it finished"

    # A copy-on-write delete of two rows of fact, read by two MVs: netted once, for both.
    client.runtime.iceberg.load(ObjectName.parse("fact")).delete("v = 40 OR v = 5")
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW by_k").message or ""
    assert "shared change reads:" in text and "  default.fact: read by 2 MVs from snapshot " in text, text
    result = client.execute("REFRESH ALL MATERIALIZED VIEWS", raise_on_failure=True)
    lines = sorted((result.message or "").splitlines())
    assert [line.split(":")[0] for line in lines] == ["by_k", "joined", "nested"], lines
    assert all("SUCCESS (INCREMENTAL" in line for line in lines), lines
    entries = list((Path(str(client.runtime.iceberg.warehouse)) / change_cache.DIRECTORY).glob("*.parquet"))
    assert len(entries) == 2, entries  # fact's change, netted once for two MVs, and by_k's, nested's
    _check_all(client)


@pytest.mark.spark
def test_a_failed_mv_leaves_its_dependents_not_run(make_client: Any, tmp_path: Path) -> None:
    client = _world(make_client, tmp_path, "AUTO")
    client.sql(f"CREATE MATERIALIZED VIEW checked REFRESH DEFERRED AS {CHECKED}")
    client.sql("CREATE MATERIALIZED VIEW over_checked REFRESH DEFERRED AS SELECT count(*) AS n FROM checked")
    client.runtime.iceberg.load(ObjectName.parse("fact")).append(pa.table({"k": ["z"], "v": [5000]}, schema=SCHEMA))
    with pytest.raises(RefreshFailedError) as info:
        client.execute("REFRESH MATERIALIZED VIEW over_checked, checked, by_k", raise_on_failure=True)
    message = str(info.value)
    assert message.startswith("refresh pass: 2 of 3 materialized views did not refresh: 'checked' (run "), message
    assert "'over_checked' (not run: 'checked' did not refresh)" in message, message
    result = client.refresh_many(["over_checked", "checked", "by_k"])
    assert result.runs[ObjectName.parse("by_k")].state == "SKIPPED"  # refreshed by the first pass
    assert result.not_run == {ObjectName.parse("over_checked"): "not run: 'checked' did not refresh"}
    assert_mv_matches(client, "by_k", BY_K)


@pytest.mark.spark
def test_bad_names_are_refused_before_anything_runs(make_client: Any, tmp_path: Path) -> None:
    client = _world(make_client, tmp_path, "AUTO")
    with pytest.raises(ObjectNotFoundError, match="nope"):
        client.execute("REFRESH MATERIALIZED VIEW by_k, nope")
    with pytest.raises(ParseError, match="materialized view 'by_k' is named twice"):
        client.execute("REFRESH MATERIALIZED VIEW by_k, joined, by_k")
    with client.runtime.catalog.read() as s:
        assert client.runtime.catalog.runs.list(s, limit=5) == []


def test_a_copy_on_write_netting_is_shared_among_the_consumers_of_a_pass() -> None:
    old = PinnedTable("default.fact", "iceberg", "{}", [])
    rewritten = {
        REMOVED: PinnedPartition(["old.parquet"], "7", bytes=6000),
        ADDED: PinnedPartition(["new.parquet"], "8"),
    }
    delta = PinnedTable("default.fact", "signed", "{}", [], rewritten, since_snapshot_id=7, snapshot_id=8)
    change = BaseChange("default.fact", SIGNED, None, old, delta, 9000, 10, rows_retracted=4)
    # Netted on the driver a partition at a time: a quarter of a Spark scan's bytes.
    assert netting.shared_read_bytes(None, change) == 2250  # type: ignore[arg-type]  # alone: all of it
    token = CURRENT.set(RefreshPass({1: {"default.fact": 7}, 2: {"default.fact": 7}, 3: {"default.fact": 6}}))
    try:
        assert netting.shared_read_bytes(None, change) == 1125  # type: ignore[arg-type]  # two consume it
    finally:
        CURRENT.reset(token)
    # A file too large to net on the driver: Spark nets it, at its bytes.
    huge = {role: replace(p, bytes=2**30) for role, p in rewritten.items()}
    large = replace(change, delta=replace(delta, partitions=huge), delta_bytes=2**31)
    assert netting.shared_read_bytes(None, large) == 2**31  # type: ignore[arg-type]


def test_one_pass_wrapper_serves_threads_at_once() -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from sparkmv.refresh.pass_context import current_pass, in_pass

    shared = RefreshPass({1: {"default.fact": 7}})
    barrier = threading.Barrier(4)

    def seen() -> RefreshPass | None:
        barrier.wait(timeout=10)  # all four inside the wrapper at once
        return current_pass()

    wrapped = in_pass(shared, seen)
    with ThreadPoolExecutor(4) as pool:
        assert [f.result() for f in [pool.submit(wrapped) for _ in range(4)]] == [shared] * 4
    assert current_pass() is None  # the caller's own context is untouched
