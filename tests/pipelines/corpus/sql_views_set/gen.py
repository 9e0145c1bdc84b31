"""Input of sql_views_set: event JSON-lines files (days, kinds with NULLs, repeated ids)
(seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe

DATASETS = {"events": "mv", "big_events": "view", "rollup_by_kind": "mv", "latest_day": "mv"}


def events(path: Path, seed: int, days: list[str], count: int) -> None:
    rnd = random.Random(seed)
    rows = [
        {
            "id": rnd.randint(1, 15),
            "kind": rnd.choice(["click", "view", "buy"]),
            "day": rnd.choice(days),
            "value": maybe(rnd, rnd.randint(0, 10)),
        }
        for _ in range(count)
    ]
    json_lines(path, rows)


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            events(data / "events" / f"e-{k}.json", k, ["2024-05-01", "2024-05-02"], 100)
    elif step == "append":
        events(data / "events" / "e-3.json", 3, ["2024-05-02", "2024-05-03"], 8)
    elif step == "mutate":
        events(data / "events" / "e-1.json", 21, ["2024-05-01"], 3)  # rewritten
