"""Cost that stays flat as the table grows; not a test.

The same one-day change refreshed over TPC-H ``lineitem`` at SF1 and at SF10 (``--sf``):
for each scale, in its own process (a fresh JVM), ``lineitem`` (``tpchgen-cli``, cached
under ``--data``) is sorted by ``l_shipdate`` (DuckDB, spilling to disk) and written by
pyiceberg, as an outside writer would, into an external Iceberg SQL catalog (SQLite) in a
temp directory: ``lake.tpch.lineitem`` partitioned by ``day(l_shipdate)`` (~2,526 day
partitions; written sorted in appends of up to :data:`BATCH_ROWS` rows, so each day is one
file, or a few where appends meet, at both scales: the file count stays about the same,
the rows per file grow tenfold). Three MVs:

- ``daily``: a Q1-like aggregate per ``l_shipdate, l_returnflag, l_linestatus``,
  ``PARTITION BY l_shipdate`` (one MV partition per day), AUTO;
- ``daily_pct``: the same with ``refresh_mode = PCT`` (one MV partition rewritten);
- ``q1``: TPC-H Q1, unpartitioned, AUTO.

In one warm process per scale: create the MVs (FULL), one untimed round (change + refresh of
each MV), then ``--repeat`` timed rounds. A round: the outside writer appends
``--rows`` rows (the same rows at every scale: :func:`change_rows`, seeded by the round) to
one existing day (``1995-06-15``, then the same day of the next months), then each MV is
refreshed (its technique and seconds recorded). The MVs are then checked against their
queries computed by DuckDB over the table's data files, and refreshed FULL (``refresh_mode =
FULL`` + FORCE, ``--full-repeat`` times; not ``daily_pct``) for context. The report
compares the medians of the timed refreshes: SF10 / SF1, target <= 1.5.

Usage: ``nice -n 5 .venv/bin/python bench/bench_scale.py [--sf 1 10] [--data data/tpch]
[--repeat 3] [--rows 6000] [--full-repeat 1] [--profile FILE] [--no-write] [--report-only]``;
each scale's figures are saved as ``<data>/bench_scale_sf<N>.json`` (``--report-only``
reports those of the last run without running); ``--profile``
writes cProfile stats of the timed refreshes to ``FILE.sf<N>`` (and prints the top
functions). Appends the report under "## Cost as the table grows" in
``bench/RESULTS.md``. Exit status 1 when an MV differs from DuckDB's result or a refresh
failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_iceberg_pct import _days_after  # noqa: E402 (bench/ is put on the path above)
from bench_tpch_refresh import _technique  # noqa: E402
from results import git_commit, publish, timed, today, verdict  # noqa: E402

SECTION = "## Cost as the table grows"
BATCH_ROWS = 6_000_000
CHANGED_DAY = dt.date(1995, 6, 15)
WARMUP_DAY = dt.date(1993, 1, 15)
BASE_KEY = 10**10
"""Order keys of the appended rows start here (above every generated key)."""
DAILY = """
SELECT l_shipdate, l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       count(*) AS count_order
FROM lineitem
GROUP BY l_shipdate, l_returnflag, l_linestatus
"""
MVS = {
    "daily": ("PARTITION BY l_shipdate", ("l_shipdate", "l_returnflag", "l_linestatus"), "AUTO"),
    "daily_pct": ("PARTITION BY l_shipdate", ("l_shipdate", "l_returnflag", "l_linestatus"), "PCT"),
    "q1": ("", ("l_returnflag", "l_linestatus"), "AUTO"),
}
"""MV -> (its PARTITION BY clause, its group columns, its ``refresh_mode``)."""


def _queries() -> dict[str, str]:
    """MV -> its query over bare ``lineitem`` (Spark SQL and DuckDB SQL)."""
    from sparkmv.demo.tpch_queries import TPCH_QUERIES

    return {"daily": DAILY.strip(), "daily_pct": DAILY.strip(), "q1": TPCH_QUERIES["q1"].strip()}


def write_lake(uri: str, warehouse: Path, source: Path, spill: Path) -> tuple[Any, float]:
    """Create ``tpch.lineitem`` partitioned by ``day(l_shipdate)`` in the pyiceberg SQL catalog
    at ``uri`` and append ``source`` (Parquet) sorted by ``l_shipdate`` in appends of
    :data:`BATCH_ROWS` rows (DuckDB sorts, spilling under ``spill``; Arrow batches stream,
    never the whole table in memory); returns (the pyiceberg table, seconds)."""
    import duckdb
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import DayTransform

    started = time.perf_counter()
    warehouse.mkdir(parents=True, exist_ok=True)
    spill.mkdir(parents=True, exist_ok=True)
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    cat.create_namespace_if_not_exists("tpch")
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '3GB'; SET threads = 2; SET temp_directory = '{spill}'")
    reader = con.sql(f"SELECT * FROM read_parquet('{source}') ORDER BY l_shipdate").to_arrow_reader(BATCH_ROWS)
    schema = pa.schema(
        [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in reader.schema]
    )
    table = cat.create_table(("tpch", "lineitem"), schema=schema)
    with table.update_spec() as spec:
        spec.add_field("l_shipdate", DayTransform(), "l_shipdate_day")
    for batch in reader:
        table.append(pa.Table.from_batches([batch]).cast(schema))
    con.close()
    return table, time.perf_counter() - started


def change_rows(schema: Any, day: dt.date, rows: int, seed: int) -> Any:
    """``rows`` lineitem rows shipped on ``day``, the same for a given ``seed`` at every scale
    (order keys from :data:`BASE_KEY` + ``seed * rows``), as an Arrow table of ``schema``."""
    import pyarrow as pa

    rnd = random.Random(seed)

    def cents(low: int, high: int) -> list[Decimal]:
        return [Decimal(rnd.randint(low, high)) / 100 for _ in range(rows)]

    values: dict[str, list[Any]] = {
        "l_orderkey": [BASE_KEY + seed * rows + i // 4 for i in range(rows)],
        "l_partkey": [rnd.randint(1, 200_000) for _ in range(rows)],
        "l_suppkey": [rnd.randint(1, 10_000) for _ in range(rows)],
        "l_linenumber": [i % 4 + 1 for i in range(rows)],
        "l_quantity": [Decimal(rnd.randint(1, 50)) for _ in range(rows)],
        "l_extendedprice": cents(90_000, 10_000_000),
        "l_discount": cents(0, 10),
        "l_tax": cents(0, 8),
        "l_returnflag": [rnd.choice("ANR") for _ in range(rows)],
        "l_linestatus": [rnd.choice("FO") for _ in range(rows)],
        "l_shipdate": [day] * rows,
        "l_commitdate": [day + dt.timedelta(days=30)] * rows,
        "l_receiptdate": [day + dt.timedelta(days=7)] * rows,
        "l_shipinstruct": ["DELIVER IN PERSON"] * rows,
        "l_shipmode": ["TRUCK"] * rows,
        "l_comment": [f"bench_scale {seed}"] * rows,
    }
    return pa.Table.from_pydict({f.name: values[f.name] for f in schema}, schema=schema)


def _append(table: Any, day: dt.date, rows: int, seed: int) -> None:
    table.refresh()
    table.append(change_rows(table.schema().as_arrow(), day, rows, seed))


def _round(client: Any, table: Any, day: dt.date, rows: int, seed: int, profiler: Any = None) -> dict[str, Any]:
    """One change (``rows`` rows appended to ``day``) and an AUTO refresh of each MV:
    MV -> {technique, seconds, partitions, rows_written, bytes_read}."""
    _append(table, day, rows, seed)
    out = {}
    for mv in MVS:
        if profiler is not None:
            profiler.enable()
        run, seconds = timed(lambda mv=mv: client.refresh(mv))
        if profiler is not None:
            profiler.disable()
        out[mv] = {
            "technique": _technique(run),
            "seconds": seconds,
            "partitions": run.partitions_done,
            "rows_written": run.rows_written,
            "bytes_read": run.bytes_read,
            "ok": run.state == "SUCCESS",
        }
    return out


def _numbers_close(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)
    return bool(a == b)


def check(client: Any, table: Any, queries: dict[str, str]) -> dict[str, bool]:
    """MV -> equal to its query computed by DuckDB over the table's current data files
    (append-only: no delete files), rows matched by their group columns."""
    import duckdb

    table.refresh()
    files = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute(f"CREATE VIEW lineitem AS SELECT * FROM read_parquet({files!r})")
    out = {}
    for mv, query in queries.items():
        keys = len(MVS[mv][1])
        cursor = con.execute(query)
        names = [d[0] for d in cursor.description]
        want = {tuple(r[:keys]): r[keys:] for r in cursor.fetchall()}
        got = {tuple(r[:keys]): tuple(r[keys:]) for r in client.table(mv).select(*names).collect()}
        out[mv] = want.keys() == got.keys() and all(
            all(_numbers_close(a, b) for a, b in zip(want[k], got[k], strict=True)) for k in want
        )
    con.close()
    return out


def _full(client: Any, repeat: int) -> dict[str, list[float]]:
    """MV -> seconds of ``repeat`` FULL recomputes (``refresh_mode = FULL`` + FORCE)."""
    out: dict[str, list[float]] = {}
    for mv in (m for m in MVS if MVS[m][2] == "AUTO"):
        client.sql(f"ALTER MATERIALIZED VIEW {mv} SET PROPERTIES ('refresh_mode' = 'FULL')")
        for _ in range(repeat):
            run, seconds = timed(lambda mv=mv: client.refresh(mv, force=True))
            assert (run.state, run.mode) == ("SUCCESS", "FULL"), run
            out.setdefault(mv, []).append(seconds)
    return out


def _create(client: Any, queries: dict[str, str], uri: str, warehouse: Path) -> dict[str, float]:
    """Register the lake and create the MVs (FULL); MV -> seconds."""
    from sparkmv.demo.tpch_queries import qualified

    client.execute(
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )
    out = {}
    for mv, query in queries.items():
        result, seconds = timed(
            lambda mv=mv, query=query: client.execute(
                f"CREATE MATERIALIZED VIEW {mv} {MVS[mv][0]} AS {qualified(query, 'lake.tpch')}"
            )
        )
        assert result.run is not None and result.run.state == "SUCCESS", result.run
        out[mv] = seconds
        if MVS[mv][2] != "AUTO":
            client.sql(f"ALTER MATERIALIZED VIEW {mv} SET PROPERTIES ('refresh_mode' = '{MVS[mv][2]}')")
    return out


def run_scale(
    sf: float, data: Path, work: Path, repeat: int, rows: int, full_repeat: int, profile: str | None
) -> dict[str, Any]:
    """Run every step for one scale factor in ``work`` (a fresh directory); the figures."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import generate_tables
    from sparkmv.storage.spark import get_spark

    raw, gen_s = timed(lambda: generate_tables(data / f"sf{sf:g}" / "tables", sf, ("lineitem",)))
    source = next(iter(raw["lineitem"].glob("*.parquet")))
    uri, warehouse = f"sqlite:///{work}/lake.db", work / "lakewh"
    table, write_s = write_lake(uri, warehouse, source, work / "spill")
    shutil.rmtree(work / "spill", ignore_errors=True)
    files = list(table.scan().plan_files())
    figures: dict[str, Any] = {
        "sf": sf, "gen_s": gen_s, "source_bytes": source.stat().st_size, "write_s": write_s,
        "rows": sum(t.file.record_count for t in files), "files": len(files),
        "data_bytes": sum(t.file.file_size_in_bytes for t in files),
        "days": len({t.file.partition[0] for t in files}), "free_bytes": shutil.disk_usage(work).free,
        "change_rows": rows,
    }  # fmt: skip
    spark = get_spark("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    client = Client(home=work / "home", spark=spark)
    queries = _queries()
    try:
        figures["create_s"] = _create(client, queries, uri, warehouse)
        figures["warmup"] = _round(client, table, WARMUP_DAY, rows, seed=0)
        figures["load_before"] = os.getloadavg()
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
        days = _days_after(CHANGED_DAY, repeat)
        figures["rounds"] = [_round(client, table, day, rows, i + 1, profiler) for i, day in enumerate(days)]
        figures["load_after"] = os.getloadavg()
        figures["correct"] = check(client, table, queries)
        figures["full_s"] = _full(client, full_repeat)
        if profiler is not None and profile:
            _dump_profile(profiler, f"{profile}.sf{sf:g}")
    finally:
        client.close()
    return figures


def _dump_profile(profiler: Any, path: str) -> None:
    import pstats

    profiler.dump_stats(path)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)


def _median(figures: dict[str, Any], mv: str) -> float:
    return statistics.median(r[mv]["seconds"] for r in figures["rounds"])


def report(by_sf: list[dict[str, Any]]) -> str:
    """The RESULTS.md entry for the figures of each scale (smallest first)."""
    small, big = by_sf[0], by_sf[-1]
    scales = " ".join(f"{f['sf']:g}" for f in by_sf)
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_scale.py --sf {scales}`",
        "",
        f"Machine: nproc {os.cpu_count()} ({platform.system()} {platform.machine()}), shared with other "
        "Spark and test runs; Spark `local[2]`, `spark.sql.shuffle.partitions = 2`, one process (fresh JVM) per "
        "scale. 1-minute load average before / after the timed rounds: "
        + "; ".join(f"SF{f['sf']:g} {f['load_before'][0]:.1f} / {f['load_after'][0]:.1f}" for f in by_sf)
        + ".",
        "Data: TPC-H `lineitem` by tpchgen-cli (only that table), sorted by `l_shipdate` (DuckDB) and written by "
        "pyiceberg into an external SQL catalog, partitioned by `day(l_shipdate)`, in appends of "
        f"{BATCH_ROWS:,} rows: "
        + "; ".join(
            f"SF{f['sf']:g} {f['rows']:,} rows, {f['days']:,} days, {f['files']:,} data files, "
            f"{f['data_bytes'] / 1e9:.2f} GB of Parquet (tpchgen-cli file {f['source_bytes'] / 1e9:.2f} GB"
            f"{', generated in ' + format(f['gen_s'], '.0f') + ' s' if f['gen_s'] > 1 else ', cached'}; "
            f"lake written in {f['write_s']:.0f} s; {f['free_bytes'] / 1e9:.0f} GB free after)"
            for f in by_sf
        )
        + ".",
        f"Change per round: {len(small['rounds'])} timed rounds (after one untimed), each an outside pyiceberg "
        f"append of the same {small['change_rows']:,} rows to one day (`{CHANGED_DAY}`, then the same "
        "day of the next months); then a refresh of each MV. MV `daily`: Q1-like aggregate per "
        "`l_shipdate, l_returnflag, l_linestatus`, `PARTITION BY l_shipdate`, AUTO; `daily_pct`: the same with "
        "`refresh_mode = PCT`; MV `q1`: TPC-H Q1, unpartitioned, AUTO. FULL: `refresh_mode = FULL` + FORCE, "
        "after the rounds.",
        "",
        f"| MV | technique | SF{small['sf']:g} s (median; runs) | SF{big['sf']:g} s (median; runs) | "
        f"SF{big['sf']:g} / SF{small['sf']:g} | read KiB SF{small['sf']:g} / SF{big['sf']:g} | "
        f"FULL SF{small['sf']:g} s | FULL SF{big['sf']:g} s | exact |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for mv in MVS:
        ratio = _median(big, mv) / _median(small, mv)
        lines.append(
            f"| {mv} | {_techniques(by_sf, mv)} | {_cell(small, mv)} | {_cell(big, mv)} | **{ratio:.2f}** | "
            f"{_read_kib(small, mv)} / {_read_kib(big, mv)} | "
            f"{_full_cell(small, mv)} | {_full_cell(big, mv)} | "
            f"{'yes' if all(f['correct'][mv] for f in by_sf) else '**NO**'} |"
        )
    return "\n".join([*lines, ""])


def _read_kib(figures: dict[str, Any], mv: str) -> str:
    """The median bytes the timed refreshes of ``mv`` read, in KiB."""
    return f"{statistics.median(r[mv]['bytes_read'] or 0 for r in figures['rounds']) / 1024:.0f}"


def _full_cell(figures: dict[str, Any], mv: str) -> str:
    runs = figures["full_s"].get(mv)
    return f"{statistics.median(runs):.1f}" if runs else "-"


def _cell(figures: dict[str, Any], mv: str) -> str:
    runs = ", ".join(f"{r[mv]['seconds']:.2f}" for r in figures["rounds"])
    return f"{_median(figures, mv):.2f} ({runs})"


def _techniques(by_sf: list[dict[str, Any]], mv: str) -> str:
    found = sorted({r[mv]["technique"] for f in by_sf for r in f["rounds"]})
    return ", ".join(found)


def ok(by_sf: list[dict[str, Any]]) -> bool:
    """Every refresh succeeded and every MV matched DuckDB at every scale."""
    refreshed = all(r[mv]["ok"] for f in by_sf for r in f["rounds"] for mv in MVS)
    return refreshed and all(all(f["correct"].values()) for f in by_sf)


def _child(args: argparse.Namespace) -> int:
    """One scale in this process; its figures as JSON to ``args.out``."""
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-scale-", dir=args.data) as tmp:
        figures = run_scale(args.child, args.data, Path(tmp), args.repeat, args.rows, args.full_repeat, args.profile)
    Path(args.out).write_text(json.dumps(figures, default=str))
    return 0


def headline(by_sf: list[dict[str, Any]]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    small, big = by_sf[0], by_sf[-1]
    ratios = [_median(big, mv) / _median(small, mv) for mv in MVS]
    return (
        f"refresh time SF{big['sf']:g} / SF{small['sf']:g} {min(ratios):.2f}-{max(ratios):.2f} for the same change "
        f"(target <= 1.5: {verdict(max(ratios) <= 1.5)})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run each scale in its own process, print the report and (unless ``--no-write``)
    record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sf", type=float, nargs="+", default=[1.0, 10.0], help="scale factors (smallest first)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch", help="generated tables are cached here")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per scale (median)")
    parser.add_argument("--rows", type=int, default=6000, help="rows appended to one day per round")
    parser.add_argument("--full-repeat", type=int, default=1, help="FULL recomputes per MV per scale (context)")
    parser.add_argument("--profile", help="cProfile the timed refreshes into FILE.sf<N>")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument("--report-only", action="store_true", help="report the figures saved by the last run")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.data = args.data.resolve()
    args.data.mkdir(parents=True, exist_ok=True)
    if args.child is not None:
        return _child(args)
    by_sf = []
    for sf in args.sf:
        out = args.data / f"bench_scale_sf{sf:g}.json"
        passed = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--report-only"]
        command = [sys.executable, __file__, *_without_sf(passed), "--child", str(sf), "--out", str(out)]
        code = 0 if args.report_only else subprocess.call(command)
        if code != 0:
            print(f"SF {sf:g} failed (exit {code})", flush=True)
            return 1
        by_sf.append(json.loads(out.read_text()))
    entry = report(by_sf)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(by_sf), today(), git_commit(), script="bench/bench_scale.py")
    return 0 if ok(by_sf) else 1


def _without_sf(argv: list[str]) -> list[str]:
    """``argv`` without ``--sf`` and its values."""
    out, skipping = [], False
    for a in argv:
        if a == "--sf":
            skipping = True
        elif skipping and not a.startswith("--"):
            continue
        else:
            skipping = False
            out.append(a)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
