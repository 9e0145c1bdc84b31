"""TPC-H test data: generate with ``tpchgen-cli`` and lay out as Hive-partitioned Parquet.

``lineitem`` is partitioned by ship month and ``orders`` by order month (``yyyy-MM``
string columns ``l_shipmonth`` / ``o_ordermonth``); ``customer`` is unpartitioned.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sparkmv.errors import SourceError


@dataclass(frozen=True)
class TpchLayout:
    """Directories of the partitioned TPC-H tables."""

    root: Path

    @property
    def lineitem(self) -> Path:
        return self.root / "lineitem"

    @property
    def orders(self) -> Path:
        return self.root / "orders"

    @property
    def customer(self) -> Path:
        return self.root / "customer"


def _tpchgen() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    found = str(exe) if exe.exists() else shutil.which("tpchgen-cli")
    if not found:
        raise SourceError("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return found


def generate_raw(raw: Path, scale_factor: float) -> None:
    """Run ``tpchgen-cli parquet`` for lineitem, orders and customer (skipped if present)."""
    if all((raw / f"{t}.parquet").exists() for t in ("lineitem", "orders", "customer")):
        return
    raw.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            _tpchgen(),
            "parquet",
            "-s",
            str(scale_factor),
            "--tables",
            "lineitem,orders,customer",
            "--output-dir",
            str(raw),
        ],
        check=True,
        capture_output=True,
    )


def generate_tables(out: Path, scale_factor: float, tables: tuple[str, ...]) -> dict[str, Path]:
    """Run ``tpchgen-cli parquet --parts 1`` for ``tables`` (TPC-H table names) into ``out``:
    one directory per table holding one Parquet file (``out/lineitem/lineitem.1.parquet``),
    usable as a ``LOCATION``. Tables already there are kept (the generator skips them).

    Returns:
        table name -> its directory.

    Raises:
        SourceError: tpchgen-cli is not installed.
        subprocess.CalledProcessError: the generator failed.
    """
    out.mkdir(parents=True, exist_ok=True)
    missing = [t for t in tables if not (out / t / f"{t}.1.parquet").exists()]
    if missing:
        subprocess.run(
            [
                _tpchgen(),
                "parquet",
                "-s",
                str(scale_factor),
                "--parts",
                "1",
                "--tables",
                ",".join(missing),
                "-o",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
    return {t: out / t for t in tables}


def prepare(spark: SparkSession, data_dir: Path, scale_factor: float) -> TpchLayout:
    """Generate (if needed) and partition TPC-H at ``scale_factor`` under ``data_dir``.

    Returns the layout; each partitioned directory is written once and reused.
    """
    base = data_dir / f"sf{scale_factor:g}"
    raw = base / "raw"
    generate_raw(raw, scale_factor)
    layout = TpchLayout(base / "partitioned")
    if not (layout.lineitem / "_SUCCESS").exists():
        (
            spark.read.parquet(str(raw / "lineitem.parquet"))
            .withColumn("l_shipmonth", F.date_format("l_shipdate", "yyyy-MM"))
            .repartition("l_shipmonth")
            .write.mode("overwrite")
            .partitionBy("l_shipmonth")
            .parquet(str(layout.lineitem))
        )
    if not (layout.orders / "_SUCCESS").exists():
        (
            spark.read.parquet(str(raw / "orders.parquet"))
            .withColumn("o_ordermonth", F.date_format("o_orderdate", "yyyy-MM"))
            .repartition("o_ordermonth")
            .write.mode("overwrite")
            .partitionBy("o_ordermonth")
            .parquet(str(layout.orders))
        )
    if not (layout.customer / "_SUCCESS").exists():
        spark.read.parquet(str(raw / "customer.parquet")).coalesce(1).write.mode("overwrite").parquet(
            str(layout.customer)
        )
    return layout


Q1_PRICING_SUMMARY = """
SELECT l_shipmonth, l_returnflag, l_linestatus,
       sum(l_quantity) AS sum_qty,
       sum(l_extendedprice) AS sum_base_price,
       sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
       avg(l_quantity) AS avg_qty,
       avg(l_extendedprice) AS avg_price,
       avg(l_discount) AS avg_disc,
       count(*) AS count_order
FROM lineitem
GROUP BY l_shipmonth, l_returnflag, l_linestatus
""".strip()

REVENUE_BY_SHIPMODE = """
SELECT l_shipmonth, l_shipmode,
       sum(l_extendedprice * (1 - l_discount)) AS revenue,
       count(*) AS line_count
FROM lineitem
GROUP BY l_shipmonth, l_shipmode
""".strip()

SEGMENT_REVENUE = """
SELECT o.o_ordermonth, c.c_mktsegment,
       count(*) AS line_count,
       sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue
FROM orders o
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN customer c ON c.c_custkey = o.o_custkey
GROUP BY o.o_ordermonth, c.c_mktsegment
""".strip()

VALID_LINES_1995 = """
SELECT l_shipmonth, l_orderkey, l_linenumber, l_quantity, l_extendedprice
FROM lineitem
WHERE l_shipmonth BETWEEN '1995-01' AND '1995-12'
""".strip()

DEMO_MVS = {
    "q1_pricing_summary": (
        "l_shipmonth",
        Q1_PRICING_SUMMARY,
        {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "12"},
    ),
    "revenue_by_shipmode": ("l_shipmonth", REVENUE_BY_SHIPMODE, {}),
    "segment_revenue": ("o_ordermonth", SEGMENT_REVENUE, {}),
}

# An MV with expectations: its DROP ROW expectations keep the rows an outside writer appends
# with a negative quantity out of it.
DEMO_EXPECTATION_MVS: dict[str, tuple[str, str, dict[str, str]]] = {
    "valid_lines_1995": ("l_shipmonth", VALID_LINES_1995, {}),
}
# The expectations of demo MVs (name -> (expectation, condition)), all ON VIOLATION DROP ROW.
DEMO_EXPECTATIONS: dict[str, list[tuple[str, str]]] = {"valid_lines_1995": [("positive_quantity", "l_quantity > 0")]}

# An MV over an MV (nested): it follows its base MV's Iceberg snapshots, also through the
# retractions of a PCT refresh of the base MV (a signed change: DESIGN.md, "change log").
SHIPMODE_BY_YEAR = """
SELECT substr(l_shipmonth, 1, 4) AS l_shipyear, l_shipmode,
       sum(revenue) AS revenue,
       sum(line_count) AS line_count
FROM revenue_by_shipmode
GROUP BY substr(l_shipmonth, 1, 4), l_shipmode
""".strip()

DEMO_NESTED_MVS: dict[str, tuple[str, str, dict[str, str]]] = {"shipmode_by_year": ("l_shipyear", SHIPMODE_BY_YEAR, {})}
