"""Which files of a base table a semi-join reduced delta term reads
(:func:`~sparkmv.refresh.incremental.pruned.files_within`), on a real pyiceberg table: only
those whose manifest bounds overlap the delta's key range; a partition with delete files
kept whole; the table as pinned whenever the manifests do not list exactly its files."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from sparkmv.refresh.incremental.pruned import files_within
from sparkmv.sources.iceberg import pin
from sparkmv.sources.pinned import PinnedTable


def _table(tmp_path: Path) -> Any:
    """Three files of ``k``: 0..99, 100..199, 1000..1009 (one append each)."""
    cat = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "w").as_uri())
    cat.create_namespace("d")
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    table = cat.create_table(("d", "facts"), schema=schema)
    for lo, hi in ((0, 100), (100, 200), (1000, 1010)):
        table.append(pa.table({"k": pa.array(range(lo, hi), pa.int64()), "v": [str(k) for k in range(lo, hi)]}))
    return table


def _files(pinned: PinnedTable) -> list[str]:
    return sorted(f for p in pinned.partitions.values() for f in p.files)


def test_only_the_files_whose_bounds_overlap_the_range_are_read(tmp_path: Path) -> None:
    table = _table(tmp_path)
    pinned = pin("d.facts", table)
    every = _files(pinned)
    assert len(every) == 3
    load = lambda p: table  # noqa: E731
    within = files_within(load, pinned, [("k", (1000, 1005))])
    assert len(_files(within)) == 1 and _files(within)[0] in every
    assert len(_files(files_within(load, pinned, [("k", (150, 1005))]))) == 2
    assert _files(files_within(load, pinned, [("k", (500, 600))])) == []
    # Nothing to prune by: a FALSE filter (no key) or no integer column; as pinned.
    assert files_within(load, pinned, [("k", ())]) is pinned
    assert files_within(load, pinned, []) is pinned


def test_a_partition_with_delete_files_is_kept_whole(tmp_path: Path) -> None:
    table = _table(tmp_path)
    pinned = pin("d.facts", table)
    parts = {k: dataclasses.replace(p, delete_files=1) for k, p in pinned.partitions.items()}
    with_deletes = dataclasses.replace(pinned, partitions=parts)
    assert _files(files_within(lambda p: table, with_deletes, [("k", (1000, 1005))])) == _files(pinned)


def test_files_listed_otherwise_than_the_manifests_leave_the_table_as_pinned(tmp_path: Path) -> None:
    table = _table(tmp_path)
    pinned = pin("d.facts", table)
    respelled = {
        k: dataclasses.replace(p, files=[f.replace("file://", "file:") for f in p.files])
        for k, p in pinned.partitions.items()
    }
    other = dataclasses.replace(pinned, partitions=respelled)
    assert files_within(lambda p: table, other, [("k", (1000, 1005))]) is other
    assert files_within(lambda p: None, pinned, [("k", (1000, 1006))]) is pinned  # not Iceberg
