"""``sparkmv jvm-archive``: build this machine's class-data archive of the local Spark driver
JVM (:mod:`sparkmv.storage.jvm_archive`), so that a cold ``sparkmv`` process loads Spark's
classes from one mapped file.

The archive holds the classes a JVM loaded while it ran, so the build runs what a refresh
runs: in a temporary home, a small month-partitioned Parquet table, two materialized views
partitioned by month (a grouped one and a filtered one), their first refresh, then a file
appended to one month and a second refresh (INCREMENTAL or PCT, as AUTO picks), and a read of
each view. Spark's log of the build goes to ``<archive dir>/logs/spark.log``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sparkmv.errors import SparkMvError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MVS = (
    "CREATE MATERIALIZED VIEW by_month PARTITION BY month REFRESH DEFERRED AS SELECT month, kind, sum(qty) AS qty, "
    "sum(price * (1 - discount)) AS revenue, count(*) AS n FROM events GROUP BY month, kind",
    "CREATE MATERIALIZED VIEW mode_by_month PARTITION BY month REFRESH DEFERRED AS SELECT month, mode, count(*) AS n, "
    "sum(discount) AS discounts FROM events WHERE qty > 10 GROUP BY month, mode",
)
ROWS = (
    "id",
    "cast(id % 50 AS decimal(15,2)) AS qty",
    "cast(id % 1000 AS decimal(15,2)) * 1.5 AS price",
    "cast(id % 10 AS decimal(15,2)) / 100 AS discount",
    "CASE WHEN id % 3 = 0 THEN 'A' WHEN id % 3 = 1 THEN 'N' ELSE 'R' END AS kind",
    "CASE WHEN id % 2 = 0 THEN 'AIR' ELSE 'SHIP' END AS mode",
    "concat('2024-0', cast(id % 6 + 1 AS string)) AS month",
)


def build(master: str, conf: dict[str, str]) -> Path:
    """Build the archive for a ``local`` ``master`` and ``conf`` (the user's Spark
    configuration); its path.

    Raises:
        SparkMvError: ``master`` is not local, or the archive was not written (see
            :func:`sparkmv.storage.jvm_archive.build_archive`).
    """
    from sparkmv.storage import jvm_archive
    from sparkmv.storage.spark import DEFAULT_CONF, JAVA_OPTIONS, get_spark

    if not (master.strip() == "local" or master.strip().startswith("local[")):
        raise SparkMvError(f"a JVM archive is for a local driver, not master {master!r}")
    settings = {**DEFAULT_CONF, **conf}
    log_home = jvm_archive.archive_dir()

    def start(options: str) -> SparkSession:
        own = f"{options} {conf.get(JAVA_OPTIONS, '')}".strip()
        return get_spark(master, {**conf, JAVA_OPTIONS: own}, log_home=log_home)

    return jvm_archive.build_archive(start, workload, settings)


def existing(conf: dict[str, str]) -> Path | None:
    """The archive already built for ``conf`` and this machine's Java and Spark, if any."""
    from sparkmv.storage import jvm_archive
    from sparkmv.storage.spark import DEFAULT_CONF

    path = jvm_archive.archive_path({**DEFAULT_CONF, **conf})
    return path if path is not None and path.is_file() else None


def workload(spark: SparkSession) -> None:
    """Create, refresh, change and refresh again two month-partitioned MVs (module docstring)."""
    from sparkmv.client.client import Client

    with tempfile.TemporaryDirectory(prefix="sparkmv-jvm-archive-") as tmp:
        data = Path(tmp) / "events"
        spark.range(0, 6000).selectExpr(*ROWS).write.partitionBy("month").parquet(str(data))
        client = Client(Path(tmp) / "home", spark=spark, recover=False)
        try:
            client.sql(f"CREATE EXTERNAL TABLE events USING parquet LOCATION '{data}'")
            for statement in MVS:
                client.sql(statement)
            names = ("by_month", "mode_by_month")
            for name in names:
                client.refresh(name, raise_on_failure=True)
            more = spark.range(6000, 6100).selectExpr(*ROWS).where("month = '2024-03'").drop("month")
            more.write.mode("append").parquet(str(data / "month=2024-03"))
            for name in names:
                client.refresh(name, raise_on_failure=True)
                client.table(name).collect()
        finally:
            client.close()
