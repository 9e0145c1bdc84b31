"""Small writers for the corpus' input generators (``corpus/<project>/gen.py``): Parquet, JSON
lines and CSV files from column lists, and seeded value pickers with NULLs."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any


def parquet(path: Path, columns: dict[str, list[Any]], types: dict[str, str] | None = None) -> None:
    """One Parquet file with ``columns`` (name -> values); ``types`` names pyarrow types
    (``int64``, ``string``, ``float64``, ``date32``) where inference would guess wrong (all NULL)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = types or {}
    arrays = {n: pa.array(v, type=getattr(pa, types[n])() if n in types else None) for n, v in columns.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays), path)


def json_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    """One file of JSON lines (a NULL value is written as ``null``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))


def csv_file(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    """One CSV file with a header line (a NULL value is an empty field)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(header)
        out.writerows([["" if v is None else v for v in r] for r in rows])


def maybe(rnd: random.Random, value: Any, null_share: float = 0.15) -> Any:
    """``value``, or None with probability ``null_share``."""
    return None if rnd.random() < null_share else value
