"""Input of python_sink_partitions: trip JSON-lines files (two years, months, NULL fares and
cities) (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe

DATASETS = {"trips_by_month": "mv", "fares_per_city": "mv", "trips_export": "sink:out/trips_export"}


def trips(path: Path, seed: int, first: int, count: int) -> None:
    rnd = random.Random(seed)
    rows = [
        {
            "trip_id": n,
            "city": maybe(rnd, rnd.choice(["Oslo", "Rome"])),
            "year": rnd.choice([2023, 2024]),
            "month": rnd.randint(1, 3),
            "fare": maybe(rnd, round(rnd.uniform(3, 60), 2)),
        }
        for n in range(first, first + count)
    ]
    json_lines(path, rows)


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            trips(data / "trips" / f"t-{k}.json", k, k * 1000, 120)
    elif step == "append":
        trips(data / "trips" / "t-3.json", 3, 3000, 6)
    elif step == "mutate":
        (data / "trips" / "t-0.json").unlink()
