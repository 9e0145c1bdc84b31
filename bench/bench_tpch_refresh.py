"""TPC-H's 22 queries kept fresh through RF1 and RF2; not a test.

The eight TPC-H tables at ``--sf`` (``tpchgen-cli``, cached under ``--data``) are written by
pyiceberg, as an outside writer would, into an external Iceberg SQL catalog (SQLite) in a
temp directory: ``lake.tpch.lineitem`` partitioned by ``month(l_shipdate)``,
``lake.tpch.orders`` by ``month(o_orderdate)``, the other six unpartitioned. sparkmv reads
it as the external catalog ``lake``. One warm process, one SparkSession ``local[2]``:

1. each query of :data:`sparkmv.demo.tpch_queries.TPCH_QUERIES` becomes an MV ``q1`` ..
   ``q22`` (``refresh_mode`` AUTO, the default; unpartitioned), built by its CREATE (FULL);
2. RF1: 0.1 % new orders (copies of random orders with new keys above the largest) and
   their lineitem rows, appended by pyiceberg to ``orders`` and ``lineitem``;
3. RF2: 0.1 % of the original orders and their lineitem rows deleted, merge-on-read by
   default (one position delete file per partition, as Spark writes them with
   ``write.delete.mode = merge-on-read``: :mod:`sparkmv.demo.iceberg_deletes`), or with
   ``--rf2 copy-on-write`` by pyiceberg's ``Table.delete`` (every data file holding a
   deleted row rewritten: at 0.1 % of orders, every month of ``lineitem``).

After each step every MV is refreshed (AUTO: the technique it chose is the run's mode, from
its ``task_runs`` row; SKIP when nothing it reads changed), compared with its query computed
by DuckDB (:mod:`sparkmv.demo.oracle`), then refreshed again with ``FORCE`` (a FULL
recompute of the same MV over the same snapshots: the yardstick), then its
``refresh_mode = 'INCREMENTAL'`` twin (INCREMENTAL forced). The FULL run follows the AUTO one,
so it finds the files in the page cache: the comparison leans towards FULL. Spark's cache of
generated code is emptied before each timed refresh (``--warm-codegen`` keeps it), so none
reuses the classes an earlier one compiled (:func:`forget_generated_code`).

Usage: ``nice -n 10 .venv/bin/python bench/bench_tpch_refresh.py [--sf 1] [--data data/tpch]
[--no-write]``; prints the report and appends it under "## TPC-H's 22 queries kept fresh
through RF1 and RF2" in ``bench/RESULTS.md``. Exit status 1 when an MV differs
from DuckDB's result or a refresh failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
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

from results import git_commit, publish, timed, today  # noqa: E402 (bench/ is put on the path above)

SECTION = "## TPC-H's 22 queries kept fresh through RF1 and RF2"
SHARE = 0.001
"""RF1 adds and RF2 deletes this share of ``orders`` (TPC-H: SF * 1,500 orders)."""
MONTHLY = {"lineitem": "l_shipdate", "orders": "o_orderdate"}
BATCH_ROWS = 2_000_000
KEPT = ("INCREMENTAL", "PCT", "SKIP")
"""Techniques that are not a full recompute."""


def _arrow(directory: Path) -> Any:
    """The Parquet files of ``directory`` as one Arrow table: string_view columns as strings
    (pyiceberg's partitioned writer filters them), every field nullable, no field ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = pq.read_table(directory)
    fields = [pa.field(f.name, pa.string() if pa.types.is_string_view(f.type) else f.type) for f in data.schema]
    return data.cast(pa.schema(fields))


def make_lake(uri: str, warehouse: Path, raw: dict[str, Path]) -> tuple[Any, dict[str, int], float]:
    """Create ``tpch.<table>`` in the pyiceberg SQL catalog at ``uri`` and append each
    generated table (``lineitem`` / ``orders`` by month of their date, sorted by it, in
    batches of :data:`BATCH_ROWS`); returns (the catalog, row counts, seconds)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.transforms import MonthTransform

    started = time.perf_counter()
    warehouse.mkdir(parents=True, exist_ok=True)
    cat = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
    cat.create_namespace_if_not_exists("tpch")
    counts = {}
    for name, directory in raw.items():
        rows = _arrow(directory)
        table = cat.create_table(("tpch", name), schema=rows.schema)
        if name in MONTHLY:
            with table.update_spec() as spec:
                spec.add_field(MONTHLY[name], MonthTransform(), f"{MONTHLY[name]}_month")
            rows = rows.sort_by(MONTHLY[name])
        for start in range(0, max(rows.num_rows, 1), BATCH_ROWS):
            table.append(rows.slice(start, BATCH_ROWS))
        counts[name] = rows.num_rows
    return cat, counts, time.perf_counter() - started


def _keys(cat: Any) -> list[int]:
    orders = cat.load_table(("tpch", "orders")).scan(selected_fields=("o_orderkey",)).to_arrow()
    return sorted(orders.column("o_orderkey").to_pylist())


def rf1(cat: Any, rnd: random.Random) -> str:
    """New orders: copies of :data:`SHARE` of the orders, and their lineitem rows, under new
    keys above the largest; appended (one pyiceberg append per table)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import In

    keys = _keys(cat)
    picked = rnd.sample(keys, max(1, round(len(keys) * SHARE)))
    new_keys = pa.array(range(keys[-1] + 1, keys[-1] + 1 + len(picked)), pa.int64())
    added = 0
    for name, column in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        table = cat.load_table(("tpch", name))
        rows = table.scan(row_filter=In(column, picked)).to_arrow()
        index = rows.schema.get_field_index(column)
        mapped = pc.take(new_keys, pc.index_in(rows.column(column), value_set=pa.array(picked, pa.int64())))
        rows = rows.set_column(index, rows.schema.field(index), mapped)
        table.append(rows)
        added += rows.num_rows
    return f"RF1: {len(picked):,} new orders with their lineitem rows ({added:,} rows appended)"


def rf2(cat: Any, rnd: random.Random, original_max: int, mode: str = "merge-on-read") -> str:
    """Delete :data:`SHARE` of the original orders (keys up to ``original_max``) and their
    lineitem rows, ``mode`` ``merge-on-read`` (position delete files) or ``copy-on-write``
    (pyiceberg's ``Table.delete``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.expressions import In

    from sparkmv.demo.iceberg_deletes import delete_rows

    keys = [k for k in _keys(cat) if k <= original_max]
    picked = rnd.sample(keys, max(1, round(len(keys) * SHARE)))
    values = pa.array(picked, pa.int64())
    for name, column in (("orders", "o_orderkey"), ("lineitem", "l_orderkey")):
        table = cat.load_table(("tpch", name))
        if mode == "copy-on-write":
            table.delete(In(column, picked))
        else:
            delete_rows(table, lambda t, c=column: pc.is_in(t.column(c), value_set=values), [column], True)
    return f"RF2: {len(picked):,} orders and their lineitem rows deleted ({mode})"


def _technique(run: Any) -> str:
    if run.state == "SKIPPED":
        return "SKIP"
    return str(run.mode) if run.state == "SUCCESS" else f"{run.state} ({run.mode})"


def _why_not_incremental(run: Any) -> str:
    """Why an AUTO run did not refresh incrementally ('' when it did or skipped): the
    INCREMENTAL candidate's reason (with its estimate against the chosen one's when it was
    eligible but dearer), shortened by :func:`_short`."""
    if run.mode == "INCREMENTAL" or run.state == "SKIPPED":
        return ""
    chosen = next((c for c in run.candidates if c["chosen"]), None)
    for c in run.candidates:
        if c["mode"] == "INCREMENTAL" and c["eligible"] and chosen is not None:
            return _short(
                f"eligible but dearer (estimate {_mib(c['estimate_bytes'])} vs {chosen['mode']} "
                f"{_mib(chosen['estimate_bytes'])}): {c['reason']}"
            )
        if c["mode"] == "INCREMENTAL":
            return _short(str(c["reason"]))
    return _short(str(run.reason or run.error or ""))


def _mib(size: int | None, unit: str = " MiB") -> str:
    return "-" if size is None else f"{size / 2**20:.1f}{unit}"


def _short(reason: str, width: int = 90) -> str:
    """``reason`` with a long SQL construct before "is not incrementally maintainable" cut
    to ``width`` characters, and the whole cut to 400."""
    marker = " is not incrementally maintainable: "
    if marker in reason:
        construct, why = reason.split(marker, 1)
        if len(construct) > width:
            construct = construct[:width] + "…"
        reason = f"`{construct}`{marker}{why}"
    return reason if len(reason) <= 400 else reason[:400] + "…"


def _check(client: Any, mv: str, query: str) -> tuple[bool, int]:
    """(MV equal to ``query`` computed by DuckDB, the MV's rows); a difference is printed."""
    from sparkmv.demo.oracle import compare_mv
    from sparkmv.errors import SparkMvError

    try:
        cmp = compare_mv(client, mv, query)
    except SparkMvError as exc:
        print(f"  {mv}: the oracle failed: {exc}", flush=True)
        return False, -1
    if not cmp.ok:
        print(f"  {mv} differs from DuckDB:\n{cmp.describe()}", flush=True)
    return cmp.ok, cmp.rows


def create_all(client: Any, queries: dict[str, str]) -> list[dict[str, Any]]:
    """Create every MV (its first build is a FULL refresh) and check it."""
    out = []
    for mv, query in queries.items():
        result, seconds = timed(lambda mv=mv, query=query: client.execute(f"CREATE MATERIALIZED VIEW {mv} AS {query}"))
        run = result.run
        ok, rows = _check(client, mv, query) if run is not None and run.state == "SUCCESS" else (False, 0)
        state = "SUCCESS" if run is None else run.state
        print(f"  create {mv}: {state} {seconds:.2f} s, {rows} rows, exact {ok}", flush=True)
        if run is not None and run.error:
            print(f"    error: {run.error}", flush=True)
        out.append({"mv": mv, "seconds": seconds, "rows": rows, "exact": ok, "state": state})
    return out


def create_twins(client: Any, queries: dict[str, str]) -> set[str]:
    """For each query incremental refresh can maintain, a twin MV ``<mv>_inc`` with
    ``refresh_mode = 'INCREMENTAL'`` (strict: never falls back), so each step also measures
    INCREMENTAL forced; returns the MVs with a twin."""
    from sparkmv.analysis.incremental import analyze_incremental
    from sparkmv.analysis.query import parse_query

    twins = set()
    for mv, query in queries.items():
        if analyze_incremental(parse_query(query)).maintainable:
            client.execute(f"CREATE MATERIALIZED VIEW {mv}_inc PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}")
            twins.add(mv)
    return twins


def _forced_incremental(client: Any, mv: str, query: str, twins: set[str]) -> tuple[float | None, bool]:
    """Seconds of the twin's strict INCREMENTAL refresh (None without a twin) and whether it
    ended SUCCESS (or SKIPPED) with its rows equal to DuckDB's."""
    if mv not in twins:
        return None, True
    run, seconds = timed(lambda: client.refresh(f"{mv}_inc"))
    exact, _rows = _check(client, f"{mv}_inc", query)
    return seconds, exact and run.state in ("SUCCESS", "SKIPPED")


def _auto_right(technique: str, inc: float | None, full: float) -> bool:
    """AUTO was right when it chose the faster of INCREMENTAL and FULL as measured forced
    (within 10 %), or skipped an MV whose inputs did not change."""
    if technique == "SKIP" or inc is None:
        return technique != "INCREMENTAL"
    faster = "INCREMENTAL" if inc < full else "FULL"
    return technique == faster or abs(inc - full) <= 0.1 * min(inc, full) or (technique == "PCT" and full <= inc)


def forget_generated_code(spark: Any) -> None:
    """Empty Spark's cache of generated code (``CodeGenerator``'s, reached by reflection: it
    has no API), so the next refresh compiles its own, as the first refresh of a query shape
    in a process does. Without it the refresh measured second reuses the classes the first
    compiled and the JIT already optimized: the same FULL refresh of Q22 at SF 1 took 2.35 s
    first and 1.40 s right after (2026-11-29), which favoured whichever ran second."""
    field = spark._jvm.java.lang.Class.forName(
        "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator$"
    ).getDeclaredField("cache")
    field.setAccessible(True)
    field.get(None).invalidateAll()


def refresh_all(
    client: Any, queries: dict[str, str], twins: set[str] | None = None, reset: Any = None
) -> list[dict[str, Any]]:
    """Refresh every MV (AUTO), check it against DuckDB, then refresh it FULL (FORCE), and
    its INCREMENTAL twin when it has one; ``reset()`` (if given) runs before each timed
    refresh."""
    reset = reset or (lambda: None)
    out = []
    for mv, query in queries.items():
        reset()
        run, seconds = timed(lambda mv=mv: client.refresh(mv))
        ok, rows = _check(client, mv, query)
        reset()
        full, full_seconds = timed(lambda mv=mv: client.refresh(mv, force=True))
        reset()
        inc_seconds, inc_ok = _forced_incremental(client, mv, query, twins or set())
        figures = {
            "mv": mv,
            "technique": _technique(run),
            "seconds": seconds,
            "rows": rows,
            "written": run.rows_written,
            "exact": ok and run.state in ("SUCCESS", "SKIPPED"),
            "full_seconds": full_seconds,
            "full_ok": (full.state, full.mode) == ("SUCCESS", "FULL"),
            "inc_seconds": inc_seconds,
            "inc_ok": inc_ok,
            "auto_right": _auto_right(_technique(run), inc_seconds, full_seconds),
            "why": _why_not_incremental(run),
            "estimate_bytes": run.estimate_bytes,
            "bytes_read": run.bytes_read,
            "estimates": {c["mode"]: c["estimate_bytes"] for c in run.candidates if c["eligible"]},
        }
        print(
            f"  {mv}: {figures['technique']} {seconds:.2f} s, {rows} rows, exact {ok}; FULL {full_seconds:.2f} s "
            f"({full.state} {full.mode}); INCREMENTAL forced "
            f"{'-' if inc_seconds is None else f'{inc_seconds:.2f} s (exact {inc_ok})'}; load {os.getloadavg()[0]:.1f}"
            + (f"\n    not incremental: {figures['why']}" if figures["why"] else ""),
            flush=True,
        )
        out.append(figures)
    return out


def lake_client(sf: float, data: Path, work: Path) -> tuple[Any, dict[str, int], float, Any]:
    """TPC-H at ``sf`` in the external catalog ``lake`` under ``work`` and a client (its own
    SparkSession ``local[2]``) that reads it: (the pyiceberg catalog, row counts, seconds to
    write the lake, the client)."""
    from sparkmv.demo.data import generate_tables
    from sparkmv.demo.tpch_queries import TPCH_TABLES

    raw = generate_tables(data / f"sf{sf:g}" / "tables", sf, TPCH_TABLES)
    uri, warehouse = f"sqlite:///{work}/lake.db", work / "lakewh"
    cat, counts, write_s = make_lake(uri, warehouse, raw)
    return cat, counts, write_s, lake_reader(work, uri, warehouse)


def lake_reader(work: Path, uri: str, warehouse: Path, conf: dict[str, str] | None = None) -> Any:
    """A client in ``work`` (its own SparkSession ``local[2]``, with ``conf`` over the
    bench's) reading the pyiceberg SQL catalog at ``uri`` as the external catalog ``lake``."""
    from sparkmv.client.client import Client
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2", **(conf or {})})
    spark.sparkContext.setLogLevel("ERROR")
    client = Client(home=work / "home", spark=spark)
    client.execute(
        'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
        f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
    )
    return client


def run(
    sf: float,
    data: Path,
    work: Path,
    only: list[str] | None = None,
    rf2_mode: str = "merge-on-read",
    warm_codegen: bool = False,
) -> dict[str, Any]:
    """Run the benchmark in ``work`` (a fresh directory); returns the figures. Each timed
    refresh compiles its own generated code (:func:`forget_generated_code`) unless
    ``warm_codegen``."""
    from sparkmv.demo.tpch_queries import TPCH_QUERIES, qualified

    cat, counts, write_s, client = lake_client(sf, data, work)
    spark = client.runtime.spark
    figures: dict[str, Any] = {
        "sf": sf,
        "rf2": rf2_mode,
        "rows": counts,
        "write_s": write_s,
        "load_before": os.getloadavg(),
        "codegen": "warm" if warm_codegen else "cold",
    }
    try:
        queries = {mv: qualified(q, "lake.tpch") for mv, q in TPCH_QUERIES.items() if not only or mv in only}
        print(f"TPC-H SF {sf:g} in the lake ({write_s:.0f} s); creating the MVs", flush=True)
        figures["create"] = create_all(client, queries)
        created = {c["mv"] for c in figures["create"] if c["state"] == "SUCCESS"}
        queries = {mv: q for mv, q in queries.items() if mv in created}
        twins = create_twins(client, queries)
        rnd, original_max = random.Random(24), _keys(cat)[-1]
        figures["steps"] = []
        for step in (lambda: rf1(cat, rnd), lambda: rf2(cat, rnd, original_max, rf2_mode)):
            what = step()
            print(what, flush=True)
            reset = None if warm_codegen else (lambda: forget_generated_code(spark))
            figures["steps"].append((what, refresh_all(client, queries, twins, reset)))
    finally:
        client.close()
    figures["load_after"] = os.getloadavg()
    figures["data_bytes"] = sum(f.stat().st_size for f in (work / "lakewh").rglob("*.parquet"))
    return figures


def _step_table(what: str, rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"**{what}**",
        "",
        "| query | technique (AUTO) | seconds | MV rows | FULL seconds | FULL / AUTO | INCREMENTAL forced seconds "
        "| AUTO right | estimate / read MiB | exact |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        ratio = r["full_seconds"] / max(r["seconds"], 1e-9)
        full = f"{r['full_seconds']:.2f}" + ("" if r["full_ok"] else " (not FULL!)")
        inc = "-" if r.get("inc_seconds") is None else f"{r['inc_seconds']:.2f}"
        exact = r["exact"] and r.get("inc_ok", True)
        lines.append(
            f"| {r['mv']} | {r['technique']} | {r['seconds']:.2f} | {r['rows']:,} | {full} | {ratio:.2f}x | {inc} | "
            f"{'yes' if r.get('auto_right') else 'no'} | {_mib(r.get('estimate_bytes'), '')} / "
            f"{_mib(r.get('bytes_read'), '')} | "
            f"{'yes' if exact else '**NO**'} |"
        )
    kept = [r for r in rows if r["technique"] in KEPT]
    counts = {t: sum(r["technique"] == t for r in rows) for t in KEPT}
    auto_s, full_s = sum(r["seconds"] for r in rows), sum(r["full_seconds"] for r in rows)
    slower = [r["mv"] for r in rows if r["seconds"] > 1.1 * r["full_seconds"]]
    lines += [
        "",
        f"Without full recompute (INCREMENTAL, PCT or SKIP): **{len(kept)} of {len(rows)}** "
        f"({', '.join(f'{t} {n}' for t, n in counts.items())}). Sum of AUTO refreshes "
        f"**{auto_s:.1f} s** vs sum of FULL **{full_s:.1f} s** ({full_s / max(auto_s, 1e-9):.2f}x). "
        f"More than 10 % slower than their FULL: {len(slower)} ({', '.join(slower) or 'none'}). "
        f"Exact: {sum(r['exact'] and r.get('inc_ok', True) for r in rows)} of {len(rows)}. AUTO chose the faster "
        f"technique (as measured forced) for {sum(bool(r.get('auto_right')) for r in rows)} of {len(rows)}.",
        "",
    ]
    return lines


def report(figures: dict[str, Any]) -> str:
    """The RESULTS.md entry for ``figures``."""
    sf = figures["sf"]
    rows = ", ".join(f"{k} {v:,}" for k, v in figures["rows"].items())
    before, after = figures["load_before"], figures["load_after"]
    creates = figures["create"]
    lines = [
        f"### {dt.date.today().isoformat()}: `bench/bench_tpch_refresh.py --sf {sf:g} --rf2 {figures['rf2']}`",
        "",
        f"Machine: nproc {os.cpu_count()} ({platform.system()} {platform.machine()}); "
        f"load average (1/5/15 min) {before[0]:.1f}/{before[1]:.1f}/{before[2]:.1f} before, "
        f"{after[0]:.1f}/{after[1]:.1f}/{after[2]:.1f} after. Spark `local[2]`, `spark.sql.shuffle.partitions = 2`, "
        f"one process. Data: TPC-H SF {sf:g} by tpchgen-cli in an external pyiceberg SQL catalog ({rows}; "
        f"`lineitem` by `month(l_shipdate)`, `orders` by `month(o_orderdate)`; "
        f"{figures['data_bytes'] / 1e6:.0f} MB of Parquet, written in {figures['write_s']:.0f} s). 22 MVs, "
        "AUTO, unpartitioned. Each step is followed by an AUTO refresh of every MV (timed), DuckDB's check, "
        "then `REFRESH ... FORCE` (FULL, timed; it runs second, on a warm page cache), then the "
        "`refresh_mode = 'INCREMENTAL'` twin (timed). "
        + (
            "Each timed refresh starts with Spark's cache of generated code emptied: each compiles its own."
            if figures.get("codegen") == "cold"
            else "Spark's cache of generated code is kept: a refresh reuses the code an earlier one compiled."
        ),
        "",
        f"Creates (first build, FULL): {sum(c['seconds'] for c in creates):.1f} s in all; "
        f"{sum(c['state'] == 'SUCCESS' for c in creates)} of {len(creates)} built, "
        f"{sum(c['exact'] for c in creates)} exact"
        + "".join(f"; {c['mv']} {c['state']}" for c in creates if c["state"] != "SUCCESS")
        + ".",
        "",
    ]
    for what, step in figures["steps"]:
        lines += _step_table(what, step)
    return "\n".join(lines + _reasons(figures["steps"]))


def _reasons(steps: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """The list of why each MV was not refreshed incrementally, per step (one line when the
    steps agree)."""
    by_mv: dict[str, dict[str, list[str]]] = {}
    for what, step in steps:
        for r in step:
            if r["why"]:
                by_mv.setdefault(r["mv"], {}).setdefault(r["why"], []).append(what.split(":")[0])
    if not by_mv:
        return []
    lines = ["Why AUTO did not refresh incrementally (the INCREMENTAL candidate's reason):", ""]
    for mv, reasons in sorted(by_mv.items(), key=lambda item: int(item[0].lstrip("q") or 0)):
        lines += [f"- {mv} ({', '.join(where)}): {why}" for why, where in reasons.items()]
    return [*lines, ""]


def ok(figures: dict[str, Any]) -> bool:
    """Every MV built, every check exact, every FULL a FULL."""
    creates = figures["create"]
    steps = [r for _, step in figures["steps"] for r in step]
    checked = all(r["exact"] and r["full_ok"] and r.get("inc_ok", True) for r in steps)
    return checked and all(c["exact"] for c in creates)


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    parts, right, total = [], 0, 0
    for what, rows in figures["steps"]:
        kept = sum(r["technique"] in KEPT for r in rows)
        auto_s, full_s = sum(r["seconds"] for r in rows), sum(r["full_seconds"] for r in rows)
        parts.append(
            f"{what.split(':')[0]}: {kept} of {len(rows)} not FULL, FULL / AUTO {full_s / max(auto_s, 1e-9):.2f}x"
        )
        right += sum(bool(r.get("auto_right")) for r in rows)
        total += len(rows)
    return "; ".join(parts) + f"; AUTO right {right} of {total} (targets 20 of 22, 5x, 90 %)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report and (unless ``--no-write``) record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (0.01, 0.1, 1, ...)")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch", help="generated tables are cached here")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    parser.add_argument("--queries", help="only these MVs, comma-separated (e.g. q4,q18)")
    parser.add_argument("--figures", type=Path, help="also write the raw figures here as JSON (for calibration)")
    parser.add_argument(
        "--warm-codegen",
        action="store_true",
        help="keep Spark's generated code between the timed refreshes (before 2026-11-29 the benchmark did)",
    )
    parser.add_argument(
        "--rf2", choices=("merge-on-read", "copy-on-write"), default="merge-on-read", help="how RF2 deletes"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-tpch-refresh-") as tmp:
        only = args.queries.split(",") if args.queries else None
        figures = run(args.sf, args.data.resolve(), Path(tmp), only, args.rf2, args.warm_codegen)
    entry = report(figures)
    print(entry)
    if args.figures:
        args.figures.write_text(json.dumps(figures, indent=1, default=str))
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_tpch_refresh.py")
    return 0 if ok(figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
