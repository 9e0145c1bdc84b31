"""Input of guide_orders_sql: order Parquet files (epoch seconds over a few days, repeated
customers, NULL customer ids) and a customers JSON file (seeded)."""

from __future__ import annotations

import random
from pathlib import Path

from tests.pipelines.corpus_data import json_lines, maybe, parquet

DATASETS = {
    "orders_source": "table",
    "orders": "table",
    "customers": "mv",
    "customer_orders": "mv",
    "daily_orders_by_state": "mv",
}
DAY = 86400
START = 1_700_000_000


def orders(path: Path, seed: int, first: int, count: int) -> None:
    rnd = random.Random(seed)
    parquet(
        path,
        {
            "order_number": list(range(first, first + count)),
            "customer_id": [maybe(rnd, rnd.randint(1, 8)) for _ in range(count)],
            "order_datetime": [START + rnd.randint(0, 4 * DAY) for _ in range(count)],
            "amount": [round(rnd.uniform(1, 100), 2) for _ in range(count)],
        },
        {"customer_id": "int64"},
    )


def customers(path: Path) -> None:
    states = ["CA", "NY", "TX", None]
    json_lines(path, [{"customer_id": i, "state": states[i % 4]} for i in range(1, 8)])


def generate(data: Path, step: str) -> None:
    if step == "initial":
        for k in range(3):
            orders(data / "orders" / f"part-{k}.parquet", k, k * 1000, 150)
        customers(data / "customers" / "customers.json")
    elif step == "append":
        orders(data / "orders" / "part-3.parquet", 3, 3000, 9)
    elif step == "mutate":
        orders(data / "orders" / "part-1.parquet", 11, 1000, 5)  # rewritten with other rows
