"""Input of guide_flows_sql: west and east customer Parquet files (repeated ids across
files, NULL cities) (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import maybe, parquet

DATASETS = {
    "west_files": "table",
    "east_files": "table",
    "customers_us_west": "table",
    "customers_us_east": "table",
    "customers_us": "table",
    "customers_per_city": "mv",
}
CITIES = {"west": ["Seattle", "Portland", "Fresno"], "east": ["Boston", "Miami"]}


def customers(path: Path, coast: str, seed: int, count: int) -> None:
    rnd = random.Random(seed)
    parquet(
        path,
        {
            "customer_id": [rnd.randint(1, 12) for _ in range(count)],
            "name": [f"c{rnd.randint(1, 99)}" for _ in range(count)],
            "city": [maybe(rnd, rnd.choice(CITIES[coast])) for _ in range(count)],
        },
        {"city": "string"},
    )


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(2):
            customers(data / "west" / f"w-{k}.parquet", "west", k, 80)
            customers(data / "east" / f"e-{k}.parquet", "east", 10 + k, 60)
    elif step == "append":
        customers(data / "west" / "w-2.parquet", "west", 2, 5)
        customers(data / "east" / "e-2.parquet", "east", 12, 4)
    elif step == "mutate":
        (data / "east" / "e-0.parquet").unlink()
