"""Input of sql_file_mvs: sales Parquet files (several per run, NULL quantities, repeated
items) and an items JSON file (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe, parquet

DATASETS = {"revenue_by_region": "mv", "sales_with_items": "mv", "top_region": "mv"}
ITEMS = ["apple", "pear", "plum", "fig", "kiwi"]


def _sales(path: Path, seed: int, count: int) -> None:
    rnd = random.Random(seed)
    parquet(
        path,
        {
            "region": [rnd.choice(["north", "south", "east"]) for _ in range(count)],
            "item": [rnd.choice(ITEMS) for _ in range(count)],
            "qty": [maybe(rnd, rnd.randint(1, 9)) for _ in range(count)],
            "price": [float(rnd.randint(1, 40)) / 4 for _ in range(count)],
        },
        {"qty": "int64"},
    )


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            _sales(data / "sales" / f"part-{k}.parquet", k, 200)
        rows = [{"item": i, "category": "stone" if i in ("plum", "apple") else "soft"} for i in ITEMS[:4]]
        json_lines(data / "items" / "items.json", rows)
    elif step == "append":
        _sales(data / "sales" / "part-3.parquet", 3, 12)
    elif step == "mutate":
        (data / "sales" / "part-0.parquet").unlink()
