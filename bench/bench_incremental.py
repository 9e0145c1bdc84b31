"""Incremental refresh benchmark on TPC-H SF1 and SF5; not a test.

One warm process (one SparkSession ``local[2]``), every ratio measured in the same run. Each
round appends one Parquet file of 6,000 rows (0.1 % of SF1 ``lineitem``) to one ship month
(``l_shipmonth=1995-06``) of a bench-private copy of SF1 ``lineitem``, and the same 6,000
rows to the SF5 copy, then refreshes:

1. ``segment_revenue`` (the demo's MV: orders ⋈ lineitem ⋈ customer, partitioned by
   ``o_ordermonth``), ``refresh_mode = AUTO`` (INCREMENTAL chosen; its candidate table is
   recorded), against a twin with ``refresh_mode = PCT`` refreshed after the same append
   (``lineitem`` is not a reference table of the MV's partitions: PCT recomputes every one).
   Target: INCREMENTAL at least 5x faster.
2. Revenue per customer (``lineitem`` ⋈ ``orders``, unpartitioned), ``refresh_mode =
   INCREMENTAL``, against its full recompute (``REFRESH ... FORCE`` of the same MV, FULL).
   Target: at least 10x.
3. A single-table aggregate over ``lineitem`` at SF1 and at SF5 (same 6,000-row append),
   INCREMENTAL and FULL (FORCE) at both. Target: INCREMENTAL at SF5 within 1.5x of SF1 (the
   cost follows the change); FULL grows about 5x.

After each incremental refresh the MV is compared with its query recomputed from scratch
(``exceptAll`` both ways). The time of each incremental refresh is split into phases (pin,
plan, delta + merge, write, commit, catalog) by timing sparkmv's functions from outside
(wrapped for the run; sparkmv's code is unchanged). The shared TPC-H data is never modified:
``lineitem`` is copied first (``orders`` and ``customer`` are read in place).

Usage: ``.venv/bin/python bench/bench_incremental.py [--data data/tpch] [--data-sf5
data/tpch-sf5] [--rounds 2] [--no-write]``; records the run under "## Incremental refresh
after appends" in ``bench/RESULTS.md``. Generates the TPC-H data with ``tpchgen-cli`` when
missing (SF5: several minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from results import git_commit, publish, today, verdict  # noqa: E402 (bench/ is put on the path above)

SECTION = "## Incremental refresh after appends"
CHANGED_MONTH = "1995-06"
APPEND_ROWS = 6_000
QUIET_LOAD = 3.0
CUSTOMER_REVENUE = """
SELECT o_custkey, sum(l_extendedprice * (1 - l_discount)) AS revenue, count(*) AS lines
FROM lineitem JOIN orders ON l_orderkey = o_orderkey
GROUP BY o_custkey
"""
RETURN_STATUS = """
SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, count(*) AS count_order,
       avg(l_discount) AS avg_disc
FROM {lineitem}
GROUP BY l_returnflag, l_linestatus
"""

# (module or class path, attribute, label): sparkmv functions timed from outside; a label
# starting with a space is nested in the one above it.
PHASES = [
    ("sparkmv.refresh.jobs.mv", "pin_for_refresh", "pin base tables (list files)"),
    ("sparkmv.refresh.jobs.mv", "decide", "plan (decide)"),
    ("sparkmv.refresh.incremental.decide", "plan_input", " planner input (lineage, versions)"),
    ("sparkmv.refresh.incremental.decide", "incremental_candidate", " INCREMENTAL candidate (change, estimate)"),
    ("sparkmv.refresh.jobs.incremental", "compute_incremental", "compute (INCREMENTAL)"),
    ("sparkmv.refresh.jobs.incremental", "mv_analysis", " analyze the query (sqlglot)"),
    ("sparkmv.refresh.jobs.incremental", "delta_terms", " delta terms: views over old/new/delta files"),
    ("sparkmv.refresh.jobs.incremental", "_affected", " delta computed + affected MV partitions/files found"),
    ("sparkmv.refresh.jobs.incremental", "write_staged", " merge + write staged files"),
    ("sparkmv.refresh.compute", "compute_chunk", "compute (FULL/PCT chunks)"),
    ("sparkmv.refresh.jobs.incremental", "publish_incremental", "publish (Iceberg commit)"),
    ("sparkmv.refresh.publish", "publish_run", "publish (Iceberg commit)"),
    ("sparkmv.refresh.jobs.mv:MvRefreshJob", "finish_fields", "finish: version map + positions"),
    ("sparkmv.refresh.jobs.mv:MvRefreshJob", "cleanup", "cleanup of staging"),
]
OTHER = "rest: claim, lease, progress rows, run row"


class PhaseTimer:
    """Wall time (seconds) spent in each of :data:`PHASES`, summed per label since the last
    :meth:`take`; installed by wrapping the functions where they are looked up."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.restore: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        for where, attr, label in PHASES:
            module, _, cls = where.partition(":")
            owner: Any = importlib.import_module(module)
            if cls:
                owner = getattr(owner, cls)
            original = getattr(owner, attr)
            wrapped = self._wrap_cm(original, label) if attr == "delta_terms" else self._wrap(original, label)
            self.restore.append((owner, attr, owner.__dict__.get(attr)))
            setattr(owner, attr, wrapped)

    def uninstall(self) -> None:
        for owner, attr, original in reversed(self.restore):
            if original is None:
                delattr(owner, attr)  # it was inherited
            else:
                setattr(owner, attr, original)
        self.restore.clear()

    def _wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.totals[label] += time.perf_counter() - started

        return timed

    def _wrap_cm(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        """A context manager factory: only entering it is timed (the views' creation)."""

        @contextlib.contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            started = time.perf_counter()
            with fn(*args, **kwargs) as value:
                self.totals[label] += time.perf_counter() - started
                yield value

        return timed

    def take(self, wall: float) -> dict[str, float]:
        """The phases since the last call, plus :data:`OTHER`: ``wall`` minus the top-level ones."""
        out = dict(self.totals)
        self.totals.clear()
        out[OTHER] = wall - sum(v for k, v in out.items() if not k.startswith(" "))
        return out


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*.parquet"))


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in path.rglob("*.parquet"))


def _append(lineitem: Path, tag: str) -> int:
    """An outside writer adds one file of :data:`APPEND_ROWS` rows (copies of the month's rows,
    ``l_quantity`` + 1) to :data:`CHANGED_MONTH`; returns the rows added."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    directory = lineitem / f"l_shipmonth={CHANGED_MONTH}"
    source = sorted(directory.glob("part-0*.parquet"))[0]
    rows = pq.read_table(source).slice(0, APPEND_ROWS)
    index = rows.schema.get_field_index("l_quantity")
    bumped = pc.add(rows["l_quantity"], 1).cast(rows.schema.field(index).type)
    rows = rows.set_column(index, rows.schema.field(index), bumped)
    pq.write_table(rows, directory / f"part-bench-{tag}.parquet")
    return int(rows.num_rows)


def _load() -> float:
    return os.getloadavg()[0]


def _await_quiet(limit: float = QUIET_LOAD, poll: float = 30.0, max_wait: float = 600.0) -> float:
    """Wait (polling) while the 1-minute load average is above ``limit``, at most
    ``max_wait`` seconds; returns the load when the timed step starts."""
    deadline = time.monotonic() + max_wait
    while _load() > limit and time.monotonic() < deadline:
        print(f"  load {_load():.1f} > {limit}: waiting", flush=True)
        time.sleep(poll)
    return _load()


def _matches(client: Any, mv: str, query: str) -> bool:
    table = client.table(mv)
    expected = client.sql(query).select(*table.columns)
    return table.exceptAll(expected).count() == 0 and expected.exceptAll(table).count() == 0


class Bench:
    """The client, the timed refreshes and their records."""

    def __init__(self, client: Any, timer: PhaseTimer) -> None:
        self.client = client
        self.timer = timer
        self.steps: list[dict[str, Any]] = []
        self.checks: list[tuple[str, bool]] = []
        self.candidates: list[dict[str, Any]] = []

    def create(self, name: str, query: str, mode: str, partition_by: str | None = None) -> float:
        part = f" PARTITION BY {partition_by}" if partition_by else ""
        self.client.sql(
            f"CREATE MATERIALIZED VIEW {name}{part} REFRESH DEFERRED PROPERTIES ('refresh_mode' = '{mode}') AS {query}"
        )
        started = time.perf_counter()
        run = self.client.refresh(name)
        assert (run.state, run.mode) == ("SUCCESS", "FULL"), run
        self.timer.take(0.0)
        return time.perf_counter() - started

    def refresh(self, key: str, name: str, mode: str, rnd: int, force: bool = False) -> Any:
        load = _await_quiet()
        self.timer.take(0.0)
        started = time.perf_counter()
        run = self.client.refresh(name, force=force)
        wall = time.perf_counter() - started
        assert (run.state, run.mode) == ("SUCCESS", mode), run
        phases = self.timer.take(wall)
        self.steps.append(
            {
                "key": key,
                "round": rnd,
                "wall": wall,
                "run": run,
                "load": load,
                "load_after": _load(),
                "phases": phases,
                "summary": self.summary(name, run.run_id),
            }
        )
        print(f"  round {rnd} {key}: {run.mode} {wall:.2f} s (load {load:.1f})", flush=True)
        return run

    def summary(self, name: str, run_id: int) -> dict[str, str]:
        """The Iceberg snapshot summary of the MV's commit by ``run_id``."""
        from sparkmv.names import ObjectName

        table = self.client.runtime.iceberg.load(ObjectName.parse(name))
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None, name
        keys = ("sparkmv.run-id", "changed-partition-count", "added-records", "added-files-size")
        summary = {k: str(snapshot.summary[k]) for k in keys}
        assert summary.get("sparkmv.run-id") == str(run_id), summary
        return summary

    def check(self, name: str, query: str) -> None:
        ok = _matches(self.client, name, query)
        self.checks.append((name, ok))
        print(f"  {name} equals its query: {ok}", flush=True)

    def times(self, key: str) -> list[float]:
        return [s["wall"] for s in self.steps if s["key"] == key]


def _tables(client: Any, sf1: Any, sf5: Any, work: Path) -> dict[str, Path]:
    """Register the base tables; returns the bench-private ``lineitem`` copies by scale."""
    copies = {"sf1": work / "sf1" / "lineitem", "sf5": work / "sf5" / "lineitem"}
    shutil.copytree(sf1.lineitem, copies["sf1"])
    shutil.copytree(sf5.lineitem, copies["sf5"])
    client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{copies['sf1']}'")
    client.sql(f"CREATE EXTERNAL TABLE lineitem_sf5 USING parquet LOCATION '{copies['sf5']}'")
    client.sql(f"CREATE EXTERNAL TABLE orders USING parquet LOCATION '{sf1.orders}'")
    client.sql(f"CREATE EXTERNAL TABLE customer USING parquet LOCATION '{sf1.customer}'")
    return copies


def _round(b: Bench, rnd: int, copies: dict[str, Path], queries: dict[str, str]) -> int:
    """One append and every timed refresh of it; returns the rows appended (per copy)."""
    added = _append(copies["sf1"], f"r{rnd}")
    _append(copies["sf5"], f"r{rnd}")
    seg = b.refresh("seg_inc", "seg_inc", "INCREMENTAL", rnd)
    b.check("seg_inc", queries["seg"])
    if rnd == 1:
        b.candidates = seg.candidates
    b.refresh("seg_pct", "seg_pct", "PCT", rnd)
    b.refresh("cust_inc", "cust", "INCREMENTAL", rnd)
    b.check("cust", queries["cust"])
    b.refresh("ret1_inc", "ret1", "INCREMENTAL", rnd)
    b.check("ret1", queries["ret1"])
    b.refresh("ret5_inc", "ret5", "INCREMENTAL", rnd)
    b.check("ret5", queries["ret5"])
    b.refresh("cust_full", "cust", "FULL", rnd, force=True)
    b.refresh("ret1_full", "ret1", "FULL", rnd, force=True)
    b.refresh("ret5_full", "ret5", "FULL", rnd, force=True)
    return added


def run(data: Path, data_sf5: Path, work: Path, rounds: int) -> dict[str, Any]:
    """Run the benchmark in ``work`` (a fresh directory); returns the figures."""
    from sparkmv.client.client import Client
    from sparkmv.demo.data import SEGMENT_REVENUE, prepare
    from sparkmv.storage.spark import get_spark

    spark = get_spark("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    sf1, sf5 = prepare(spark, data, 1.0), prepare(spark, data_sf5, 5.0)
    client = Client(home=work / "home", spark=spark)
    timer = PhaseTimer()
    try:
        copies = _tables(client, sf1, sf5, work)
        sizes = {k: (_rows(p), _dir_size(p)) for k, p in copies.items()}
        sizes["orders"] = (_rows(sf1.orders), _dir_size(sf1.orders))
        sizes["customer"] = (_rows(sf1.customer), _dir_size(sf1.customer))
        months = sum(1 for p in copies["sf1"].iterdir() if p.name.startswith("l_shipmonth="))
        queries = {
            "seg": SEGMENT_REVENUE,
            "cust": CUSTOMER_REVENUE,
            "ret1": RETURN_STATUS.format(lineitem="lineitem"),
            "ret5": RETURN_STATUS.format(lineitem="lineitem_sf5"),
        }
        timer.install()
        b = Bench(client, timer)
        created = {
            "seg_inc": b.create("seg_inc", queries["seg"], "AUTO", "o_ordermonth"),
            "seg_pct": b.create("seg_pct", queries["seg"], "PCT", "o_ordermonth"),
            "cust": b.create("cust", queries["cust"], "INCREMENTAL"),
            "ret1": b.create("ret1", queries["ret1"], "INCREMENTAL"),
            "ret5": b.create("ret5", queries["ret5"], "INCREMENTAL"),
        }
        load_before = _load()
        added = [_round(b, r, copies, queries) for r in range(1, rounds + 1)]
        return {
            "sizes": sizes,
            "months": months,
            "added": added[0],
            "rounds": rounds,
            "created": created,
            "steps": b.steps,
            "checks": b.checks,
            "candidates": b.candidates,
            "load": (load_before, _load()),
        }
    finally:
        timer.uninstall()
        client.close()


# key -> (scenario, MV, refresh); the table's rows in order.
STEPS = {
    "seg_inc": ("1", "`segment_revenue` (by `o_ordermonth`), AUTO", "INCREMENTAL"),
    "seg_pct": ("1", "`segment_revenue` twin, `refresh_mode = PCT`", "PCT"),
    "cust_inc": ("2", "revenue per customer (unpartitioned)", "INCREMENTAL"),
    "cust_full": ("2", "revenue per customer (unpartitioned)", "FULL (FORCE)"),
    "ret1_inc": ("3", "`lineitem` aggregate, SF1", "INCREMENTAL"),
    "ret1_full": ("3", "`lineitem` aggregate, SF1", "FULL (FORCE)"),
    "ret5_inc": ("3", "`lineitem` aggregate, SF5", "INCREMENTAL"),
    "ret5_full": ("3", "`lineitem` aggregate, SF5", "FULL (FORCE)"),
}
CREATED = {
    "seg_inc": "`segment_revenue`",
    "seg_pct": "its PCT twin",
    "cust": "revenue per customer",
    "ret1": "aggregate SF1",
    "ret5": "aggregate SF5",
}


def _median(figures: dict[str, Any], key: str) -> float:
    return statistics.median(s["wall"] for s in figures["steps"] if s["key"] == key)


def _verdict(met: bool) -> str:
    return "met" if met else "**MISSED**"


def _figure_rows(figures: dict[str, Any]) -> list[str]:
    rows = [
        "| scenario | MV | refresh | wall time per round | median | MV partitions rewritten "
        "| MV rows written | 1-min load before |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for key, (scenario, mv, refresh) in STEPS.items():
        steps = [s for s in figures["steps"] if s["key"] == key]
        walls = ", ".join(f"{s['wall']:.2f} s" for s in steps)
        last = steps[-1]["summary"]
        loads = ", ".join(f"{s['load']:.1f}" for s in steps)
        rows.append(
            f"| {scenario} | {mv} | {refresh} | {walls} | {_median(figures, key):.2f} s | "
            f"{_partitions(last)} | {int(last.get('added-records', 0)):,} | {loads} |"
        )
    return rows


def _partitions(summary: dict[str, str]) -> str:
    count = summary.get("changed-partition-count")
    return "whole MV (unpartitioned)" if count in (None, "None") else str(count)


def _per_round(figures: dict[str, Any], num: str, den: str) -> str:
    """``num`` / ``den`` in each round (the two steps ran minutes apart, under similar load)."""
    walls = {(s["key"], s["round"]): s["wall"] for s in figures["steps"]}
    rounds = range(1, figures["rounds"] + 1)
    return ", ".join(f"{walls[(num, r)] / walls[(den, r)]:.2f}x" for r in rounds)


def _ratios(figures: dict[str, Any]) -> list[str]:
    m = {k: _median(figures, k) for k in STEPS}
    s1, s2 = m["seg_pct"] / m["seg_inc"], m["cust_full"] / m["cust_inc"]
    s3, full = m["ret5_inc"] / m["ret1_inc"], m["ret5_full"] / m["ret1_full"]
    return [
        f"- Scenario 1, PCT / INCREMENTAL: **{s1:.1f}x** of the medians (target >= 5x): {_verdict(s1 >= 5)}; "
        f"per round {_per_round(figures, 'seg_pct', 'seg_inc')}.",
        f"- Scenario 2, FULL / INCREMENTAL: **{s2:.1f}x** (target >= 10x): {_verdict(s2 >= 10)}; "
        f"per round {_per_round(figures, 'cust_full', 'cust_inc')}.",
        f"- Scenario 3, INCREMENTAL SF5 / SF1: **{s3:.2f}x** (target <= 1.5x): {_verdict(s3 <= 1.5)}; "
        f"per round {_per_round(figures, 'ret5_inc', 'ret1_inc')}. FULL SF5 / SF1: {full:.1f}x "
        f"(per round {_per_round(figures, 'ret5_full', 'ret1_full')}); FULL / INCREMENTAL: "
        f"{m['ret1_full'] / m['ret1_inc']:.1f}x at SF1, {m['ret5_full'] / m['ret5_inc']:.1f}x at SF5.",
    ]


def _phase_rows(figures: dict[str, Any]) -> list[str]:
    keys = list(STEPS)
    labels = list(dict.fromkeys([label for _, _, label in PHASES] + [OTHER]))
    head = " | ".join(f"{STEPS[k][2].split()[0]} {k.split('_')[0]}" for k in keys)
    rows = [f"| phase (median, s) | {head} |", "|---|" + "---:|" * len(keys)]
    for label in labels:
        values = []
        for key in keys:
            runs = [s["phases"].get(label, 0.0) for s in figures["steps"] if s["key"] == key]
            values.append(statistics.median(runs))
        if any(abs(v) >= 0.005 for v in values):
            name = ("&nbsp;&nbsp;" + label.strip()) if label.startswith(" ") else label
            rows.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
    total = " | ".join(f"{_median(figures, k):.2f}" for k in keys)
    rows.append(f"| **wall time** | {total} |")
    return rows


def _candidate_lines(figures: dict[str, Any]) -> list[str]:
    from sparkmv.refresh.incremental.candidates import Candidate, candidate_table

    candidates = [Candidate.from_json(c) for c in figures["candidates"]]
    return ["```", *candidate_table(candidates), "```"] if candidates else ["(none recorded)"]


def _data_line(figures: dict[str, Any]) -> str:
    sizes = figures["sizes"]

    def size(key: str) -> str:
        rows, nbytes = sizes[key]
        return f"{rows:,} rows, {nbytes / 1e6:.0f} MB"

    return (
        f"Data: TPC-H SF1 `lineitem` ({size('sf1')} of Parquet in {figures['months']} ship-month partitions), "
        f"`orders` ({size('orders')}, by order month), `customer` ({size('customer')}); SF5 `lineitem` "
        f"({size('sf5')}); sizes before the appends. `lineitem` is a bench-private copy at both scales; each of "
        f"{figures['rounds']} round(s) adds one Parquet file of {figures['added']:,} rows (0.1 % of SF1 "
        f"`lineitem`) to `l_shipmonth={CHANGED_MONTH}` of each copy, then every MV below is refreshed once."
    )


def report(figures: dict[str, Any]) -> str:
    """The RESULTS.md entry for ``figures``."""
    cpus = os.cpu_count()
    steps = figures["steps"]
    peak = max(max(s["load"], s["load_after"]) for s in steps)
    created = ", ".join(f"{CREATED[k]} {v:.1f} s" for k, v in figures["created"].items())
    correct = all(ok for _, ok in figures["checks"])
    return "\n".join(
        [
            f"### {dt.date.today().isoformat()}: `bench/bench_incremental.py --rounds {figures['rounds']}`",
            "",
            f"Machine: 2 cores, 24 GiB (os.cpu_count() = {cpus}, {platform.system()} {platform.machine()}); "
            "Spark `local[2]` (`spark.sql.shuffle.partitions = 2`, driver 4g) in one warm process; 1-minute "
            f"load average {figures['load'][0]:.1f} after the first builds and {figures['load'][1]:.1f} at the "
            f"end; each timed step first waited (up to 10 min) for a load <= {QUIET_LOAD:g} and started at the "
            f"load shown in the table (highest before or after a step: {peak:.1f}); the machine is shared with "
            "other engineers' Spark jobs, so a step at a high load is slower than on a quiet machine.",
            _data_line(figures),
            f"First builds (FULL, not compared): {created}.",
            "",
            *_figure_rows(figures),
            "",
            *_ratios(figures),
            f"- Each MV equal to its query recomputed from scratch (`exceptAll` both ways) after every "
            f"incremental refresh ({len(figures['checks'])} checks): {correct}.",
            "",
            "Candidates weighed by AUTO for scenario 1's refresh (round 1):",
            "",
            *_candidate_lines(figures),
            "",
            "Where the time goes (sparkmv's functions timed from outside; indented phases are part of the one "
            "above; Spark is lazy, so the delta query runs in whichever phase first collects or writes it):",
            "",
            *_phase_rows(figures),
            "",
        ]
    )


def headline(figures: dict[str, Any]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    m = {k: _median(figures, k) for k in STEPS}
    s1, s2, s3 = m["seg_pct"] / m["seg_inc"], m["cust_full"] / m["cust_inc"], m["ret5_inc"] / m["ret1_inc"]
    return (
        f"scenario 1 PCT / INCREMENTAL {s1:.1f}x (target >= 5x: {verdict(s1 >= 5)}); scenario 2 "
        f"FULL / INCREMENTAL {s2:.1f}x (target >= 10x: {verdict(s2 >= 10)}); scenario 3 "
        f"INCREMENTAL SF5 / SF1 {s3:.2f}x (target <= 1.5x: {verdict(s3 <= 1.5)})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the figures and (unless ``--no-write``) record them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch")
    parser.add_argument("--data-sf5", type=Path, default=ROOT / "data" / "tpch-sf5")
    parser.add_argument("--rounds", type=int, default=2, help="appends, each followed by every refresh")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-ivm-") as tmp:
        figures = run(args.data.resolve(), args.data_sf5.resolve(), Path(tmp), args.rounds)
    entry = report(figures)
    print(entry)
    if not args.no_write:
        publish(SECTION, entry, headline(figures), today(), git_commit(), script="bench/bench_incremental.py")
    return 0 if all(ok for _, ok in figures["checks"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
