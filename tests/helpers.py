"""Test helpers: hand-made partitioned Parquet data and MV-vs-query comparison
(:func:`assert_mv_matches`, the DuckDB oracle of :mod:`tests.oracle`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.oracle import assert_mv_matches

__all__ = ["assert_mv_matches", "rows_of", "write_partition"]


def write_partition(
    root: Path, column: str, value: str, rows: dict[str, list[Any]], file: str = "part-0.parquet"
) -> Path:
    """Write one Parquet file into ``root/column=value/`` (an outside writer)."""
    directory = root / f"{column}={value}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file
    pq.write_table(pa.table(rows), path)
    return path


def monthly_sales(root: Path, months: int, per_month: int, amount: Any = lambda i: float(i % 7)) -> Path:
    """A ``sales`` directory partitioned by ``m`` (``2024-01``, ...): ``per_month`` rows
    per month with ``id`` (``100 * k`` upward in month ``k``) and ``amount`` (of the id)."""
    for k in range(months):
        ids = list(range(k * 100, k * 100 + per_month))
        write_partition(root, "m", f"2024-{k + 1:02d}", {"id": ids, "amount": [amount(i) for i in ids]})
    return root


def rows_of(df: Any, order: list[str] | None = None) -> list[tuple[Any, ...]]:
    """Rows of a DataFrame as sorted tuples (for exact comparison)."""
    return sorted((tuple(r) for r in df.collect()), key=lambda r: tuple((v is None, str(v)) for v in r))


def import_probe(modules: tuple[str, ...]) -> str:
    """A Python script (for ``python -c``) that runs the ``sparkmv`` entry point with its own
    arguments, then prints ``{"code": <exit code>, "heavy": [<which of modules were imported>]}``
    as JSON on the real stderr."""
    return f"""
import json, sys
from sparkmv.cli.main import main
sys.argv = ["sparkmv", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code or 0
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {set(modules)!r})
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.__stderr__)
"""
