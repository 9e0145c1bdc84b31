"""The warehouse I/O module on a local directory and on fsspec's ``memory://`` filesystem
(the stand-in for an object store: no directories, URLs instead of paths)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from sparkmv.storage import warehouse
from sparkmv.storage.files import collect_staged, remove_unreferenced, write_arrow_staged

SCHEMA = pa.schema([("m", pa.string()), ("v", pa.int64())])


@pytest.fixture(params=["local", "memory"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty warehouse root: a local directory, or a fresh ``memory://`` prefix."""
    if request.param == "local":
        yield str(tmp_path / "wh")
        return
    base = f"memory://wh-{uuid.uuid4().hex}"
    yield base
    warehouse.remove_tree(base)


def _write(location: str, data: bytes) -> None:
    with warehouse.open_output(location) as fh:
        fh.write(data)


def test_paths_join_and_normalize() -> None:
    assert warehouse.normalize("file:///wh//ns.db/t/") == "/wh/ns.db/t"
    assert warehouse.normalize(Path("/wh/t")) == "/wh/t"
    assert warehouse.join("file:///wh/ns.db/t", "data", "run-7") == "/wh/ns.db/t/data/run-7"
    assert warehouse.join("s3://bucket/wh/t/", "data", "run-7") == "s3://bucket/wh/t/data/run-7"
    assert warehouse.join("memory://", "a") == "memory://a"
    assert warehouse.parent("s3://bucket/t/data/f.parquet") == "s3://bucket/t/data"
    assert warehouse.name("/wh/t/data/run-7/") == "run-7"
    assert warehouse.is_within("/wh/t/data/run-7/a/f", "/wh/t/data/run-7")
    assert not warehouse.is_within("/wh/t/data/run-70", "/wh/t/data/run-7")


def test_uris_for_iceberg_and_spark() -> None:
    assert warehouse.file_uri("/wh/t/f 1.parquet") == "file:///wh/t/f 1.parquet"  # unencoded
    assert warehouse.file_uri("s3://b/t/f.parquet") == "s3://b/t/f.parquet"
    assert warehouse.catalog_uri("/wh dir") == "file:///wh%20dir"  # as Path.as_uri
    assert warehouse.catalog_uri("s3://b/wh/") == "s3://b/wh"
    assert warehouse.spark_path("s3://b/t/data") == "s3a://b/t/data"
    assert warehouse.spark_path("/wh/t/data") == "/wh/t/data"
    assert warehouse.spark_path("file:///wh/t/f.parquet") == "file:///wh/t/f.parquet"
    assert warehouse.absolute("rel/x") == os.getcwd() + "/rel/x"


def test_write_list_stat_remove(root: str) -> None:
    _write(warehouse.join(root, "k=1", "b.parquet"), b"PAR1bb")
    _write(warehouse.join(root, "k=1", "a.parquet"), b"PAR1a")
    _write(warehouse.join(root, "k=2", "c.parquet"), b"PAR1ccc")
    _write(warehouse.join(root, "_SUCCESS"), b"")

    assert warehouse.is_dir(root) and warehouse.exists(warehouse.join(root, "k=1"))
    assert warehouse.is_file(warehouse.join(root, "_SUCCESS"))
    assert [(e.name, e.is_dir) for e in warehouse.list_dir(root)] == [("_SUCCESS", False), ("k=1", True), ("k=2", True)]
    assert warehouse.list_dir(warehouse.join(root, "missing")) == []
    assert warehouse.list_dir(warehouse.join(root, "_SUCCESS")) == []  # a file is not a directory

    files = warehouse.list_files(root)
    assert [f.path for f in files] == [
        warehouse.join(root, "_SUCCESS"),
        warehouse.join(root, "k=1", "a.parquet"),
        warehouse.join(root, "k=1", "b.parquet"),
        warehouse.join(root, "k=2", "c.parquet"),
    ]
    assert [f.size for f in files] == [0, 5, 6, 7]
    assert all(f.mtime_ns > 1_600_000_000 * 10**9 for f in files)
    assert warehouse.list_files(root, keep=lambda n: not n.startswith("_") and n != "k=2") == files[1:3]
    walked = [(parts, dirs, [f.name for f in fs]) for parts, dirs, fs in warehouse.walk(root)]
    assert walked == [
        ([], ["k=1", "k=2"], ["_SUCCESS"]),
        (["k=1"], [], ["a.parquet", "b.parquet"]),
        (["k=2"], [], ["c.parquet"]),
    ]

    with warehouse.open_input(warehouse.join(root, "k=2", "c.parquet")) as fh:
        assert fh.read() == b"PAR1ccc"
    warehouse.rename(warehouse.join(root, "k=2", "c.parquet"), warehouse.join(root, "k=2", "d.parquet"))
    assert [f.name for f in warehouse.list_files(warehouse.join(root, "k=2"))] == ["d.parquet"]

    warehouse.remove_file(warehouse.join(root, "_SUCCESS"))
    warehouse.remove_file(warehouse.join(root, "_SUCCESS"))  # missing: nothing
    warehouse.remove_tree(warehouse.join(root, "k=1"))
    warehouse.remove_tree(warehouse.join(root, "k=1"))  # missing: nothing
    assert [e.name for e in warehouse.list_dir(root)] == ["k=2"]
    assert not warehouse.remove_empty_dir(root)
    warehouse.remove_file(warehouse.join(root, "k=2", "d.parquet"))
    assert warehouse.remove_empty_dir(warehouse.join(root, "k=2"))
    assert warehouse.list_dir(root) == []


def test_stat_missing_raises(root: str) -> None:
    with pytest.raises(FileNotFoundError):
        warehouse.stat(warehouse.join(root, "nothing.parquet"))


def test_local_listing_keeps_stat_values(tmp_path: Path) -> None:
    """Stored listings of local files are ``os.stat`` values, nanoseconds included."""
    path = tmp_path / "p" / "f.parquet"
    path.parent.mkdir()
    path.write_bytes(b"PAR1")
    os.utime(path, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    [info] = warehouse.list_files(str(tmp_path))
    assert (info.path, info.size, info.mtime_ns) == (str(path), 4, 1_700_000_000_123_456_789)
    assert warehouse.stat("file://" + str(path)) == info


def test_local_symlinked_directory_is_listed_not_entered(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f").write_bytes(b"x")
    (tmp_path / "top").mkdir()
    (tmp_path / "top" / "link").symlink_to(tmp_path / "real")
    assert [(e.name, e.is_dir) for e in warehouse.list_dir(str(tmp_path / "top"))] == [("link", True)]
    assert list(warehouse.walk(str(tmp_path / "top"))) == [([], ["link"], [])]  # as os.walk


def test_staged_parquet_round_trip(root: str) -> None:
    """Staged files written with pyarrow, collected, and unreferenced attempts removed,
    on either filesystem."""
    rows = pa.table({"m": ["a", "b", "a"], "v": [1, 2, 3]})
    staged = write_arrow_staged(rows, warehouse.join(root, "run-1", "chunk-0-a1"), "m", SCHEMA)
    assert staged.rows == 3 and len(staged.files) == 2
    assert collect_staged(warehouse.join(root, "run-1", "chunk-0-a1")) == staged
    other = write_arrow_staged(rows, warehouse.join(root, "run-1", "chunk-0-a2"), None, SCHEMA)
    if root.startswith("memory://"):
        assert all(f.startswith("memory://") for f in staged.files)
    else:
        assert all(f.startswith("file:///") for f in staged.files)
    attempts = [e.path for e in warehouse.list_dir(warehouse.join(root, "run-1"))]
    removed = remove_unreferenced(attempts, other.files)
    assert removed == [warehouse.join(root, "run-1", "chunk-0-a1")]
    assert [e.name for e in warehouse.list_dir(warehouse.join(root, "run-1"))] == ["chunk-0-a2"]
    assert warehouse.parquet_metadata(other.files[0]).num_rows == 3
    assert warehouse.read_parquet(other.files[0]).column("v").to_pylist() == [1, 2, 3]
