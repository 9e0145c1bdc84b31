"""Input of auto_cdc_sql: product change Parquet files (repeated keys, deletes, NULL prices)
(seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import maybe, parquet

DATASETS = {"change_files": "table", "product_changes": "table", "products": "table", "products_per_category": "mv"}


def changes(path: Path, seed: int, first_seq: int, count: int) -> None:
    rnd = random.Random(seed)
    parquet(
        path,
        {
            "product_id": [rnd.randint(1, 8) for _ in range(count)],
            "category": [rnd.choice(["tools", "toys"]) for _ in range(count)],
            "price": [maybe(rnd, float(rnd.randint(1, 20))) for _ in range(count)],
            "op": ["DELETE" if rnd.random() < 0.2 else "UPSERT" for _ in range(count)],
            "seq": [first_seq + i for i in range(count)],
        },
        {"price": "float64"},
    )


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(2):
            changes(data / "changes" / f"c-{k}.parquet", k, k * 1000, 100)
    elif step == "append":
        changes(data / "changes" / "c-2.parquet", 2, 2000, 6)
    elif step == "mutate":
        (data / "changes" / "c-1.parquet").unlink()
