"""Staged files written with pyarrow from rows collected to the driver: one file per
partition value with the partition column inside, cast exactly to the table's types,
never a partial ``.parquet`` file."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.storage.files import collect_staged, write_arrow_staged

SCHEMA = pa.schema(
    [
        ("m", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("us")),
    ]
)
TS = dt.datetime(2024, 1, 2, 3, 4, 5, 678901)


def _rows(values: list[str | None]) -> pa.Table:
    n = len(values)
    return pa.table(
        {
            "ntz": pa.array([TS] * n, pa.timestamp("us")),
            "m": pa.array(values, pa.string()),
            "amount": pa.array([Decimal("12345678.91")] * n, pa.decimal128(10, 2)),
            # A zone other than UTC: the same instants, stored as UTC.
            "ts": pa.array([TS] * n, pa.timestamp("us"))
            .cast(pa.timestamp("us", tz="UTC"))
            .cast(pa.timestamp("us", tz="Europe/Paris")),
        }
    )


def test_one_file_per_partition_value_with_the_column_inside(tmp_path: Path) -> None:
    staged = write_arrow_staged(_rows(["a", None, "b", "a"]), tmp_path / "s", "m", SCHEMA)
    assert staged.rows == 4 and len(staged.files) == 3
    assert staged.bytes == sum(Path(f.removeprefix("file://")).stat().st_size for f in staged.files)
    assert collect_staged(tmp_path / "s") == staged
    contents = sorted(
        (pq.read_table(f.removeprefix("file://")).column("m").to_pylist() for f in staged.files),
        key=lambda v: (v[0] is not None, v[0] or ""),
    )
    assert contents == [[None], ["a", "a"], ["b"]]
    assert not [p for p in (tmp_path / "s").iterdir() if not p.name.endswith(".parquet")]


def test_columns_are_cast_to_the_table_schema(tmp_path: Path) -> None:
    staged = write_arrow_staged(_rows(["a"]), tmp_path / "s", "m", SCHEMA)
    [path] = [f.removeprefix("file://") for f in staged.files]
    table = pq.read_table(path)
    assert table.schema.names == SCHEMA.names
    assert [f.type for f in table.schema] == [f.type for f in SCHEMA]
    row = table.to_pylist()[0]
    assert row["amount"] == Decimal("12345678.91") and row["ntz"] == TS
    assert row["ts"] == TS.replace(tzinfo=dt.UTC)
    # Decimals stored as integers where the precision allows, as Spark writes them.
    assert pq.ParquetFile(path).schema.column(1).physical_type == "INT64"


def test_no_rows_no_file_and_the_directory_is_replaced(tmp_path: Path) -> None:
    write_arrow_staged(_rows(["a", "b"]), tmp_path / "s", "m", SCHEMA)
    staged = write_arrow_staged(_rows([]), tmp_path / "s", "m", SCHEMA)
    assert (staged.files, staged.rows, staged.bytes) == ([], 0, 0)
    assert list((tmp_path / "s").iterdir()) == []
    whole = write_arrow_staged(_rows(["a", "b"]), tmp_path / "u", None, SCHEMA)
    assert (len(whole.files), whole.rows) == (1, 2)


def test_a_value_the_table_type_cannot_hold_fails_without_a_file(tmp_path: Path) -> None:
    narrow = pa.schema([*list(SCHEMA)[:1], ("amount", pa.decimal128(5, 2)), *list(SCHEMA)[2:]])
    with pytest.raises(pa.ArrowInvalid, match=r"^Decimal value does not fit in precision 5$"):
        write_arrow_staged(_rows(["a"]), tmp_path / "s", "m", narrow)
    assert not list((tmp_path / "s").rglob("*.parquet"))
