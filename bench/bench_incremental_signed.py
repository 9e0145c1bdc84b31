"""Incremental refresh after deletes and updates on TPC-H; not a test.

One warm process (one SparkSession ``local[2]``). ``orders`` (partitioned by
``o_ordermonth``), ``lineitem`` (partitioned by ``l_shipmonth``) and ``customer`` are Iceberg
tables of sparkmv's catalog, loaded with pyiceberg from ``tpchgen-cli`` Parquet. Two strict
``refresh_mode = 'INCREMENTAL'`` MVs:

(a) orders per month (``count``, ``sum`` and ``max`` of ``o_totalprice``, partitioned by
    ``o_ordermonth``); target: INCREMENTAL at least 10x faster than FULL;
(b) ``segment_revenue`` (orders ⋈ lineitem ⋈ customer by month and segment, partitioned by
    ``o_ordermonth``); target: at least 5x.

Each change touches 0.1 % of ``orders`` (the keys drawn from the orders of ``--spread``
months, default 1: a correction batch of one month; ``--spread 0``: from every month) and
their ``lineitem`` rows, by an outside pyiceberg writer:

1. a copy-on-write delete (``Table.delete(In(key, ...))``) of the orders and their lines;
2. an upsert: the same number of other orders and their lines overwritten
   (``Table.overwrite(rows, In(key, ...))``) with ``o_totalprice`` / ``l_extendedprice``
   raised by 1 %.

After each change both MVs are refreshed INCREMENTAL, compared with their query recomputed
(``exceptAll`` both ways), then rebuilt with ``REFRESH ... FORCE`` (FULL) for the ratio.

Usage: ``.venv/bin/python bench/bench_incremental_signed.py --data DIR [--sf 1] [--spread 1]
[--no-write]`` where DIR holds ``orders.parquet``, ``lineitem.parquet`` and
``customer.parquet`` (``tpchgen-cli parquet -s 1 --tables=orders,lineitem,customer``).
Appends an entry under "## Incremental refresh after deletes and updates" in
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import cpu_clock, git_commit, publish, today  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Incremental refresh after deletes and updates"
MONTHLY = (
    "SELECT o_ordermonth, count(*) AS orders, sum(o_totalprice) AS total, max(o_totalprice) AS top "
    "FROM orders GROUP BY o_ordermonth"
)
SEGMENT_REVENUE = (
    "SELECT o.o_ordermonth, c.c_mktsegment, count(*) AS line_count, "
    "sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue "
    "FROM orders o JOIN lineitem l ON l.l_orderkey = o.o_orderkey JOIN customer c ON c.c_custkey = o.o_custkey "
    "GROUP BY o.o_ordermonth, c.c_mktsegment"
)
MVS = {"monthly": (MONTHLY, 10.0), "segment_revenue": (SEGMENT_REVENUE, 5.0)}


def _with_month(table: Any, date_column: str, month_column: str) -> Any:
    import pyarrow.compute as pc

    return table.append_column(month_column, pc.strftime(table.column(date_column), "%Y-%m"))


def _plain_strings(table: Any) -> Any:
    """``table`` with string_view columns (tpchgen-cli writes them) as strings, which
    pyiceberg's partitioned writer can filter."""
    import pyarrow as pa

    fields = [pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields))


def load(client: Any, data: Path) -> dict[str, int]:
    """Create and fill the three Iceberg tables; returns their row counts."""
    import pyarrow.parquet as pq

    from sparkmv.names import ObjectName

    store = client.runtime.iceberg
    specs = {"orders": ("o_orderdate", "o_ordermonth"), "lineitem": ("l_shipdate", "l_shipmonth"), "customer": None}
    counts = {}
    for name, spec in specs.items():
        rows = _plain_strings(pq.read_table(data / f"{name}.parquet"))
        if spec is not None:
            rows = _with_month(rows, *spec)
        store.create_table(ObjectName("default", name), rows.schema, spec[1] if spec else None)
        store.load(ObjectName("default", name)).append(rows)
        counts[name] = rows.num_rows
    return counts


def _table(client: Any, name: str) -> Any:
    from sparkmv.names import ObjectName

    return client.runtime.iceberg.load(ObjectName("default", name))


def pick_orders(client: Any, share: float, spread: int, rnd: random.Random, taken: set[int]) -> list[int]:
    """``share`` of all order keys, drawn from the orders of ``spread`` random months (0: all)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    orders = _table(client, "orders").scan(selected_fields=("o_orderkey", "o_ordermonth")).to_arrow()
    want = max(1, int(orders.num_rows * share))
    if spread:
        months = sorted(set(orders.column("o_ordermonth").to_pylist()))
        chosen = rnd.sample(months[6:-6], spread)
        orders = orders.filter(pc.is_in(orders.column("o_ordermonth"), value_set=pa.array(chosen)))
    keys = [k for k in orders.column("o_orderkey").to_pylist() if k not in taken]
    out = rnd.sample(keys, min(want, len(keys)))
    taken.update(out)
    return out


def delete(client: Any, keys: list[int]) -> str:
    from pyiceberg.expressions import In

    _table(client, "orders").delete(In("o_orderkey", keys))
    _table(client, "lineitem").delete(In("l_orderkey", keys))
    return f"copy-on-write delete of {len(keys)} orders and their lineitem rows"


def upsert(client: Any, keys: list[int]) -> str:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import In

    done = 0
    for name, key, price in (("orders", "o_orderkey", "o_totalprice"), ("lineitem", "l_orderkey", "l_extendedprice")):
        table = _table(client, name)
        rows = table.scan(row_filter=In(key, keys)).to_arrow()
        index = rows.schema.get_field_index(price)
        raised = pc.multiply(rows.column(price), pa.scalar(1.01)).cast(rows.schema.field(index).type)
        rows = rows.set_column(index, rows.schema.field(index), raised)
        table.overwrite(rows, In(key, keys))
        done += rows.num_rows
    return f"upsert (overwrite) of {len(keys)} orders and their lineitem rows ({done} rows)"


def matches(client: Any, mv: str, query: str) -> bool:
    table = client.table(mv)
    expected = client.sql(query).select(*table.columns)
    return table.exceptAll(expected).count() == 0 and expected.exceptAll(table).count() == 0


def spark_jobs(spark: Any) -> list[tuple[int, float, str]]:
    """Every Spark job of the session so far: (job id, seconds, call site)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    out = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        start, end = job.submissionTime(), job.completionTime()
        seconds = (end.get().getTime() - start.get().getTime()) / 1000 if start.isDefined() and end.isDefined() else 0.0
        out.append((job.jobId(), seconds, str(job.name())[:110]))
    return sorted(out)


def profiled(client: Any, mv: str, out: Path) -> Any:
    """``client.refresh(mv)`` under cProfile; the Python profile (top 35 by cumulative time) and
    the Spark jobs it ran are written to ``out``."""
    import cProfile
    import io
    import pstats

    before = {j[0] for j in spark_jobs(client.spark)}
    profile = cProfile.Profile()
    run = profile.runcall(client.refresh, mv)
    jobs = [j for j in spark_jobs(client.spark) if j[0] not in before]
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(45)
    lines = [f"== {mv}: {len(jobs)} Spark jobs, {sum(j[1] for j in jobs):.2f} s"]
    lines += [f"  job {j[0]}: {j[1]:.2f} s {j[2]}" for j in jobs]
    with out.open("a") as f:
        f.write("\n".join(lines) + "\n" + text.getvalue() + "\n")
    return run


def refresh(
    client: Any, mv: str, mode: str, clock: Any, force: bool = False, profile: Path | None = None
) -> dict[str, Any]:
    started, cpu = time.perf_counter(), clock()
    run = profiled(client, mv, profile) if profile else client.refresh(mv, force=force)
    wall, used = time.perf_counter() - started, clock() - cpu
    assert (run.state, run.mode) == ("SUCCESS", mode), run
    print(f"  {mv}: {run.mode} {wall:.2f} s (cpu {used:.2f} s, load {os.getloadavg()[0]:.1f})", flush=True)
    return {"wall": wall, "cpu": used, "run": run, "load": os.getloadavg()[0]}


def run(
    data: Path, work: Path, spread: int, profile: Path | None = None, changes: str = "delete,upsert"
) -> dict[str, Any]:
    from sparkmv.client.client import Client
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    clock = cpu_clock(spark)
    client = Client(home=work / "home", spark=spark)
    figures: dict[str, Any] = {"steps": [], "load_before": os.getloadavg()[0]}
    started = time.perf_counter()
    figures["rows"] = load(client, data)
    figures["load_seconds"] = time.perf_counter() - started
    for mv, (query, _) in MVS.items():
        client.sql(
            f"CREATE MATERIALIZED VIEW {mv} PARTITION BY o_ordermonth REFRESH DEFERRED "
            f"PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}"
        )
        refresh(client, mv, "FULL", clock)
    rnd, taken = random.Random(23), set()
    for change in [{"delete": delete, "upsert": upsert}[c] for c in changes.split(",")]:
        keys = pick_orders(client, 0.001, spread, rnd, taken)
        what = change(client, keys)
        print(what, flush=True)
        for mv, (query, target) in MVS.items():
            inc = refresh(client, mv, "INCREMENTAL", clock, profile=profile)
            ok = matches(client, mv, query)
            full = refresh(client, mv, "FULL", clock, force=True)
            reason = next(c["reason"] for c in inc["run"].candidates if c["mode"] == "INCREMENTAL")
            figures["steps"].append(
                {"change": what, "mv": mv, "inc": inc, "full": full, "ok": ok, "target": target, "reason": reason}
            )
    figures["load_after"] = os.getloadavg()[0]
    client.close()
    return figures


def entry(figures: dict[str, Any], sf: str, spread: int) -> str:
    rows = ", ".join(f"{k} {v:,}" for k, v in figures["rows"].items())
    where = f"from the orders of {spread} random month(s)" if spread else "from every month"
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_incremental_signed.py --sf {sf} --spread {spread}`",
        "",
        f"Machine: {os.cpu_count()} cores ({platform.system()} {platform.machine()}), shared with other "
        f"Spark and test runs; 1-minute load average {figures['load_before']:.1f} before, "
        f"{figures['load_after']:.1f} after. Data: TPC-H SF{sf} as Iceberg tables of sparkmv's catalog ({rows}; "
        f"loaded by pyiceberg in {figures['load_seconds']:.0f} s). Each change: 0.1 % of `orders`, keys drawn {where}.",
        "",
        "| change | MV | INCREMENTAL | FULL (FORCE) | speed-up (wall / CPU) | target | exact |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for s in figures["steps"]:
        wall = s["full"]["wall"] / s["inc"]["wall"]
        cpu = s["full"]["cpu"] / max(s["inc"]["cpu"], 1e-9)
        lines.append(
            f"| {s['change']} | `{s['mv']}` | {s['inc']['wall']:.2f} s | {s['full']['wall']:.2f} s | "
            f"{wall:.1f}x / {cpu:.1f}x | {s['target']:.0f}x ({'met' if wall >= s['target'] else 'MISSED'}) | "
            f"{s['ok']} |"
        )
    lines.append("")
    lines.append("The INCREMENTAL candidate of each run (what the change log read):")
    lines.append("")
    lines += [f"- {s['change'].split(' of ')[0]}, `{s['mv']}`: {s['reason']}" for s in figures["steps"]]
    return "\n".join(lines) + "\n"


def headline(figures: dict[str, Any], sf: str) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    steps = figures["steps"]
    speedups = [s["full"]["wall"] / s["inc"]["wall"] for s in steps]
    met = sum(x >= s["target"] for x, s in zip(speedups, steps, strict=True))
    return (
        f"SF{sf}: INCREMENTAL {min(speedups):.1f}x to {max(speedups):.1f}x as fast as FULL; targets "
        f"(10x `monthly`, 5x `segment_revenue`) met {met} of {len(steps)}; exact {sum(s['ok'] for s in steps)} "
        f"of {len(steps)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--sf", default="1")
    parser.add_argument("--spread", type=int, default=1)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--changes", default="delete,upsert", help="which changes, comma-separated")
    parser.add_argument("--profile", type=Path, help="append cProfile + Spark jobs of each INCREMENTAL run here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-signed-") as tmp:
        figures = run(args.data, Path(tmp), args.spread, args.profile, args.changes)
    text = entry(figures, args.sf, args.spread)
    print(text)
    if not args.no_write:
        publish(
            SECTION,
            text,
            headline(figures, args.sf),
            today(),
            git_commit(),
            script="bench/bench_incremental_signed.py",
        )
    return 0 if all(s["ok"] for s in figures["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
