"""The process's one SparkSession, created lazily with sparkmv's defaults.

Defaults: quiet logs, no console progress bars (sparkmv prints its own), Parquet
timestamps as ``TIMESTAMP_MICROS`` (Iceberg has no INT96), session time zone UTC, a small
number of shuffle partitions (adaptive execution coalesces them further).
"""

from __future__ import annotations

import os
import threading

from pyspark.sql import SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
}

_lock = threading.Lock()


def get_spark(master: str = "local[*]", conf: dict[str, str] | None = None) -> SparkSession:
    """The active SparkSession, or a new one for ``master`` with ``conf`` over the defaults.

    Only the first call in a process configures the session (Spark allows one per JVM);
    later calls return it unchanged.
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        builder = SparkSession.builder.master(master).appName("sparkmv")
        for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        return spark


def _python() -> str:
    import sys

    return sys.executable
