"""Input of sql_table_shapes: sensor reading Parquet files (NULL readings, repeated sensors)
(seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import maybe, parquet

DATASETS = {"reading_files": "table", "readings": "mv", "site_stats": "mv", "readings_feed": "table"}


def readings(path: Path, seed: int, count: int) -> None:
    rnd = random.Random(seed)
    parquet(
        path,
        {
            "sensor": [f"s{rnd.randint(1, 6)}" for _ in range(count)],
            "site": [rnd.choice(["lab", "roof", None]) for _ in range(count)],
            "reading": [maybe(rnd, round(rnd.uniform(-5, 30), 3)) for _ in range(count)],
            "ts": [1000 + seed * 1000 + i for i in range(count)],
        },
        {"reading": "float64", "site": "string"},
    )


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            readings(data / "readings" / f"r-{k}.parquet", k, 120)
    elif step == "append":
        readings(data / "readings" / "r-3.parquet", 3, 10)
    elif step == "mutate":
        (data / "readings" / "r-2.parquet").unlink()
