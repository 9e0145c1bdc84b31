"""Input of guide_flows_python: west and east customer JSON-lines files (repeated ids, NULL
names) (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe

DATASETS = {
    "customers_us_west": "table",
    "customers_us_east": "table",
    "customers_us": "table",
    "customers_per_coast": "mv",
}


def customers(path: Path, seed: int, count: int) -> None:
    rnd = random.Random(seed)
    rows = [
        {"customer_id": rnd.randint(1, 9), "name": maybe(rnd, f"n{rnd.randint(1, 30)}"), "city": rnd.choice("ABC")}
        for _ in range(count)
    ]
    json_lines(path, rows)


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(2):
            customers(data / "west" / f"w-{k}.json", k, 60)
            customers(data / "east" / f"e-{k}.json", 20 + k, 50)
    elif step == "append":
        customers(data / "west" / "w-2.json", 2, 3)
    elif step == "mutate":
        customers(data / "west" / "w-0.json", 30, 2)  # rewritten
