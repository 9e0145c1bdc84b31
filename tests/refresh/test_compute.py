"""Computing a chunk: a small chunk collected through Arrow and written with pyarrow, a
large one written by Spark, and a small one whose result exceeds the row cap computed
again by Spark all store the same rows, one file per MV partition value (NULL included)
with the partition column inside, typed exactly as the MV's Iceberg table."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.names import ObjectName
from sparkmv.refresh import compute
from sparkmv.storage.iceberg import IcebergStore
from tests.helpers import assert_mv_matches

pytestmark = pytest.mark.spark

UTC = dt.UTC
QUERY = (
    "SELECT d, p, ts, CAST(ts AS TIMESTAMP_NTZ) AS ntz, amount, amount * 3 AS tripled, upper(name) AS name FROM sales"
)
SCHEMA = pa.schema(
    [
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(12, 3)),
        ("name", pa.string()),
    ]
)


def _write(root: Path, p: str, rows: list[tuple[Any, ...]]) -> None:
    directory = root / f"p={p}"
    directory.mkdir(parents=True, exist_ok=True)
    columns = list(zip(*rows, strict=True))
    pq.write_table(
        pa.table([pa.array(c, f.type) for c, f in zip(columns, SCHEMA, strict=True)], SCHEMA), directory / "f.parquet"
    )


def _sales(root: Path) -> None:
    ts = dt.datetime(2024, 3, 1, 12, 30, 45, 123456, tzinfo=UTC)
    _write(
        root,
        "a",
        [
            (dt.date(2024, 3, 1), ts, Decimal("1.125"), "x"),
            (dt.date(2024, 3, 2), ts + dt.timedelta(microseconds=1), Decimal("-99999.999"), None),
            (None, None, None, "n"),
        ],
    )
    _write(root, "b", [(dt.date(2024, 3, 2), ts, Decimal("0.001"), "y"), (dt.date(2024, 3, 1), ts, Decimal("7"), "z")])


@pytest.mark.parametrize("path", ["arrow", "spark", "row cap exceeded"])
def test_every_path_stores_the_query_rows_typed_as_the_table(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "spark":
        monkeypatch.setattr(compute, "SMALL_CHUNK_BYTES", -1)
    elif path == "row cap exceeded":
        monkeypatch.setattr(compute, "SMALL_CHUNK_ROWS", 2)
    used: list[str] = []
    for name in ("write_arrow_staged", "write_staged"):
        real = getattr(compute, name)
        monkeypatch.setattr(compute, name, lambda *a, _real=real, _name=name, **k: used.append(_name) or _real(*a, **k))
    root = tmp_path / "sales"
    _sales(root)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{root}'")
    client.sql(f"CREATE MATERIALIZED VIEW m PARTITION BY d AS {QUERY}")
    assert used == (["write_arrow_staged"] if path == "arrow" else ["write_staged"])
    assert_mv_matches(client, "m", QUERY)

    table = client.runtime.iceberg.load(ObjectName.parse("m"))
    files = IcebergStore.data_files(table)
    assert sorted((f.partition or "", f.record_count) for f in files) == [("", 1), ("2024-03-01", 2), ("2024-03-02", 2)]
    # pyiceberg's Arrow schema has large strings; Parquet does not tell them apart.
    expected = {f.name: pa.string() if f.type == pa.large_string() else f.type for f in table.schema().as_arrow()}
    for f in files:
        local = f.path.removeprefix("file://")
        stored = pq.read_table(local)
        assert {c.name: c.type for c in stored.schema} == expected, path
        assert set(stored.column("d").to_pylist()) == {
            None if f.partition is None else dt.date.fromisoformat(f.partition)
        }
    assert expected["ts"] == pa.timestamp("us", tz="UTC") and expected["ntz"] == pa.timestamp("us")
    assert expected["tripled"] == pa.decimal128(14, 3)
    rows = {r["name"]: r for r in client.table("m").collect()}
    assert rows["Y"]["tripled"] == Decimal("0.003") and rows[None]["amount"] == Decimal("-99999.999")
    assert rows["X"]["ntz"] == dt.datetime(2024, 3, 1, 12, 30, 45, 123456)
    assert not list(Path(table.location().removeprefix("file://")).rglob("*.tmp"))


def test_input_bytes_counts_the_partitions_a_chunk_reads(client: Any, tmp_path: Path) -> None:
    from sparkmv.refresh.context import pin_all

    root = tmp_path / "sales"
    _sales(root)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{root}'")
    [pinned] = pin_all(client.runtime.catalog, client.runtime.iceberg, [ObjectName.parse("sales")]).values()
    sizes = {key: (root / key / "f.parquet").stat().st_size for key in ("p=a", "p=b")}
    assert compute.input_bytes({"default.sales": pinned}, {}) == sum(sizes.values())
    assert compute.input_bytes({"default.sales": pinned}, {"default.sales": {"p=b"}}) == sizes["p=b"]
