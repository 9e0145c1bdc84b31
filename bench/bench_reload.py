"""Benchmark: REFRESH TABLE (FULL_RELOAD, per-vnode merge + changelog) vs a naive full overwrite.

Source: 2,000,000 rows derived deterministically from TPC-H ``orders`` at SF1
(``data/tpch/sf1/raw/orders.parquet``, 1.5M rows, plus its first 500,000 rows again with
``o_orderkey + 100,000,000``), written as 8 Parquet files. Then 1% of the rows are changed
(``o_totalprice + 1``), 0.5% deleted and 0.5% added, and the table is refreshed again.

Timed in one process, one after the other, on the same Spark session:

* ``refresh``: ``REFRESH TABLE`` of the changed source (load into staging, merge, changelog,
  publish), checked against the exact expected changelog counts;
* ``naive``: read the same source and overwrite a plain Iceberg table with it (one Spark
  write, one commit replacing every file), no diff, no changelog;
* ``naive in vnode layout``: the same overwrite into a table laid out as the refreshable
  table is (``_vnode`` column, partitioned by it).

Usage: ``.venv/bin/python bench/bench_reload.py [--rows 2000000] [--vnodes 16] [--append-results]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from results import git_commit, publish, verdict  # bench/ is on the path: the script's directory

ROOT = Path(__file__).resolve().parents[1]
ORDERS = ROOT / "data" / "tpch" / "sf1" / "raw" / "orders.parquet"
COLUMNS = [
    "o_orderkey",
    "o_custkey",
    "o_orderstatus",
    "o_totalprice",
    "o_orderdate",
    "o_orderpriority",
    "o_clerk",
    "o_shippriority",
    "o_comment",
]


def base_rows(rows: int) -> pa.Table:
    """``rows`` rows from orders (deterministic), keys unique."""
    orders = pq.read_table(ORDERS, columns=COLUMNS)
    plain = [
        pa.field(
            f.name,
            pa.string() if pa.types.is_string_view(f.type) else pa.float64() if pa.types.is_decimal(f.type) else f.type,
        )
        for f in orders.schema
    ]
    orders = orders.cast(pa.schema(plain))
    orders = orders.set_column(0, "o_orderkey", pc.cast(orders["o_orderkey"], pa.int64()))
    parts = [orders]
    total = orders.num_rows
    offset = 100_000_000
    while total < rows:
        extra = orders.slice(0, min(rows - total, orders.num_rows))
        extra = extra.set_column(0, "o_orderkey", pc.add(extra["o_orderkey"], offset))
        parts.append(extra)
        total += extra.num_rows
        offset += 100_000_000
    return pa.concat_tables(parts).slice(0, rows).combine_chunks()


def changed(table: pa.Table) -> tuple[pa.Table, dict[str, int]]:
    """1% updated, 0.5% deleted, 0.5% added (by row position, deterministic)."""
    n = table.num_rows
    idx = pa.array(range(n), pa.int64())
    mod = pc.subtract(idx, pc.multiply(pc.divide(idx, 200), 200))  # row position % 200
    deleted = pc.equal(mod, 0)  # 0.5%
    updated = pc.or_(pc.equal(mod, 1), pc.equal(mod, 2))  # 1%
    price = pc.if_else(updated, pc.add(table["o_totalprice"], 1.0), table["o_totalprice"])
    table = table.set_column(COLUMNS.index("o_totalprice"), "o_totalprice", price)
    kept = table.filter(pc.invert(deleted))
    n_added = n // 200
    added = table.slice(0, n_added)
    added = added.set_column(0, "o_orderkey", pc.add(added["o_orderkey"], 1_000_000_000))
    counts = {"I": n_added, "U": int(pc.sum(updated).as_py()), "D": int(pc.sum(deleted).as_py())}
    return pa.concat_tables([kept, added]).combine_chunks(), counts


def write_source(table: pa.Table, directory: Path, files: int = 8) -> None:
    """Replace the source directory's contents with ``files`` Parquet files."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    step = -(-table.num_rows // files)
    for i in range(files):
        pq.write_table(table.slice(i * step, step), directory / f"part-{i:02d}.parquet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--vnodes", type=int, default=16)
    ap.add_argument("--append-results", action="store_true", help="record the figures in bench/RESULTS.md")
    args = ap.parse_args()

    from sparkmv.client.client import Client
    from sparkmv.names import ObjectName
    from sparkmv.storage.files import write_staged
    from sparkmv.storage.schema import spark_to_arrow

    work = Path(tempfile.mkdtemp(prefix="bench_reload_"))
    try:
        src = work / "src"
        t0 = time.perf_counter()
        v1 = base_rows(args.rows)
        write_source(v1, src)
        v2, expected = changed(v1)
        gen_s = time.perf_counter() - t0
        client = Client(
            home=work / "home",
            master="local[2]",
            recover=False,
            conf={"spark.sql.shuffle.partitions": "8", "spark.driver.memory": "3g"},
        )
        client.sql(
            "CREATE TABLE orders_rt (o_orderkey bigint, o_custkey bigint, o_orderstatus string, o_totalprice double, "
            "o_orderdate date, o_orderpriority string, o_clerk string, o_shippriority int, o_comment string, "
            f"PRIMARY KEY (o_orderkey)) WITH (connector = 'files', path = '{src}', format = 'parquet', "
            f"refresh_mode = 'FULL_RELOAD', vnode_count = '{args.vnodes}')"
        )
        spark = client.runtime.spark
        spark.read.parquet(str(src)).count()  # warm up the JVM's reader path

        t = time.perf_counter()
        first = client.execute("REFRESH TABLE orders_rt").run
        first_s = time.perf_counter() - t
        assert first is not None and first.state == "SUCCESS", first

        write_source(v2, src)
        t = time.perf_counter()
        run = client.execute("REFRESH TABLE orders_rt").run
        refresh_s = time.perf_counter() - t
        assert run is not None and run.state == "SUCCESS", run
        rt = client.runtime
        with rt.catalog.transaction() as s:
            row = rt.catalog.runs.get(s, run.run_id)
            counts = {"I": row.rows_inserted, "U": row.rows_updated, "D": row.rows_deleted}
            merge_s = sum(c.duration_seconds for c in rt.catalog.runs.chunks(s, run.run_id))
        assert counts == expected, (counts, expected)
        log = client.sql(f"SELECT op, count(*) AS n FROM orders_rt__changelog WHERE run_id = {run.run_id} GROUP BY op")
        assert log is not None and {r["op"]: r["n"] for r in log.collect()} == expected
        assert client.table("orders_rt").count() == v2.num_rows

        # naive: overwrite a plain Iceberg table with the whole source
        target = ObjectName.parse("orders_naive")
        df = client.table("orders_rt").limit(0)
        rt.iceberg.create_table(target, spark_to_arrow(df.schema), None)
        t = time.perf_counter()
        raw = spark.read.parquet(str(src))
        source = raw.select(*[raw[c].cast(df.schema[c].dataType).alias(c) for c in df.columns])
        staged = write_staged(source, work / "naive", None)
        rt.iceberg.publish(target, 1, staged.files, None)
        naive_s = time.perf_counter() - t
        assert client.table("orders_naive").count() == v2.num_rows

        # naive in the table's own layout: the same overwrite, partitioned by _vnode as the
        # refreshable table is (the hash and the shuffle by vnode that layout needs)
        from pyspark.sql import functions as F

        laid_out = ObjectName.parse("orders_naive_vnode")
        vnode = F.pmod(F.xxhash64(F.col("o_orderkey")), F.lit(args.vnodes)).cast("int").alias("_vnode")
        rt.iceberg.create_table(laid_out, spark_to_arrow(df.select("*", vnode).schema), "_vnode")
        t = time.perf_counter()
        raw = spark.read.parquet(str(src))
        source = raw.select(*[raw[c].cast(df.schema[c].dataType).alias(c) for c in df.columns], vnode)
        staged = write_staged(source, work / "naive_vnode", "_vnode")
        rt.iceberg.publish(laid_out, 1, staged.files, None)
        naive_vnode_s = time.perf_counter() - t

        merged_rows = v1.num_rows + v2.num_rows
        result = {
            "rows": args.rows,
            "vnodes": args.vnodes,
            "generate_s": round(gen_s, 2),
            "first_refresh_s": round(first_s, 2),
            "refresh_s": round(refresh_s, 2),
            "merge_s": round(merge_s, 2),
            "load_and_publish_s": round(refresh_s - merge_s, 2),
            "naive_overwrite_s": round(naive_s, 2),
            "ratio": round(refresh_s / naive_s, 2),
            "naive_vnode_overwrite_s": round(naive_vnode_s, 2),
            "ratio_vs_vnode_layout": round(refresh_s / naive_vnode_s, 2),
            "merge_rows_per_s": int(merged_rows / merge_s) if merge_s else None,
            "refresh_rows_per_s": int(v2.num_rows / refresh_s),
            "changelog": counts,
        }
        print(json.dumps(result, indent=2))
        if args.append_results:
            _append(result)
        client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _append(r: dict[str, object]) -> None:
    """Record ``r`` as the latest run of "Refreshable tables" in ``bench/RESULTS.md``."""
    cl = r["changelog"]
    assert isinstance(cl, dict)
    ratio = float(r["ratio_vs_vnode_layout"])  # type: ignore[arg-type]
    date = str(datetime.now(UTC).date())
    table = (
        f"### {date}: `bench/bench_reload.py`\n\n"
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Spark `local[2]`. Data: {r['rows']:,} rows "
        f"(TPC-H orders SF1 derived), {r['vnodes']} vnodes, 8 Parquet files.\n\n"
        "| REFRESH TABLE s | merge s | naive overwrite s | ratio | naive in vnode layout s | ratio to it "
        "| merge rows/s | changelog I/U/D |\n"
        "|---|---|---|---|---|---|---|---|\n"
        f"| {r['refresh_s']} | {r['merge_s']} | {r['naive_overwrite_s']} | {r['ratio']}x | "
        f"{r['naive_vnode_overwrite_s']} | **{ratio}x** | {r['merge_rows_per_s']:,} | "
        f"{cl['I']}/{cl['U']}/{cl['D']} |\n\n"
        f"Target (<= 1.5x the naive overwrite in the vnode layout): **{'met' if ratio <= 1.5 else 'not met'}**.\n"
    )
    headline = (
        f"REFRESH TABLE {ratio}x a naive overwrite in the vnode layout ({r['ratio']}x a plain one; "
        f"target <= 1.5x: {verdict(ratio <= 1.5)})"
    )
    publish("## Refreshable tables", table, headline, date, git_commit(), script="bench/bench_reload.py")


if __name__ == "__main__":
    main()
