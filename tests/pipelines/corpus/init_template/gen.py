"""Input of init_template: Parquet files of (id, label) under data/numbers (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DATASETS = {"numbers_mv": "mv", "even_numbers": "mv"}


def _file(path: Path, first: int, count: int, seed: int) -> None:
    rnd = random.Random(seed)
    ids = [first + i for i in range(count)]
    labels = [None if rnd.random() < 0.2 else rnd.choice("abc") for _ in ids]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "label": pa.array(labels, pa.string())}), path)


def generate(data: Path, step: str) -> None:
    folder = data / "numbers"
    if step == "initial":
        for k in range(3):
            _file(folder / f"part-{k}.parquet", k * 100, 100, seed=k)
    elif step == "append":
        _file(folder / "part-3.parquet", 300, 7, seed=3)
    elif step == "mutate":
        _file(folder / "part-1.parquet", 100, 4, seed=11)  # rewritten: fewer rows
