"""Sources: the change log of a base table between a consumed position and a run's pinned
input, on real pyiceberg tables (SQLite catalog) and real Parquet directories. No Spark."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update.snapshot import _OverwriteFiles
from pyiceberg.typedef import EMPTY_DICT
from pyiceberg.types import StringType

from sparkmv.names import ObjectName
from sparkmv.sources import iceberg, parquet
from sparkmv.sources.changes import (
    APPEND,
    NOT_APPEND_ONLY,
    SIGNED,
    UNCHANGED,
    BaseChange,
    base_change,
    delta_bytes_total,
)
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from sparkmv.storage.iceberg import IcebergStore

T = ObjectName("default", "t")
SCHEMA = pa.schema([pa.field("p", pa.int64()), pa.field("v", pa.string())])


@pytest.fixture
def store(tmp_path: Path) -> IcebergStore:
    return IcebergStore("sqlite:///" + str(tmp_path / "c.db"), tmp_path / "wh")


@pytest.fixture
def table(store: IcebergStore) -> Table:
    return store.create_table(T, SCHEMA, "p")


def _file_sizes(files: list[str]) -> list[int]:
    return [Path(f.removeprefix("file://")).stat().st_size for f in files]


def _rows(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"p": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=SCHEMA)


def _pin(table: Table) -> PinnedTable:
    return iceberg.pin(T.qualified, table)


def _files(pinned: PinnedTable) -> dict[str, list[str]]:
    return {k: p.files for k, p in pinned.partitions.items()}


def _added(before: PinnedTable, after: PinnedTable) -> dict[str, list[str]]:
    """Partition path -> files of ``after`` not in ``before`` (what an append added)."""
    old = {f for p in before.partitions.values() for f in p.files}
    out = {k: sorted(f for f in p.files if f not in old) for k, p in after.partitions.items()}
    return {k: v for k, v in out.items() if v}


class _Rewrite(_OverwriteFiles):
    """A ``replace`` snapshot (compaction): pyiceberg 0.12 has no public rewrite and its
    summary builder rejects ``replace``, so the overwrite producer's summary is relabelled."""

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        summary = super()._summary(snapshot_properties)
        return Summary(Operation.REPLACE, **summary.additional_properties)


def compact(table: Table, tmp_path: Path, partition: int | None = None) -> str:
    """Rewrite the files of ``partition`` (every file when None) into one file as a
    ``replace`` snapshot, as a compaction does; returns its path."""
    from pyiceberg.table import _parquet_files_to_data_files

    tasks = table.scan().plan_files()
    old = [t.file for t in tasks if partition is None or t.file.partition[0] == partition]
    path = str(tmp_path / f"compacted-{partition}-{len(table.snapshots())}.parquet")
    rows = table.scan(row_filter=f"p == {partition}") if partition is not None else table.scan()
    pq.write_table(rows.to_arrow(), path)
    with table.transaction() as tx:
        mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
        tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        with _Rewrite(Operation.OVERWRITE, tx, table.io) as rewrite:
            for f in old:
                rewrite.delete_data_file(f)
            for f in _parquet_files_to_data_files(tx.table_metadata, [path], table.io):
                rewrite.append_data_file(f)
    assert table.current_snapshot().summary.operation == Operation.REPLACE  # type: ignore[union-attr]
    return path


@dataclasses.dataclass
class _Snapshots:
    """Stands for a table whose metadata holds these snapshots (for metadata pyiceberg
    does not write)."""

    snapshots: dict[int, Snapshot]

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self.snapshots.get(snapshot_id)


def _sid(table: Table) -> int:
    snap = table.current_snapshot()
    assert snap is not None
    return snap.snapshot_id


# -- Iceberg -------------------------------------------------------------------------------------


def test_same_snapshot_is_unchanged(table: Table) -> None:
    table.append(_rows((1, "a")))
    pinned = _pin(table)
    assert base_change(pinned, _pin(table), table) == BaseChange("default.t", UNCHANGED, None, pinned, None)


def test_append_delta_is_the_added_files_by_partition(table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    table.append(_rows((1, "b"), (2, "c"), (2, "d")))
    current = _pin(table)
    change = base_change(consumed, current, table)
    assert (change.kind, change.reason, change.old, change.compactions) == (APPEND, None, consumed, 0)
    assert change.delta is not None
    assert _files(change.delta) == _added(consumed, current)
    assert sorted(change.delta.partitions) == ["p=1", "p=2"]
    assert [p.rows for p in change.delta.partitions.values()] == [1, 2]
    assert change.delta.partitions["p=1"].version == current.partitions["p=1"].version
    assert change.delta_rows == 3
    files = {f.path: f.size_bytes for f in IcebergStore.data_files(table)}
    assert change.delta_bytes == sum(files[f] for fs in _added(consumed, current).values() for f in fs)
    assert change.delta_bytes == change.delta.partitions["p=1"].bytes + change.delta.partitions["p=2"].bytes
    assert (change.delta.name, change.delta.snapshot_id, change.delta.schema_json) == (
        current.name,
        current.snapshot_id,
        current.schema_json,
    )


def test_two_appends_are_one_delta(table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    table.append(_rows((1, "b")))
    table.append(_rows((3, "c")))
    current = _pin(table)
    change = base_change(consumed, current, table)
    assert change.kind == APPEND and change.delta is not None
    assert _files(change.delta) == _added(consumed, current)
    assert [len(v) for v in _files(change.delta).values()] == [1, 1]
    assert change.delta_rows == 2


def test_unpartitioned_append(store: IcebergStore) -> None:
    table = store.create_table(ObjectName("default", "u"), SCHEMA, None)
    table.append(_rows((1, "a")))
    consumed = iceberg.pin("default.u", table)
    table.append(_rows((2, "b")))
    current = iceberg.pin("default.u", table)
    change = base_change(consumed, current, table)
    assert change.delta is not None and _files(change.delta) == _added(consumed, current)
    assert list(change.delta.partitions) == [""]


def test_compaction_is_skipped_and_never_counted_as_added(table: Table, tmp_path: Path) -> None:
    table.append(_rows((1, "a")))
    first = _pin(table)
    table.append(_rows((1, "b"), (2, "c")))
    second = _pin(table)
    compacted = compact(table, tmp_path, 1)
    current = _pin(table)
    assert current.partitions["p=1"].files == [compacted]
    # Compaction only: nothing to apply.
    only = base_change(second, current, table)
    assert (only.kind, only.delta, only.compactions, only.delta_bytes) == (UNCHANGED, None, 1, 0)
    # Append then compaction: the delta is exactly the appended files (rows b and c once),
    # not the compacted file that also holds row a.
    change = base_change(first, current, table)
    assert (change.kind, change.compactions, change.delta_rows) == (APPEND, 1, 2)
    assert change.delta is not None
    assert _files(change.delta) == _added(first, second)
    assert compacted not in {f for fs in _files(change.delta).values() for f in fs}
    rows = pa.concat_tables(
        pq.read_table(f.removeprefix("file://")) for fs in _files(change.delta).values() for f in fs
    )
    assert sorted(rows.column("v").to_pylist()) == ["b", "c"]


def _signed_rows(change: BaseChange) -> list[tuple[int, str, int]]:
    """(p, v, sign) of the plain files of a ``signed`` change, not netted."""
    assert change.kind == SIGNED and change.delta is not None and change.delta.kind == "signed"
    out = []
    for role, sign in (("+", 1), ("-", -1)):
        part = change.delta.partitions.get(role)
        for f in part.files if part else []:
            rows = pq.read_table(f.removeprefix("file://"))
            out += [(r["p"], r["v"], sign) for r in rows.to_pylist()]
    return sorted(out)


def test_a_copy_on_write_delete_is_a_signed_change(table: Table) -> None:
    table.append(_rows((1, "a"), (1, "b")))
    consumed = _pin(table)
    table.delete("v == 'a'")  # rewrites the file: an overwrite snapshot
    change = base_change(consumed, _pin(table), table)
    assert (change.kind, change.reason, change.delta_rows, change.rows_retracted) == (SIGNED, None, 1, 2)
    # the old file retracted whole, the rewritten one added (netted when read)
    assert _signed_rows(change) == [(1, "a", -1), (1, "b", -1), (1, "b", 1)]
    assert change.files_read == 2 and change.delta is not None
    assert change.delta.since_snapshot_id == consumed.snapshot_id and change.delta.snapshot_id == _sid(table)


def test_deletes_and_overwrites_in_one_range_are_one_signed_change(table: Table) -> None:
    table.append(_rows((1, "a"), (2, "b")))
    consumed = _pin(table)
    table.append(_rows((3, "c")))
    table.delete("p == 2")  # drops a whole file: a delete snapshot
    table.overwrite(_rows((4, "d")))  # delete + append
    change = base_change(consumed, _pin(table), table)
    assert change.kind == SIGNED, change.reason
    assert _signed_rows(change) == [(1, "a", -1), (2, "b", -1), (4, "d", 1)]  # (3, c) came and went


def test_expired_consumed_snapshot(store: IcebergStore, table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    table.append(_rows((1, "b")))
    table.maintenance.expire_snapshots().by_id(consumed.snapshot_id).commit()  # type: ignore[arg-type]
    table = store.load(T)
    change = base_change(consumed, _pin(table), table)
    assert change.reason == f"snapshot {consumed.snapshot_id} of base table 'default.t' was expired"


def test_expired_history_after_the_consumed_snapshot(store: IcebergStore, table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    table.append(_rows((1, "b")))
    middle = _sid(table)
    table.append(_rows((1, "c")))
    table.maintenance.expire_snapshots().by_id(middle).commit()
    table = store.load(T)
    change = base_change(consumed, _pin(table), table)
    history = f"the change history of base table 'default.t' after snapshot {consumed.snapshot_id} was expired"
    assert change.reason == history
    # Java Iceberg keeps the expired parent's id in its child (pyiceberg clears it).
    snapshots = {s.snapshot_id: s for s in table.snapshots()}
    child = snapshots[_sid(table)].model_copy(update={"parent_snapshot_id": middle})
    java = _Snapshots({**snapshots, child.snapshot_id: child})
    assert base_change(consumed, _pin(table), cast(Table, java)).reason == history


def test_expired_history_before_the_current_snapshot_of_a_table_empty_at_consumption(
    store: IcebergStore, table: Table
) -> None:
    consumed = _pin(table)
    table.append(_rows((1, "a")))
    first = _sid(table)
    table.append(_rows((1, "b")))
    table.maintenance.expire_snapshots().by_id(first).commit()
    table = store.load(T)
    change = base_change(consumed, _pin(table), table)
    assert change.reason == f"the change history of base table 'default.t' before snapshot {_sid(table)} was expired"


def test_rollback_is_not_append_only(store: IcebergStore, table: Table) -> None:
    table.append(_rows((1, "a")))
    first = _sid(table)
    table.append(_rows((1, "b")))
    consumed = _pin(table)
    table.manage_snapshots().rollback_to_snapshot(first).commit()
    table = store.load(T)
    rolled_back = base_change(consumed, _pin(table), table)
    assert rolled_back.reason == (
        f"snapshot {consumed.snapshot_id} of base table 'default.t' is not an ancestor of its snapshot {first}"
        " (a rollback or a branch)"
    )
    table.append(_rows((1, "c")))
    after = base_change(consumed, _pin(table), table)
    assert after.reason == (
        f"snapshot {consumed.snapshot_id} of base table 'default.t' is not an ancestor of its snapshot {_sid(table)}"
        " (a rollback or a branch)"
    )


def test_empty_at_consumption_every_file_is_added(table: Table, tmp_path: Path) -> None:
    consumed = _pin(table)
    assert consumed.snapshot_id is None
    assert base_change(consumed, _pin(table), table).kind == UNCHANGED
    table.append(_rows((1, "a")))
    table.append(_rows((2, "b"), (2, "c")))
    current = _pin(table)
    change = base_change(consumed, current, table)
    assert change.kind == APPEND and change.delta is not None
    assert _files(change.delta) == _files(current)
    assert (change.delta_rows, change.delta_bytes) == (3, sum(p.bytes for p in current.partitions.values()))
    compact(table, tmp_path, 2)
    compacted = base_change(consumed, _pin(table), table)
    assert (compacted.kind, compacted.compactions) == (APPEND, 1)
    assert compacted.delta is not None and _files(compacted.delta) == _files(current)


def test_empty_at_consumption_then_delete_adds_what_is_left(table: Table) -> None:
    consumed = _pin(table)
    table.append(_rows((1, "a"), (2, "b")))
    table.delete("p == 1")
    change = base_change(consumed, _pin(table), table)
    assert _signed_rows(change) == [(2, "b", 1)]


def test_schema_change_is_not_append_only(table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    with table.update_schema() as update:
        update.add_column("w", StringType())
    change = base_change(consumed, _pin(table), table)
    assert change.reason == f"schema of base table 'default.t' changed since snapshot {consumed.snapshot_id}"


def test_partition_columns_change_is_not_append_only(table: Table) -> None:
    table.append(_rows((1, "a")))
    consumed = _pin(table)
    current = dataclasses.replace(consumed, partition_columns=["v"])
    change = base_change(consumed, current, table)
    assert change.reason == (
        f"partition columns of base table 'default.t' changed since snapshot {consumed.snapshot_id}: (p) -> (v)"
    )


def test_iceberg_needs_its_table(table: Table) -> None:
    pinned = _pin(table)
    with pytest.raises(ValueError, match=r"base table .default\.t. is an Iceberg table: its loaded table is needed"):
        base_change(pinned, pinned, None)


# -- Parquet -------------------------------------------------------------------------------------

SPARK_SCHEMA = (
    '{"type": "struct", "fields": [{"name": "v", "type": "string", "nullable": true, "metadata": {}},'
    ' {"name": "p", "type": "long", "nullable": true, "metadata": {}}]}'
)


def _write(root: Path, rel: str, *values: str) -> str:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"v": list(values)}), path)
    return str(path)


def _pin_dir(root: Path, columns: list[str] | None = None) -> PinnedTable:
    return parquet.pin("default.e", str(root), SPARK_SCHEMA, ["p"] if columns is None else columns)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    out = tmp_path / "ext"
    _write(out, "p=1/part-0.parquet", "a")
    _write(out, "p=2/part-0.parquet", "b")
    return out


def test_parquet_pin_keeps_file_stats_and_round_trips(root: Path) -> None:
    pinned = _pin_dir(root)
    part = pinned.partitions["p=1"]
    st = os.stat(part.files[0])
    assert part.file_stats == [[st.st_size, st.st_mtime_ns]]
    assert PinnedTable.from_json(pinned.to_json()) == pinned
    old = pinned.to_json()
    for p in old["partitions"].values():
        del p["file_stats"]
    assert PinnedTable.from_json(old).partitions["p=1"].file_stats is None


def test_parquet_unchanged(root: Path) -> None:
    consumed = _pin_dir(root)
    assert base_change(consumed, _pin_dir(root), None).kind == UNCHANGED


def test_parquet_added_file_and_partition(root: Path) -> None:
    consumed = _pin_dir(root)
    new1 = _write(root, "p=1/part-1.parquet", "c")
    new3 = _write(root, "p=3/part-0.parquet", "d", "e")
    current = _pin_dir(root)
    change = base_change(consumed, current, None)
    assert (change.kind, change.reason, change.old, change.delta_rows) == (APPEND, None, consumed, None)
    assert change.delta is not None
    assert _files(change.delta) == {"p=1": [new1], "p=3": [new3]}
    size1, size3 = os.stat(new1).st_size, os.stat(new3).st_size
    assert change.delta.partitions["p=1"] == PinnedPartition(
        [new1],
        current.partitions["p=1"].version,
        current.partitions["p=1"].changed_at,
        size1,
        None,
        [[size1, os.stat(new1).st_mtime_ns]],
    )
    assert change.delta.partitions["p=3"] == current.partitions["p=3"]
    assert change.delta_bytes == size1 + size3 == delta_bytes_total([change, base_change(current, current, None)])
    assert (change.delta.location, change.delta.kind) == (str(root), "parquet")


def test_parquet_unpartitioned_added_file(tmp_path: Path) -> None:
    _write(tmp_path, "part-0.parquet", "a")
    consumed = _pin_dir(tmp_path, [])
    new = _write(tmp_path, "part-1.parquet", "b")
    change = base_change(consumed, _pin_dir(tmp_path, []), None)
    assert change.delta is not None and _files(change.delta) == {"": [new]}
    os.remove(new)
    os.remove(tmp_path / "part-0.parquet")
    gone = base_change(consumed, _pin_dir(tmp_path, []), None)
    assert gone.reason == "file 'part-0.parquet' of base table 'default.e' was removed"


def test_parquet_modified_file(root: Path) -> None:
    consumed = _pin_dir(root)
    path = root / "p=1" / "part-0.parquet"
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same bytes, rewritten later
    change = base_change(consumed, _pin_dir(root), None)
    assert (change.kind, change.delta) == (NOT_APPEND_ONLY, None)
    assert change.reason == "file 'part-0.parquet' of base table 'default.e' partition p=1 was modified"


def test_parquet_removed_file(root: Path) -> None:
    _write(root, "p=1/part-1.parquet", "c")
    consumed = _pin_dir(root)
    os.remove(root / "p=1" / "part-0.parquet")
    _write(root, "p=1/part-2.parquet", "d")
    change = base_change(consumed, _pin_dir(root), None)
    assert change.reason == "file 'part-0.parquet' of base table 'default.e' partition p=1 was removed"


def test_parquet_removed_partition(root: Path) -> None:
    consumed = _pin_dir(root)
    os.remove(root / "p=2" / "part-0.parquet")
    change = base_change(consumed, _pin_dir(root), None)
    assert change.reason == "partition p=2 of base table 'default.e' was removed"


def test_parquet_old_position_without_file_stats(root: Path) -> None:
    data: dict[str, Any] = _pin_dir(root).to_json()
    for p in data["partitions"].values():
        del p["file_stats"]
    consumed = PinnedTable.from_json(data)
    assert base_change(consumed, _pin_dir(root), None).kind == UNCHANGED  # same versions: no listing needed
    _write(root, "p=2/part-1.parquet", "c")
    change = base_change(consumed, _pin_dir(root), None)
    assert change.reason == "no file listing stored for base table 'default.e' partition p=2 at the consumed position"


def test_parquet_schema_change(root: Path) -> None:
    consumed = _pin_dir(root)
    current = dataclasses.replace(_pin_dir(root), schema_json=SPARK_SCHEMA.replace('"string"', '"binary"'))
    change = base_change(consumed, current, None)
    assert change.reason == "schema of base table 'default.e' changed since it was consumed"


def test_position_deletes_retract_the_rows_at_their_positions(table: Table) -> None:
    import dataclasses

    import pyarrow.compute as pc

    from sparkmv.demo.iceberg_deletes import delete_rows
    from sparkmv.sources import signed

    table.append(_rows((1, "a"), (1, "b"), (1, "c")))
    table.append(_rows((2, "d")))
    consumed = _pin(table)
    assert delete_rows(table, lambda t: pc.equal(t.column("v"), "b")) == 1
    first = dataclasses.replace(consumed, snapshot_id=_sid(table))  # pinning refuses delete files
    change = signed.signed_change(consumed, first, table)
    assert change.delta is not None and set(change.delta.partitions) == {signed.REPOSITIONED}
    assert (change.rows_added, change.rows_retracted, change.files_read) == (0, 1, 1)
    rows = signed._netted_in_arrow(change.delta, table, ["p", "v"]).to_pylist()
    assert rows == [{"p": 1, "v": "b", "__smv_sign": -1}]
    # more deletes of the same file: only the positions deleted since are retracted
    delete_rows(table, lambda t: pc.is_in(t.column("v"), pa.array(["a", "d"])))
    later = signed.signed_change(first, dataclasses.replace(first, snapshot_id=_sid(table)), table)
    assert later.delta is not None
    rows = signed._netted_in_arrow(later.delta, table, ["p", "v"]).to_pylist()
    assert sorted((r["v"], r["__smv_sign"]) for r in rows) == [("a", -1), ("d", -1)]


def test_a_small_signed_change_is_netted_in_arrow_with_repeated_rows(table: Table) -> None:
    from sparkmv.sources import signed

    table.append(_rows((1, "a"), (1, "b"), (1, "b"), (1, "c")))
    consumed = _pin(table)
    table.overwrite(_rows((1, "b"), (1, "d")), overwrite_filter="v == 'b' or v == 'a'")  # rewrites the file
    change = base_change(consumed, _pin(table), table)
    assert change.delta is not None and change.rows_retracted == 4
    netted = signed._netted_in_arrow(change.delta, table, ["p", "v"])
    assert netted is not None
    # the rewrite retracted 4 rows and added 4; what is left: one of the two b's, a, and d
    assert sorted((r["v"], r["__smv_sign"]) for r in netted.to_pylist()) == [("a", -1), ("b", -1), ("d", 1)]


@pytest.mark.spark
def test_a_copy_on_write_change_above_the_netting_size_is_netted_a_partition_at_a_time(
    spark, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each partition's old and new files fit the Arrow netting size though the whole change
    does not: the change is netted per partition on the driver (no Spark netting), and a
    partition over the size sends the whole change to Spark, with the same rows."""
    from sparkmv.sources import signed

    table.append(_rows((1, "a"), (1, "b"), (1, "b"), (2, "c"), (2, "d"), (3, "e")))
    consumed = _pin(table)
    table.delete("v == 'a' or v == 'd'")  # copy-on-write: rewrites the files of p=1 and p=2
    table.append(_rows((3, "f")))
    change = base_change(consumed, _pin(table), table)
    assert change.delta is not None
    parts = change.delta.partitions
    assert set(parts) == {signed.ADDED, signed.REMOVED} and len(parts[signed.REMOVED].files) == 2
    largest = max(s for p in parts.values() for s in _file_sizes(p.files))
    monkeypatch.setattr(signed, "ARROW_NETTING_BYTES", 2 * largest)  # a partition's two files
    assert sum(p.bytes for p in parts.values()) > signed.ARROW_NETTING_BYTES

    def no_spark_netting(*args: object) -> None:
        raise AssertionError("netted by Spark")

    expected = [(1, "a", -1), (2, "d", -1), (3, "f", 1)]
    with monkeypatch.context() as m:
        m.setattr(signed, "netted", no_spark_netting)
        rows = signed.read(spark, change.delta, lambda: table)
        assert sorted((r["p"], r["v"], r["__smv_sign"]) for r in rows.collect()) == expected
    monkeypatch.setattr(signed, "ARROW_NETTING_BYTES", largest - 1)
    assert signed._netted_in_arrow(change.delta, table, ["p", "v"]) is None
    rows = signed.read(spark, change.delta, lambda: table)
    assert sorted((r["p"], r["v"], r["__smv_sign"]) for r in rows.collect()) == expected


@pytest.mark.spark
def test_a_large_merge_on_read_change_is_read_by_spark_as_the_arrow_reader_reads_it(
    spark, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the Arrow netting size the rows at deleted positions are read by Spark scans
    joined with the positions: the same signed rows as pyiceberg's reader gives."""
    import dataclasses

    import pyarrow.compute as pc

    from sparkmv.demo.iceberg_deletes import delete_rows
    from sparkmv.sources import signed

    table.append(_rows((1, "a"), (1, "b"), (1, "c")))
    table.append(_rows((2, "d"), (2, "e")))
    consumed = _pin(table)
    delete_rows(table, lambda t: pc.is_in(t.column("v"), pa.array(["b", "d"])), per_partition=True)
    table.append(_rows((3, "f"), (3, "g")))
    delete_rows(table, lambda t: pc.equal(t.column("v"), "g"))  # a file added since, with deletes
    change = signed.signed_change(consumed, dataclasses.replace(consumed, snapshot_id=_sid(table)), table)
    assert change.delta is not None
    assert set(change.delta.partitions) == {signed.REPOSITIONED, signed.ADDED_DELETES}
    expected = sorted(
        (r["p"], r["v"], r["__smv_sign"]) for r in signed._netted_in_arrow(change.delta, table, ["p", "v"]).to_pylist()
    )
    assert expected == [(1, "b", -1), (2, "d", -1), (3, "f", 1)]
    monkeypatch.setattr(signed, "ARROW_NETTING_BYTES", 0)
    monkeypatch.setattr(signed, "ARROW_REPOSITIONED_BYTES", 0)
    rows = signed.read(spark, change.delta, lambda: table)
    assert sorted((r["p"], r["v"], r["__smv_sign"]) for r in rows.collect()) == expected


@pytest.mark.spark
def test_rows_at_deleted_positions_are_read_on_the_driver_above_the_netting_size(
    spark, table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept files with new position deletes are read in Arrow up to ARROW_REPOSITIONED_BYTES
    however large the netting size says they are: only their deleted rows stay in memory."""
    import dataclasses

    import pyarrow.compute as pc

    from sparkmv.demo.iceberg_deletes import delete_rows
    from sparkmv.sources import signed
    from sparkmv.storage import position_deletes

    table.append(_rows((1, "a"), (1, "b"), (1, "c")))
    table.append(_rows((2, "d"), (2, "e")))
    consumed = _pin(table)
    delete_rows(table, lambda t: pc.is_in(t.column("v"), pa.array(["a", "c", "e"])), per_partition=True)
    change = signed.signed_change(consumed, dataclasses.replace(consumed, snapshot_id=_sid(table)), table)
    assert change.delta is not None and set(change.delta.partitions) == {signed.REPOSITIONED}
    monkeypatch.setattr(signed, "ARROW_NETTING_BYTES", 0)

    def no_spark_scan(*args: object) -> None:
        raise AssertionError("read by a Spark scan")

    monkeypatch.setattr(position_deletes, "read_at", no_spark_scan)
    rows = signed.read(spark, change.delta, lambda: table)
    assert sorted((r["p"], r["v"], r["__smv_sign"]) for r in rows.collect()) == [
        (1, "a", -1),
        (1, "c", -1),
        (2, "e", -1),
    ]
    assert not signed.in_arrow_on_the_driver(
        {signed.REPOSITIONED: dataclasses.replace(change.delta.partitions[signed.REPOSITIONED], bytes=2**31)}
    )


def _overwrite_adding(table: Table, tmp_path: Path, rows: pa.Table) -> None:
    """An ``overwrite`` snapshot that removes nothing and adds one file (as a writer's
    dynamic overwrite of a new partition commits it)."""
    from pyiceberg.table import _parquet_files_to_data_files

    path = str(tmp_path / f"added-{len(table.snapshots())}.parquet")
    pq.write_table(rows, path)
    with table.transaction() as tx:
        mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
        tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        with _OverwriteFiles(Operation.OVERWRITE, tx, table.io) as overwrite:
            for f in _parquet_files_to_data_files(tx.table_metadata, [path], table.io):
                overwrite.append_data_file(f)


def test_an_overwrite_that_only_adds_files_is_an_append(table: Table, tmp_path: Path) -> None:
    table.append(_rows((1, "a"), (2, "b")))
    before = _pin(table)
    _overwrite_adding(table, tmp_path, _rows((3, "c"), (3, "d")))
    table.refresh()
    assert table.current_snapshot().summary.operation == Operation.OVERWRITE  # type: ignore[union-attr]
    after = _pin(table)
    change = base_change(before, after, table)
    assert (change.kind, change.delta_rows) == (APPEND, 2), change
    assert _files(change.delta) == _added(before, after)  # type: ignore[arg-type]
    # One that also removed a file stays a signed change.
    table.delete("p = 1")
    change = base_change(after, _pin(table), table)
    assert change.kind == SIGNED, change
