"""Input of auto_cdc_python: change-event JSON-lines files (upserts of repeated keys, deletes,
NULL cities, increasing sequence numbers across files) (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe

DATASETS = {"user_changes": "table", "users": "table", "users_per_city": "mv"}


def changes(path: Path, seed: int, first_seq: int, count: int) -> None:
    rnd = random.Random(seed)
    rows = []
    for i in range(count):
        op = "DELETE" if rnd.random() < 0.15 else "UPSERT"
        city = maybe(rnd, rnd.choice(["Lima", "Quito", "Cusco"]))
        rows.append(
            {
                "user_id": rnd.randint(1, 10),
                "name": f"u{rnd.randint(1, 50)}",
                "city": city,
                "op": op,
                "seq": first_seq + i,
            }
        )
    json_lines(path, rows)


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(2):
            changes(data / "changes" / f"c-{k}.json", k, k * 1000, 100)
    elif step == "append":
        changes(data / "changes" / "c-2.json", 2, 2000, 10)
    elif step == "mutate":
        (data / "changes" / "c-0.json").unlink()
