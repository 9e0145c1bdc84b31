"""Input of guide_orders_python: order JSON-lines files (ISO timestamps, repeated customers,
NULL customer ids and amounts) and a customers CSV file with a header (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import csv_file, json_lines, maybe

DATASETS = {"orders": "table", "customers": "mv", "customer_orders": "mv", "daily_orders_by_state": "mv"}


def orders(path: Path, seed: int, first: int, count: int) -> None:
    rnd = random.Random(seed)
    rows = [
        {
            "order_number": n,
            "customer_id": maybe(rnd, rnd.randint(1, 6)),
            "order_datetime": f"2024-03-0{rnd.randint(1, 4)}T{rnd.randint(0, 23):02d}:15:00",
            "amount": maybe(rnd, round(rnd.uniform(1, 50), 2)),
        }
        for n in range(first, first + count)
    ]
    json_lines(path, rows)


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            orders(data / "orders" / f"orders-{k}.json", k, k * 1000, 120)
        csv_file(
            data / "customers" / "c.csv", ["customer_id", "state"], [[i, "WA" if i % 2 else None] for i in range(1, 6)]
        )
    elif step == "append":
        orders(data / "orders" / "orders-3.json", 3, 3000, 6)
        orders(data / "orders" / "orders-4.json", 4, 4000, 4)
    elif step == "mutate":
        (data / "orders" / "orders-2.json").unlink()
