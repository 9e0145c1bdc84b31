"""Partition change tracking over an external Iceberg table; not a test.

TPC-H ``lineitem`` as events: an external pyiceberg SQL catalog (SQLite) in a temp
directory holds ``lake.db.events``, partitioned by ``days(ts)`` with ``ts`` = the ship
date (1992-01-02 .. 1998-12-01: ~2,500 day partitions, about 7 years). ``--sample n`` keeps
every n-th SF1 row (default 1: all 6M rows, a run of ~2 minutes on 2 busy cores; 10: SF 0.1
worth). pyiceberg writes the table as an outside writer would, in a few large Arrow batches.

The MV sums price and counts rows per ship month and return flag, partitioned by the month
(``date_trunc('month', ts)``, ~84 partitions). In one process, back to back:

1. create the MV (first, full refresh; reported, not compared);
2. ``--warmup`` PCT refreshes of other days (untimed: the first small refresh in the process
   runs code the full refresh did not);
3. ``--repeat`` times: the outside writer appends rows to ONE day (``1995-06-15``, then the
   same day of the next months) and the MV is PCT refreshed (``refresh_mode = PCT``; AUTO
   may pick INCREMENTAL for an append): exactly one MV partition is rewritten (asserted);
4. ``--repeat`` full recomputes (``refresh_mode = FULL`` + FORCE: every partition).

The ratio compares the medians of steps 3 and 4. The MV is checked against the query
recomputed with pyarrow from what pyiceberg reads of the table, after steps 3 and 4.

Usage: ``.venv/bin/python bench/bench_iceberg_pct.py [--data data/tpch] [--sample 1]
[--repeat 3] [--warmup 1] [--no-write]``; records the run under "## PCT over an external
Iceberg table" in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import cpu_clock, git_commit, publish, timed, today, verdict  # noqa: E402 (bench/ is put on the path above)

SECTION = "## PCT over an external Iceberg table"
CHANGED_DAY = dt.date(1995, 6, 15)
WARMUP_DAY = dt.date(1993, 1, 15)
BATCHES = 4
QUERY = (
    "SELECT date_trunc('month', ts) AS m, l_returnflag, sum(l_extendedprice) AS revenue, "
    "sum(l_quantity) AS qty, count(*) AS n FROM lake.db.events "
    "GROUP BY date_trunc('month', ts), l_returnflag"
)
COLUMNS = ["l_orderkey", "l_quantity", "l_extendedprice", "l_discount", "l_returnflag", "l_linestatus"]


def _events(data: Path, sample: int) -> Any:
    """Every ``sample``-th row of SF1 ``lineitem`` with ``ts`` = ship date + a line-dependent
    hour (a timestamp); nullable columns, plain strings. Sorted by ``ts``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    raw = pq.read_table(data / "sf1" / "raw" / "lineitem.parquet", columns=[*COLUMNS, "l_shipdate", "l_linenumber"])
    raw = raw.cast(pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f for f in raw.schema]))
    raw = raw.take(pa.array(range(0, raw.num_rows, sample)))
    hours = pc.multiply(pc.cast(raw["l_linenumber"], pa.int64()), 3600 * 1_000_000)
    midnight = pc.cast(pc.cast(raw["l_shipdate"], pa.timestamp("s")), pa.timestamp("us"))
    ts = pc.cast(pc.add(pc.cast(midnight, pa.int64()), hours), pa.timestamp("us"))
    fields = [pa.field("ts", pa.timestamp("us"))]
    arrays = [ts]
    for name in COLUMNS:
        fields.append(pa.field(name, raw.schema.field(name).type))
        arrays.append(raw[name])
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    return table.sort_by("ts")


def _make_lake(uri: str, warehouse: Path, events: Any) -> tuple[Any, float]:
    """The outside writer creates ``db.events`` partitioned by ``days(ts)`` and appends
    ``events`` in ``BATCHES`` Arrow batches; returns (the pyiceberg table, seconds)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import DayTransform

    warehouse.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    cat.create_namespace_if_not_exists("db")
    table = cat.create_table(("db", "events"), schema=events.schema)
    with table.update_spec() as spec:
        spec.add_field("ts", DayTransform(), "ts_day")
    size = -(-events.num_rows // BATCHES)
    for start in range(0, events.num_rows, size):
        table.append(events.slice(start, size))
    return table, time.perf_counter() - started


def _change_one_day(table: Any, events: Any, day: dt.date) -> int:
    """The outside writer appends a copy of ``day``'s rows (quantity + 1) to that day."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start = dt.datetime.combine(day, dt.time())
    mask = pc.and_(
        pc.greater_equal(events["ts"], pa.scalar(start, pa.timestamp("us"))),
        pc.less(events["ts"], pa.scalar(start + dt.timedelta(days=1), pa.timestamp("us"))),
    )
    rows = events.filter(mask)
    index = rows.schema.get_field_index("l_quantity")
    bumped = pc.add(rows["l_quantity"], 1).cast(rows.schema.field(index).type)
    rows = rows.set_column(index, rows.schema.field(index), bumped)
    table.refresh()
    table.append(rows)
    return int(rows.num_rows)


def _expected(table: Any) -> set[tuple[Any, ...]]:
    """The query recomputed with pyarrow over what pyiceberg reads of the table now."""
    import pyarrow.compute as pc

    table.refresh()
    now = table.scan().to_arrow()
    now = now.append_column("m", pc.floor_temporal(now["ts"], unit="month"))
    grouped = now.group_by(["m", "l_returnflag"]).aggregate(
        [("l_extendedprice", "sum"), ("l_quantity", "sum"), ("ts", "count")]
    )
    return {
        (r["m"], r["l_returnflag"], r["l_extendedprice_sum"], r["l_quantity_sum"], r["ts_count"])
        for r in grouped.to_pylist()
    }


def _matches(client: Any, table: Any) -> bool:
    got = {tuple(r) for r in client.table("monthly").select("m", "l_returnflag", "revenue", "qty", "n").collect()}
    return got == _expected(table)


def _days_after(first: dt.date, n: int) -> list[dt.date]:
    """``first`` and the same day of the next ``n - 1`` months (a different MV partition each)."""
    return [
        dt.date(first.year + (first.month - 1 + i) // 12, (first.month - 1 + i) % 12 + 1, first.day) for i in range(n)
    ]


def _pct_refresh(client: Any) -> Any:
    run = client.refresh("monthly")
    assert (run.state, run.mode, run.partitions_done) == ("SUCCESS", "PCT", 1), run
    return run


def run(data: Path, work: Path, sample: int = 1, repeat: int = 3, warmup: int = 1) -> dict[str, Any]:
    """Run the benchmark in ``work`` (a fresh directory); returns the figures."""
    from sparkmv.client.client import Client
    from sparkmv.storage.spark import get_spark

    events = _events(data, sample)
    uri, warehouse = f"sqlite:///{work}/lake.db", work / "lakewh"
    table, write_s = _make_lake(uri, warehouse, events)
    spark = get_spark("local[2]", {"spark.driver.memory": "3g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    client = Client(home=work / "home", spark=spark)
    try:
        client.execute(
            'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
            f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
        )
        created, create_s = timed(
            lambda: client.execute(f"CREATE MATERIALIZED VIEW monthly PARTITION BY m AS {QUERY}").run
        )
        assert created is not None and created.state == "SUCCESS", created
        months = created.partitions_done
        client.sql("ALTER MATERIALIZED VIEW monthly SET PROPERTIES ('refresh_mode' = 'PCT')")
        cpu = cpu_clock(spark)
        warm_s: list[float] = []
        for day in _days_after(WARMUP_DAY, warmup):
            _change_one_day(table, events, day)
            warm_s.append(timed(lambda: _pct_refresh(client))[1])

        load_before = os.getloadavg()[0]
        pct_s: list[float] = []
        pct_cpu: list[float] = []
        for day in _days_after(CHANGED_DAY, repeat):
            added = _change_one_day(table, events, day)
            started_cpu = cpu()
            pct, seconds = timed(lambda: _pct_refresh(client))
            pct_cpu.append(cpu() - started_cpu)
            pct_s.append(seconds)
        pct_ok = _matches(client, table)

        client.sql("ALTER MATERIALIZED VIEW monthly SET PROPERTIES ('refresh_mode' = 'FULL')")
        full_s: list[float] = []
        full_cpu: list[float] = []
        for _ in range(repeat):
            started_cpu = cpu()
            full, seconds = timed(lambda: client.refresh("monthly", force=True))
            full_cpu.append(cpu() - started_cpu)
            full_s.append(seconds)
            assert (full.state, full.mode) == ("SUCCESS", "FULL"), full
        full_ok = _matches(client, table)
        return {
            "rows": events.num_rows,
            "days": len(table.inspect.partitions()),
            "data_bytes": sum(f.stat().st_size for f in warehouse.rglob("*.parquet")),
            "write_s": write_s,
            "sample": sample,
            "months": months,
            "added_rows": added,
            "create_s": create_s,
            "first_pct_s": warm_s[0] if warm_s else None,
            "warmup": warmup,
            "pct_runs": pct_s,
            "pct_s": statistics.median(pct_s),
            "pct_cpu_s": statistics.median(pct_cpu),
            "pct_partitions": pct.partitions_done,
            "full_runs": full_s,
            "full_s": statistics.median(full_s),
            "full_cpu_s": statistics.median(full_cpu),
            "full_partitions": full.partitions_done,
            "correct": pct_ok and full_ok,
            "load": (load_before, os.getloadavg()[0]),
        }
    finally:
        client.close()


def report(figures: dict[str, Any]) -> str:
    """The RESULTS.md entry for ``figures``."""
    speedup = figures["full_s"] / figures["pct_s"]
    cpu_speedup = figures["full_cpu_s"] / figures["pct_cpu_s"]
    runs = len(figures["pct_runs"])

    def listed(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    return "\n".join(
        [
            f"### {dt.date.today().isoformat()}: `bench/bench_iceberg_pct.py`",
            "",
            f"Machine: 2 cores (os.cpu_count() = {os.cpu_count()}, {platform.system()} {platform.machine()}), "
            "shared with other Spark and test runs; Spark `local[2]` (`spark.sql.shuffle.partitions = 2`) "
            f"in one process; 1-minute load average {figures['load'][0]:.1f} before and {figures['load'][1]:.1f} "
            "after the timed steps.",
            f"Data: external pyiceberg SQL catalog (SQLite), `lake.db.events` partitioned by `days(ts)`: "
            f"{'all rows' if figures['sample'] == 1 else 'every ' + str(figures['sample']) + 'th row'} of TPC-H SF1 "
            f"`lineitem`, {figures['rows']:,} rows, ts = ship date "
            f"(1992-01-02 .. 1998-12-01), {figures['days']:,} day partitions, {figures['data_bytes'] / 1e6:.0f} MB "
            f"of Parquet (written by pyiceberg in {BATCHES} appends, {figures['write_s']:.0f} s). MV `monthly` "
            f"partitioned by `date_trunc('month', ts)`: {figures['months']} partitions. Each change: an outside "
            f"pyiceberg append of {figures['added_rows']:,} rows to one day (`{CHANGED_DAY}` and the same day of "
            "the next months).",
            "",
            "| step | wall time | CPU (Python + JVM) | MV partitions written |",
            "|---|---:|---:|---:|",
            f"| create + first refresh (FULL) | {figures['create_s']:.1f} s | | {figures['months']} |",
            f"| first PCT refresh in the process ({figures['warmup']} warm-up, not in the ratio) | "
            f"{figures['first_pct_s'] or 0:.2f} s | | 1 |",
            f"| PCT refresh of one changed day (median of {runs}: {listed(figures['pct_runs'])}) | "
            f"{figures['pct_s']:.2f} s | {figures['pct_cpu_s']:.2f} s | {figures['pct_partitions']} |",
            f"| full recompute (`refresh_mode = FULL`, FORCE; median of {runs}: {listed(figures['full_runs'])}) | "
            f"{figures['full_s']:.2f} s | {figures['full_cpu_s']:.2f} s | {figures['full_partitions']} |",
            "",
            f"PCT vs full recompute: **{speedup:.1f}x** faster (target >= 20x: "
            f"{'met' if speedup >= 20 else 'MISSED'}); by CPU {cpu_speedup:.1f}x. MV equal to the query "
            f"recomputed (pyarrow over pyiceberg's read) after both: {figures['correct']}.",
            "",
        ]
    )


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    speedup = figures["full_s"] / figures["pct_s"]
    return (
        f"PCT refresh of one day {speedup:.1f}x faster than a full recompute ({figures['pct_s']:.2f} s vs "
        f"{figures['full_s']:.2f} s; target >= 20x: {verdict(speedup >= 20)})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures and (unless ``--no-write``) record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--sample", type=int, default=1, help="keep every n-th SF1 lineitem row")
    parser.add_argument("--repeat", type=int, default=3, help="PCT refreshes and full recomputes timed (median)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed PCT refreshes before the timed ones")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-iceberg-pct-") as tmp:
        figures = run(args.data.resolve(), Path(tmp), args.sample, args.repeat, args.warmup)
    entry = report(figures)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_iceberg_pct.py")
    return 0 if figures["correct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
