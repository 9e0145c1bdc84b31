"""The change cache (:mod:`sparkmv.sources.change_cache`): a copy-on-write delete's netted
rows are computed once and read by every later MV over the same change.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.names import ObjectName
from sparkmv.sources import change_cache
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from sparkmv.sources.signed import SIGN_COLUMN
from tests.oracle import assert_mv_matches

CHANGE = PinnedTable(
    "default.t",
    "signed",
    "{}",
    [],
    {"+": PinnedPartition("+", ["/w/new.parquet"], 10), "-": PinnedPartition("-", ["/w/old.parquet"], 12)},
    snapshot_id=7,
    since_snapshot_id=5,
)
ROWS = pa.table({"k": ["a", "b"], SIGN_COLUMN: pa.array([-1, 1], pa.int32())})


def test_an_entry_is_stored_once_and_read_back(tmp_path: Path) -> None:
    assert change_cache.cached_rows(tmp_path, CHANGE) is None and change_cache.load(tmp_path, CHANGE) is None
    assert change_cache.store(tmp_path, CHANGE, ROWS)
    rows, size = change_cache.cached_rows(tmp_path, CHANGE) or (0, 0)
    entry = tmp_path / change_cache.DIRECTORY / f"{change_cache.key(CHANGE)}.parquet"
    assert rows == 2 and size == entry.stat().st_size
    assert change_cache.load(tmp_path, CHANGE) == ROWS
    other = dataclasses.replace(CHANGE, since_snapshot_id=6)
    assert change_cache.cached_rows(tmp_path, other) is None, "another range is another entry"
    assert [p.name for p in (tmp_path / change_cache.DIRECTORY).iterdir()] == [f"{change_cache.key(CHANGE)}.parquet"]


def test_a_large_change_is_not_stored_and_old_entries_expire(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(change_cache, "MAX_ROWS", 1)
    assert not change_cache.store(tmp_path, CHANGE, ROWS)
    assert change_cache.cached_rows(tmp_path, CHANGE) is None
    monkeypatch.setattr(change_cache, "MAX_ROWS", 10)
    stale = tmp_path / change_cache.DIRECTORY / "stale.parquet"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"x")
    old = time.time() - change_cache.KEEP_SECONDS - 60
    os.utime(stale, (old, old))
    assert change_cache.store(tmp_path, CHANGE, ROWS)
    assert not stale.exists(), "an entry older than KEEP_SECONDS is removed by the next write"
    assert change_cache.cached_rows(tmp_path, CHANGE) is not None


AGG = "SELECT k, sum(v) AS total, count(*) AS n FROM ice GROUP BY k"
FILTERED = "SELECT k, v FROM ice WHERE v > 100"


def _four_files(client: Any) -> Any:
    """Iceberg table ``ice`` (k string, v bigint) of four appended files of 300 rows each."""
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    client.runtime.iceberg.create_table(ObjectName.parse("ice"), schema, None)
    ice = client.runtime.iceberg.load(ObjectName.parse("ice"))
    for f in range(4):
        ice.append(pa.table({"k": [f"k{i % 7}" for i in range(300)], "v": [f * 300 + i for i in range(300)]}, schema))
    return ice


@pytest.mark.spark
def test_the_second_mv_reads_the_netted_change_from_the_cache(make_client: Any, tmp_path: Path) -> None:
    """A copy-on-write delete of two rows rewrites two of four files. AUTO nets the change
    once while it weighs INCREMENTAL for the first MV and stores it; the second MV (strict
    INCREMENTAL) then reads the stored rows: it still refreshes, exactly, with the rewritten
    files gone from disk."""
    client = make_client(tmp_path / "home")
    ice = _four_files(client)
    client.sql(f"CREATE MATERIALIZED VIEW mv1 REFRESH DEFERRED AS {AGG}")
    strict = "PROPERTIES ('refresh_mode' = 'INCREMENTAL')"
    client.sql(f"CREATE MATERIALIZED VIEW mv2 REFRESH DEFERRED {strict} AS {FILTERED}")
    assert client.refresh("mv1").mode == "FULL" and client.refresh("mv2").mode == "FULL"
    before = {t.file.file_path for t in ice.scan().plan_files()}
    client.runtime.iceberg.load(ObjectName.parse("ice")).delete("v = 5 OR v = 905")
    first = client.refresh("mv1", raise_on_failure=True)
    incremental = next(c for c in first.candidates if c["mode"] == "INCREMENTAL")
    assert (
        "base table 'default.ice': 2 rows netted from +598 / -600 (signed change log, change cache"
        in (incremental["reason"])
    ), incremental
    entries = list((Path(str(client.runtime.iceberg.warehouse)) / change_cache.DIRECTORY).glob("*.parquet"))
    assert len(entries) == 1, entries
    after = {t.file.file_path for t in client.runtime.iceberg.load(ObjectName.parse("ice")).scan().plan_files()}
    rewritten = before - after
    assert len(rewritten) == 2, rewritten
    for path in rewritten:  # as an expired snapshot's files would be
        Path(path.removeprefix("file://")).unlink()
    second = client.refresh("mv2", raise_on_failure=True)
    assert (second.state, second.mode) == ("SUCCESS", "INCREMENTAL"), second
    assert "2 rows netted from +598 / -600" in (second.reason or ""), second.reason
    assert_mv_matches(client, "mv1", AGG)
    assert_mv_matches(client, "mv2", FILTERED)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("driver_netting", "mode", "weighed"),
    [
        (False, "FULL", "+1196 / -1200 rows (signed change log)"),
        (True, "INCREMENTAL", "4 rows netted from +1196 / -1200"),
    ],
)
def test_auto_nets_a_rewrite_only_when_cheaper_than_its_full_refresh(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver_netting: bool, mode: str, weighed: str
) -> None:
    """Netting reads both versions of every rewritten file. Netted in Spark (files too
    large for the driver, as set here), that is more than the MV's FULL read (and than the
    fixed floor, lowered here to 0 for small tables): AUTO weighs the change un-netted,
    stores nothing, and recomputes. Netted on the driver a partition at a time, a byte
    weighs a quarter of a Spark scan's, under the FULL read: AUTO nets it, stores it and
    refreshes incrementally. Exact both ways."""
    from sparkmv.refresh.incremental import decide
    from sparkmv.sources import signed

    monkeypatch.setattr(decide, "SIGNED_FIXED_BYTES", 0)
    if not driver_netting:
        monkeypatch.setattr(signed, "ARROW_NETTING_BYTES", 0)
    client = make_client(tmp_path / "home")
    _four_files(client)
    client.sql(f"CREATE MATERIALIZED VIEW mv1 REFRESH DEFERRED AS {AGG}")
    assert client.refresh("mv1").mode == "FULL"
    client.runtime.iceberg.load(ObjectName.parse("ice")).delete("v = 5 OR v = 905 OR v = 305 OR v = 605")
    run = client.refresh("mv1", raise_on_failure=True)
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert weighed in incremental["reason"], incremental
    assert run.mode == mode, run
    stored = list((Path(str(client.runtime.iceberg.warehouse)) / change_cache.DIRECTORY).glob("*.parquet"))
    assert len(stored) == (1 if driver_netting else 0), stored
    assert_mv_matches(client, "mv1", AGG)


JOINED = "SELECT ice.k, sum(ice.v) AS total, count(*) AS n FROM ice JOIN dim ON dim.k = ice.k GROUP BY ice.k"


@pytest.mark.spark
@pytest.mark.parametrize("term_bytes", [0, 1 << 40])
def test_auto_nets_only_when_incremental_could_win(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, term_bytes: int
) -> None:
    """A rewrite cheaper to net than the MV's FULL read is netted only when INCREMENTAL
    could win at all: with the change netted to nothing, its estimate (here the joins and a
    join term's fixed cost) must still be under FULL's. Exact either way."""
    from sparkmv.refresh.incremental import decide

    monkeypatch.setattr(decide, "SIGNED_FIXED_BYTES", 0)
    monkeypatch.setattr(decide, "JOIN_TERM_FIXED_BYTES", term_bytes)
    client = make_client(tmp_path / "home")
    _four_files(client)
    schema = pa.schema([("k", pa.string()), ("label", pa.string())])
    client.runtime.iceberg.create_table(ObjectName.parse("dim"), schema, None)
    dim = client.runtime.iceberg.load(ObjectName.parse("dim"))
    dim.append(pa.table({"k": [f"k{i}" for i in range(7)], "label": ["x" * 4000] * 7}, schema))
    client.sql(f"CREATE MATERIALIZED VIEW mvj REFRESH DEFERRED AS {JOINED}")
    assert client.refresh("mvj").mode == "FULL"
    client.runtime.iceberg.load(ObjectName.parse("ice")).delete("v = 5 OR v = 905")
    run = client.refresh("mvj", raise_on_failure=True)
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    entries = list((Path(str(client.runtime.iceberg.warehouse)) / change_cache.DIRECTORY).glob("*.parquet"))
    if term_bytes:
        assert not entries and "+598 / -600 rows (signed change log)" in incremental["reason"], incremental
        assert run.mode == "FULL", run
    else:
        assert len(entries) == 1, incremental
        assert "2 rows netted from +598 / -600" in incremental["reason"], incremental
    assert_mv_matches(client, "mvj", JOINED)


@pytest.mark.spark
def test_spark_netting_keeps_exactly_the_changed_rows(spark: Any) -> None:
    """The Spark netting (hash buckets, then exact netting of the changed buckets) gives the
    multiset difference: rows retracted and added back cancel, duplicates count, and rows
    that differ only by where their NULL is do not cancel each other."""
    from sparkmv.sources.signed import netted

    kept = [(i, f"s{i % 3}", None if i % 4 else 1.5, s) for i in range(40) for s in (1, -1)]
    changed = [
        (100, None, 2.0, -1),  # deleted
        (101, "x", None, 1),  # inserted twice
        (101, "x", None, 1),
        (7, "s1", None, -1),  # one of two copies deleted (the other is in ``kept``)
        (None, "a", None, 1),  # (NULL, 'a') inserted and ('a' moved) deleted: not the same row
        (5, None, None, -1),
        (None, None, 5.0, 1),
    ]
    rows = spark.createDataFrame(kept + changed, f"k int, s string, v double, {SIGN_COLUMN} int")
    got = sorted((tuple(r) for r in netted(rows, ["k", "s", "v"]).collect()), key=str)
    assert got == sorted(changed, key=str)


def _lake_four_files(client: Any, tmp_path: Path, rows: int) -> Any:
    """Four files of ``rows`` rows as ``_four_files``, as table ``lake.db.ice`` of an
    external SQL catalog ``lake`` written by an outside pyiceberg (sparkmv's own tables never
    carry delete files)."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{tmp_path}/lake.db", tmp_path / "lakewh"
    warehouse.mkdir()
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    cat.create_namespace("db")
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    ice = cat.create_table(("db", "ice"), schema=schema)
    for f in range(4):
        keys = [f"k{i % 7}" for i in range(rows)]
        ice.append(pa.table({"k": keys, "v": [f * rows + i for i in range(rows)]}, schema))
    client.execute(
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )
    return ice


@pytest.mark.spark
@pytest.mark.parametrize("consumers", [1, 3])
def test_a_merge_on_read_change_is_read_when_its_share_is_under_full(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, consumers: int
) -> None:
    """Position deletes in every file: reading the change scans all four files (plus the
    delete files), more than one MV's FULL read. Alone, the MV recomputes and nothing is
    stored; with three MVs over the table at the same snapshot, its share is a third, so
    AUTO reads the change once (stored for the others) and refreshes INCREMENTAL. The
    change is weighed as the rows deleted, not as the files it reads. Exact either way."""
    import pyarrow.compute as pc

    from sparkmv.demo.iceberg_deletes import delete_rows
    from sparkmv.refresh.incremental import decide

    monkeypatch.setattr(decide, "SIGNED_FIXED_BYTES", 0)
    client = make_client(tmp_path / "home")
    ice = _lake_four_files(client, tmp_path, 20_000)
    query = AGG.replace("FROM ice", "FROM lake.db.ice")
    names = [f"mv{i}" for i in range(consumers)]
    for name in names:
        client.sql(f"CREATE MATERIALIZED VIEW {name} REFRESH DEFERRED AS {query}")
        assert client.refresh(name).mode == "FULL"
    deleted = delete_rows(ice, lambda t: pc.is_in(t.column("v"), pa.array([5, 20_005, 40_005, 60_005], pa.int64())))
    assert deleted == 4
    run = client.refresh("mv0", raise_on_failure=True)
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    entries = list((Path(str(client.runtime.iceberg.warehouse)) / change_cache.DIRECTORY).glob("*.parquet"))
    if consumers == 1:
        assert "+0 / -4 rows (signed change log), 4 files read" in incremental["reason"], incremental
        assert "change ratio" not in incremental["reason"], "4 of 80,000 rows is a small change"
        assert run.mode == "FULL" and not entries, run
    else:
        assert "4 rows netted from +0 / -4" in incremental["reason"], incremental
        assert run.mode == "INCREMENTAL" and len(entries) == 1, run
        assert [client.refresh(n, raise_on_failure=True).mode for n in names[1:]] == ["INCREMENTAL"] * 2
    for name in names:
        assert_mv_matches(client, name, query)
