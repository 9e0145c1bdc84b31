"""Fixtures of the scheduler tests: a base Parquet table written by an "outside writer"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_partition


def add_rows(root: Path, day: str, keys: list[int], values: list[int], file: str) -> None:
    """An outside writer adds one Parquet file to partition ``d=day`` of ``root``."""
    write_partition(root, "d", day, {"k": keys, "v": values}, file=file)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A Parquet table partitioned by ``d`` with two partitions."""
    root = tmp_path / "data" / "t"
    add_rows(root, "2026-01-01", [1, 2], [10, 20], "a.parquet")
    add_rows(root, "2026-01-02", [3], [30], "a.parquet")
    return root


def runs_of(client: Any, name: str) -> list[Any]:
    """Runs of ``name``, oldest first."""
    return list(reversed(client.runs(name)))
