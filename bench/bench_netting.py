"""Netting a copy-on-write change of TPC-H ``lineitem``: a partition at a time on the driver
against Spark's netting of the whole change; not a test.

TPC-H at ``--sf`` (``orders`` and ``lineitem`` only, by month, in a pyiceberg SQL catalog, as
``bench/bench_tpch_refresh.py`` writes them); RF2 deletes 0.1 % of the orders and their
lineitem rows with pyiceberg's ``Table.delete`` (copy-on-write: every month file rewritten).
The signed change of ``lineitem`` between the two snapshots is then netted twice in one
process: by :func:`sparkmv.sources.signed_arrow.net_by_partition` (pyarrow, a month at a
time) and by :func:`sparkmv.sources.signed.netted` (one SparkSession ``local[2]``). Both must
give the same rows.

Usage: ``nice -n 10 .venv/bin/python bench/bench_netting.py [--sf 1] [--no-write]``. Exit
status 1 when the two nettings differ.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_tpch_refresh import _keys, make_lake, rf2  # noqa: E402
from results import git_commit, publish, timed, today  # noqa: E402

SECTION = "## Netting a copy-on-write change"


def run(sf: float, data: Path, work: Path) -> dict[str, object]:
    """Both nettings of lineitem's RF2 change; their figures."""
    from sparkmv.demo.data import generate_tables
    from sparkmv.demo.tpch_queries import TPCH_TABLES
    from sparkmv.sources import iceberg, signed
    from sparkmv.sources.changes import base_change
    from sparkmv.storage.schema import schema_from_json
    from sparkmv.storage.spark import get_spark

    raw = generate_tables(data / f"sf{sf:g}" / "tables", sf, TPCH_TABLES)
    cat, _, _ = make_lake(f"sqlite:///{work}/lake.db", work / "wh", {k: raw[k] for k in ("orders", "lineitem")})
    before = iceberg.pin("tpch.lineitem", cat.load_table(("tpch", "lineitem")))
    rf2(cat, random.Random(7), max(_keys(cat)), "copy-on-write")
    table = cat.load_table(("tpch", "lineitem"))
    change = base_change(before, iceberg.pin("tpch.lineitem", table), table)
    assert change.delta is not None
    delta = change.delta
    columns = [f.name for f in schema_from_json(delta.schema_json).fields]
    arrow, arrow_s = timed(lambda: signed._netted_in_arrow(delta, table, columns))
    spark = get_spark("local[2]", {"spark.driver.memory": "4g", "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    signed.ARROW_NETTING_BYTES = 0  # Spark nets the whole change
    rows, spark_s = timed(lambda: signed.read(spark, delta, lambda: table).collect())
    assert arrow is not None
    mine = sorted(tuple(r.values()) for r in arrow.to_pylist())
    same = mine == sorted(tuple(r) for r in rows)
    return {
        "files": {role: len(p.files) for role, p in delta.partitions.items()},
        "mib": sum(p.bytes for p in delta.partitions.values()) / 2**20,
        "rows": len(rows),
        "arrow_s": arrow_s,
        "spark_s": spark_s,
        "same": same,
    }


def report(sf: float, f: dict[str, object]) -> str:
    """The RESULTS.md entry."""
    arrow_s, spark_s = float(f["arrow_s"]), float(f["spark_s"])  # type: ignore[arg-type]
    return "\n".join(
        [
            f"### {dt.date.today().isoformat()}: SF{sf:g}, RF2 copy-on-write, lineitem",
            "",
            f"Change: files {f['files']} ({float(f['mib']):.0f} MiB), {f['rows']:,} netted rows;"  # type: ignore[arg-type]
            f" the same rows both ways: {f['same']}.",
            "",
            "| netting | seconds |",
            "|---|---:|",
            f"| a month at a time on the driver (pyarrow) | {arrow_s:.2f} |",
            f"| the whole change in Spark (`local[2]`) | {spark_s:.2f} |",
            f"| ratio | {spark_s / arrow_s:.1f}x |",
        ]
    )


def headline(figures: dict[str, object]) -> str:
    """The run's headline figure in one line (its line in the History of ``bench/RESULTS.md``)."""
    arrow_s, spark_s = float(figures["arrow_s"]), float(figures["spark_s"])  # type: ignore[arg-type]
    return (
        f"netting on the driver {spark_s / arrow_s:.1f}x faster than in Spark ({arrow_s:.2f} s vs {spark_s:.2f} s; "
        f"same rows: {figures['same']})"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the report and (unless ``--no-write``) record it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "tpch", help="generated tables are cached here")
    parser.add_argument("--no-write", action="store_true", help="do not append to bench/RESULTS.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sparkmv-bench-netting-") as tmp:
        figures = run(args.sf, args.data, Path(tmp))
    text = report(args.sf, figures)
    print(text)
    if not args.no_write:
        publish(SECTION, text, headline(figures), today(), git_commit(), script="bench/bench_netting.py")
    return 0 if figures["same"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
