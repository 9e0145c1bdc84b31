"""Test helpers: hand-made partitioned Parquet data and MV-vs-query comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_partition(
    root: Path, column: str, value: str, rows: dict[str, list[Any]], file: str = "part-0.parquet"
) -> Path:
    """Write one Parquet file into ``root/column=value/`` (an outside writer)."""
    directory = root / f"{column}={value}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file
    pq.write_table(pa.table(rows), path)
    return path


def rows_of(df: Any, order: list[str] | None = None) -> list[tuple[Any, ...]]:
    """Rows of a DataFrame as sorted tuples (for exact comparison)."""
    return sorted((tuple(r) for r in df.collect()), key=lambda r: tuple((v is None, str(v)) for v in r))


def assert_mv_matches(client: Any, mv: str, query: str) -> None:
    """The MV holds exactly what its defining query returns now (over the base tables:
    never through query rewrite)."""
    from sparkmv.client.queries import run_query

    table = client.table(mv)
    expected = run_query(client.runtime, query).select(*table.columns)
    assert rows_of(table) == rows_of(expected)
