"""Delta Lake base tables written by delta-rs' own writer (an outside writer): an append, an
overwrite of one partition and a delete, each followed by a refresh that rewrites exactly
the MV partitions the commit touched (PCT), the MV equal to its query recomputed by DuckDB
over delta-rs' own read of the table; INCREMENTAL over add-only commits; reader features
sparkmv cannot read refused with nothing registered."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.errors import SourceError
from tests.helpers import rows_of

pytestmark = [pytest.mark.spark]

QUERY = "SELECT d, k, sum(v) AS total, count(*) AS n FROM t GROUP BY d, k"
D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


def _rows(rows: list[tuple[date, str, int]]) -> pa.Table:
    return pa.table(
        {
            "d": pa.array([r[0] for r in rows], pa.date32()),
            "k": pa.array([r[1] for r in rows], pa.string()),
            "v": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def _write(root: Path, rows: list[tuple[date, str, int]], **kwargs: Any) -> None:
    from deltalake import write_deltalake

    write_deltalake(str(root), _rows(rows), **kwargs)


def _expected(root: Path) -> list[tuple[Any, ...]]:
    """The MV's query over the Delta table as delta-rs reads it, computed by DuckDB."""
    import duckdb
    from deltalake import DeltaTable

    rel = DeltaTable(str(root)).to_pyarrow_table()  # noqa: F841 - read by DuckDB by name
    got = duckdb.sql("SELECT d, k, sum(v), count(*) FROM rel GROUP BY d, k").fetchall()
    return sorted((str(d), k, int(total), int(n)) for d, k, total, n in got)


def _mv_rows(client: Any) -> list[tuple[Any, ...]]:
    return sorted((str(d), k, int(total), int(n)) for d, k, total, n in rows_of(client.table("mv")))


def _rewritten(client: Any, run_id: int) -> list[str]:
    """The MV partitions the run rewrote (its chunks' partitions)."""
    return sorted(str(p) for c in client.chunks(run_id) for p in c["partitions"])


def _setup(make_client: Callable[..., Any], root: Path, mode: str = "AUTO", props: str = "") -> Any:
    _write(root, [(D1, "a", 1), (D1, "b", 2), (D2, "a", 10), (D3, "c", 100)], partition_by=["d"])
    client = make_client()
    msg = client.execute(f"CREATE EXTERNAL TABLE t USING delta LOCATION '{root}'").message
    assert msg == "created external table 't' (delta) partitioned by d"
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY d PROPERTIES ('refresh_mode' = '{mode}'{props}) AS {QUERY}")
    assert _mv_rows(client) == _expected(root)
    return client


def test_append_overwrite_and_delete_refresh_only_the_touched_partitions(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    root = tmp_path / "delta"
    client = _setup(make_client, root, mode="PCT")
    assert [tuple(r) for r in client.sql("DESCRIBE t").collect()] == [
        ("d", "date", True),
        ("k", "string", False),
        ("v", "bigint", False),
    ]

    _write(root, [(D2, "a", 5), (D2, "z", 7)], mode="append")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert _rewritten(client, run.run_id) == ["2024-01-02"]
    assert _mv_rows(client) == _expected(root)
    assert ("2024-01-02", "a", 15, 2) in _mv_rows(client)

    _write(root, [(D3, "c", 1), (D3, "q", 2)], mode="overwrite", predicate="d = '2024-01-03'")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert _rewritten(client, run.run_id) == ["2024-01-03"]
    assert _mv_rows(client) == _expected(root)
    assert [r for r in _mv_rows(client) if r[0] == "2024-01-03"] == [
        ("2024-01-03", "c", 1, 1),
        ("2024-01-03", "q", 2, 1),
    ]

    from deltalake import DeltaTable

    DeltaTable(str(root)).delete("k = 'b'")  # rows of 2024-01-01 only
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert _rewritten(client, run.run_id) == ["2024-01-01"]
    assert _mv_rows(client) == _expected(root)
    assert [r for r in _mv_rows(client) if r[0] == "2024-01-01"] == [("2024-01-01", "a", 1, 1)]

    DeltaTable(str(root)).delete("d = '2024-01-02'")  # a whole partition goes
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert _mv_rows(client) == _expected(root)
    assert not [r for r in _mv_rows(client) if r[0] == "2024-01-02"]
    assert client.refresh("mv").state == "SKIPPED"


def test_adds_and_removes_are_applied_incrementally_until_a_removed_file_is_vacuumed(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    root = tmp_path / "delta"
    client = _setup(make_client, root, mode="INCREMENTAL")
    _write(root, [(D1, "a", 4)], mode="append")
    _write(root, [(D1, "n", 6)], mode="append")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert _mv_rows(client) == _expected(root)

    from deltalake import DeltaTable

    DeltaTable(str(root)).delete("k = 'n'")  # remove actions with dataChange: a signed change
    _write(root, [(D2, "a", 1), (D1, "b", 3)], mode="overwrite", predicate="d = '2024-01-02' OR d = '2024-01-01'")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert "signed change log" in run.reason, run.reason
    assert _mv_rows(client) == _expected(root)

    DeltaTable(str(root)).delete("k = 'c'")
    DeltaTable(str(root)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    before = _mv_rows(client)
    run = client.refresh("mv")
    assert run.state == "FAILED", run
    assert "removed from base table 'default.t' since version" in (run.error or ""), run.error
    assert "was vacuumed: its rows cannot be retracted" in (run.error or ""), run.error
    assert _mv_rows(client) == before
    client.sql("ALTER MATERIALIZED VIEW mv SET PROPERTIES ('refresh_mode' = 'AUTO')")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "PCT"), run
    assert _mv_rows(client) == _expected(root)


def test_unpartitioned_table_is_read_at_the_pinned_version(make_client: Callable[..., Any], tmp_path: Path) -> None:
    root = tmp_path / "flat"
    _write(root, [(D1, "a", 1), (D2, "a", 2)])
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE t USING delta LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv AS {QUERY}")
    _write(root, [(D1, "a", 3)], mode="overwrite")
    assert client.refresh("mv").state == "SUCCESS"
    assert _mv_rows(client) == _expected(root) == [("2024-01-01", "a", 3, 1)]


def _commit(root: Path, version: int, *actions: dict[str, Any]) -> None:
    """Write commit ``version`` by hand (a writer with features delta-rs does not write)."""
    lines = [{"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}}, *actions]
    (root / "_delta_log" / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in lines))


def _protocol(*features: str) -> dict[str, Any]:
    return {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": list(features),
            "writerFeatures": list(features),
        }
    }


def _column_mapping(root: Path) -> dict[str, Any]:
    first = (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    meta = next(json.loads(line) for line in first if "metaData" in line)
    schema = json.loads(meta["metaData"]["schemaString"])
    for i, f in enumerate(schema["fields"]):
        f["metadata"] = {"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": f["name"]}
    meta["metaData"]["schemaString"] = json.dumps(schema)
    meta["metaData"]["configuration"] = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "3"}
    return meta


def _catalog_rows(client: Any) -> list[Any]:
    with client.runtime.catalog.read() as s:
        return [(r.namespace, r.name, r.kind) for r in client.runtime.catalog.objects.list(s)]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("not_delta", r"^table 't': LOCATION '{root}' is not a Delta table \(no _delta_log\)$"),
        ("missing", r"^table 't': LOCATION '{root}/nope' does not exist$"),
        ("variant", r"^table 't': Delta reader feature 'variantType' not supported$"),
        (
            "column_mapping",
            r"^table 't': Delta reader feature 'columnMapping' \(mode 'name'\) not supported: "
            r"its Parquet files name columns by physical names$",
        ),
    ],
)
def test_unreadable_delta_tables_are_refused_and_nothing_registered(
    make_client: Callable[..., Any], tmp_path: Path, case: str, message: str
) -> None:
    root = tmp_path / "delta"
    location = root / "nope" if case == "missing" else root
    if case == "not_delta":
        root.mkdir()
        (root / "x.parquet").write_bytes(b"PAR1")
    elif case != "missing":
        _write(root, [(D1, "a", 1)], partition_by=["d"])
        if case == "variant":
            _commit(root, 1, _protocol("variantType"))
        else:
            _commit(root, 1, _protocol("columnMapping"), _column_mapping(root))
    client = make_client()
    with pytest.raises(SourceError, match=message.replace("{root}", str(root))):
        client.sql(f"CREATE EXTERNAL TABLE t USING delta LOCATION '{location}'")
    assert _catalog_rows(client) == []


def test_a_feature_enabled_later_fails_the_refresh_and_the_mv_turns_inactive(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    root = tmp_path / "delta"
    client = _setup(make_client, root, mode="PCT")
    _commit(root, 1, _protocol("variantType"))
    run = client.refresh("mv")
    assert run.state == "FAILED", run
    assert run.error == "MV 'mv' is inactive: table 'default.t': Delta reader feature 'variantType' not supported"


def test_files_outside_hive_directories_get_partition_values_as_literals(spark: Any, tmp_path: Path) -> None:
    """A writer may place files anywhere (column mapping, random prefixes): partition values
    then come from the add actions, not from the path."""
    import pyarrow.parquet as pq

    from sparkmv.sources import delta
    from sparkmv.sources.pinned import PinnedPartition, PinnedTable

    pq.write_table(pa.table({"k": ["a", "b"], "v": [1, 2]}), tmp_path / "x1.parquet")
    (tmp_path / "ab").mkdir()
    pq.write_table(pa.table({"k": ["c"], "v": [3]}), tmp_path / "ab" / "x2.parquet")
    schema = (
        '{"type": "struct", "fields": [{"name": "d", "type": "date", "nullable": true, "metadata": {}}, '
        '{"name": "k", "type": "string", "nullable": true, "metadata": {}}, '
        '{"name": "v", "type": "long", "nullable": true, "metadata": {}}]}'
    )
    pinned = PinnedTable(
        "default.t",
        "delta",
        schema,
        ["d"],
        {
            "d=2024-01-01": PinnedPartition([str(tmp_path / "x1.parquet")], "h1"),
            "d=__HIVE_DEFAULT_PARTITION__": PinnedPartition([str(tmp_path / "ab" / "x2.parquet")], "h2"),
        },
        location=str(tmp_path),
        snapshot_id=0,
    )
    df = delta.read(spark, pinned)
    assert df.columns == ["d", "k", "v"]
    assert rows_of(df) == [(D1, "a", 1), (D1, "b", 2), (None, "c", 3)]
    assert rows_of(delta.read(spark, pinned, {"d=2024-01-01"})) == [(D1, "a", 1), (D1, "b", 2)]


# -- the change data feed --------------------------------------------------------------------

FEED = {"delta.enableChangeDataFeed": "true"}
PROJECTION = "SELECT d, k, v FROM t WHERE v > 0"


def _feed_change(run: Any) -> dict[str, Any]:
    """The change of base table ``t`` as the run's INCREMENTAL candidate read it."""
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    keys = ("kind", "rows_added", "rows_retracted", "source")
    return {k: v for k, v in incremental["changes"][0].items() if k in keys}


def _incremental(client: Any, query: str) -> Any:
    """Refresh ``mv``: an INCREMENTAL run, the MV equal to ``query`` computed by DuckDB."""
    from tests.helpers import assert_mv_matches

    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert_mv_matches(client, "mv", query)
    return run


@pytest.mark.parametrize("query", [QUERY, PROJECTION], ids=["aggregate", "projection"])
def test_deletes_updates_and_merges_are_read_from_the_change_data_feed(
    make_client: Callable[..., Any], tmp_path: Path, query: str
) -> None:
    from deltalake import DeltaTable

    root = tmp_path / "delta"
    rows = [(D1, "a", 1), (D1, "b", 2), (D1, "c", 3), (D2, "a", 10), (D3, "c", 100)]
    _write(root, rows, partition_by=["d"], configuration=FEED)
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE t USING delta LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY d PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}")

    DeltaTable(str(root)).delete("k = 'b'")  # one row of a file of three: the feed holds that row only
    run = _incremental(client, query)
    assert "(signed change log, change data feed), 1 files read" in run.reason, run.reason
    feed = {"kind": "signed", "source": "change data feed"}
    assert _feed_change(run) == {**feed, "rows_added": 0, "rows_retracted": 1}

    DeltaTable(str(root)).update(updates={"v": "v + 100"}, predicate="k = 'a'")  # two partitions
    run = _incremental(client, query)
    assert _feed_change(run) == {**feed, "rows_added": 2, "rows_retracted": 2}
    if query == QUERY:
        assert ("2024-01-02", "a", 110, 1) in _mv_rows(client)

    source = _rows([(D1, "a", 7), (D1, "c", -3), (D3, "z", 9)])
    (
        DeltaTable(str(root))
        .merge(source, "s.d = t.d AND s.k = t.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    run = _incremental(client, query)
    assert _feed_change(run) == {**feed, "rows_added": 3, "rows_retracted": 2}

    # A delete of a whole partition (no cdc action: the removed file's rows) and an append
    # in one range.
    DeltaTable(str(root)).delete("d = '2024-01-02'")
    _write(root, [(D2, "n", 4)], mode="append")
    run = _incremental(client, query)
    assert _feed_change(run) == {**feed, "rows_added": 1, "rows_retracted": 1}
    assert client.refresh("mv").state == "SKIPPED"


def test_a_delete_whose_removed_file_was_vacuumed_is_applied_from_the_feed(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    """VACUUM deletes the removed data file (the remove-action path would fail) but keeps
    the feed's ``_change_data`` files."""
    from deltalake import DeltaTable

    root = tmp_path / "delta"
    _write(root, [(D1, "a", 1), (D1, "b", 2), (D2, "a", 10)], partition_by=["d"], configuration=FEED)
    client = make_client()
    client.sql(f"CREATE EXTERNAL TABLE t USING delta LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY d PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    DeltaTable(str(root)).delete("k = 'b'")
    DeltaTable(str(root)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    run = _incremental(client, QUERY)
    assert _feed_change(run)["source"] == "change data feed"
    assert _mv_rows(client) == _expected(root) == [("2024-01-01", "a", 1, 1), ("2024-01-02", "a", 10, 1)]


def test_a_feed_enabled_after_the_consumed_version_falls_back_to_the_removed_files(
    make_client: Callable[..., Any], tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    root = tmp_path / "delta"
    client = _setup(make_client, root, mode="INCREMENTAL")  # no feed at the consumed version
    DeltaTable(str(root)).alter.set_table_properties(FEED)
    DeltaTable(str(root)).delete("k = 'b'")
    run = _incremental(client, QUERY)
    assert "(signed change log), 2 files read" in run.reason, run.reason
    assert _feed_change(run) == {"kind": "signed", "rows_added": 1, "rows_retracted": 2, "source": None}

    DeltaTable(str(root)).update(updates={"v": "v * 2"}, predicate="k = 'a'")  # consumed: the feed is on
    run = _incremental(client, QUERY)
    assert "(signed change log, change data feed)" in run.reason, run.reason
    assert _feed_change(run) == {"kind": "signed", "rows_added": 2, "rows_retracted": 2, "source": "change data feed"}

    DeltaTable(str(root)).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})
    DeltaTable(str(root)).delete("k = 'a'")
    run = _incremental(client, QUERY)
    assert _feed_change(run)["source"] is None
    assert _mv_rows(client) == _expected(root) == [("2024-01-03", "c", 100, 1)]


def test_feed_rows_are_signed_cast_and_netted(tmp_path: Path) -> None:
    """The feed's change types as signs, its own columns dropped, the view types cast to the
    table's schema, and a row inserted then deleted in the range netted away."""
    from deltalake import DeltaTable

    from sparkmv.sources.delta import _schema_json, open_table
    from sparkmv.sources.delta_cdf import signed_rows
    from sparkmv.sources.signed_arrow import SIGN_COLUMN, net_arrow
    from sparkmv.storage.schema import schema_from_json

    root = tmp_path / "delta"
    _write(root, [(D1, "a", 1), (D1, "b", 2)], configuration=FEED)
    _write(root, [(D2, "x", 5)], mode="append")
    DeltaTable(str(root)).update(updates={"v": "v + 1"}, predicate="k = 'a'")
    DeltaTable(str(root)).delete("k = 'x'")
    schema = schema_from_json(_schema_json(open_table("t", str(root))))
    feed = pa.table(DeltaTable(str(root)).load_cdf(starting_version=1, ending_version=3))
    rows = signed_rows(feed, schema)
    assert rows.schema.names == ["d", "k", "v", SIGN_COLUMN]
    assert rows.schema.field("k").type == pa.string()
    assert sorted(rows.to_pylist(), key=str) == sorted(
        [
            {"d": D2, "k": "x", "v": 5, SIGN_COLUMN: 1},
            {"d": D1, "k": "a", "v": 1, SIGN_COLUMN: -1},
            {"d": D1, "k": "a", "v": 2, SIGN_COLUMN: 1},
            {"d": D2, "k": "x", "v": 5, SIGN_COLUMN: -1},
        ],
        key=str,
    )
    netted = net_arrow(rows)
    assert netted is not None
    assert sorted(netted.to_pylist(), key=str) == sorted(
        [{"d": D1, "k": "a", "v": 1, SIGN_COLUMN: -1}, {"d": D1, "k": "a", "v": 2, SIGN_COLUMN: 1}], key=str
    )
