"""The process's one SparkSession, created lazily with sparkmv's defaults.

Defaults: Spark's log to a file under the home, no console progress bars (sparkmv prints its own), Parquet
timestamps as ``TIMESTAMP_MICROS`` (Iceberg has no INT96), session time zone UTC, a small
number of shuffle partitions (adaptive execution coalesces them further).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from pyspark.sql import SparkSession

from sparkmv.errors import StorageError
from sparkmv.storage.spark_log import check_master, console_output_to, log_conf, log_path

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
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def get_spark(
    master: str = "local[*]", conf: dict[str, str] | None = None, log_home: Path | None = None
) -> SparkSession:
    """The active SparkSession, or a new one for ``master`` with ``conf`` over the defaults.

    Only the first call in a process configures the session (Spark allows one per JVM);
    later calls return it unchanged. With ``log_home``, a new session's JVM logs to
    ``<log_home>/logs/spark.log`` instead of the terminal (see :mod:`sparkmv.storage.spark_log`).

    Raises:
        StorageError: when ``master`` is not a Spark master URL, or the log directory
            under ``log_home`` cannot be created.
        pyspark / py4j errors: when Spark does not start (no Java, an unreachable master).
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        check_master(master)
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        settings = {**DEFAULT_CONF, **(conf or {})}
        if log_home is None:
            return _start(master, settings)
        try:
            settings = log_conf(log_home, settings)
        except OSError as exc:
            raise StorageError(f"cannot create Spark's log directory under {log_home}: {exc.strerror}") from exc
        with console_output_to(log_path(log_home)):
            spark = _start(master, settings)
        _query_context_loggers_to(log_path(log_home))
        return spark


def _query_context_loggers_to(path: Path) -> None:
    """pyspark logs every analysis error as a JSON record with the Java stack to stderr
    through its own loggers; send those records to the log file instead."""
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.FileHandler(path))  # PySparkLogger formats it as JSON
        logger.propagate = False


def _start(master: str, settings: dict[str, str]) -> SparkSession:
    builder = SparkSession.builder.master(master).appName("sparkmv")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _python() -> str:
    import sys

    return sys.executable
