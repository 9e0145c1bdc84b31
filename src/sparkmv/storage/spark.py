"""The process's one SparkSession, classic or Spark Connect, created lazily with sparkmv's
defaults, and the few session calls that differ between the two (job tags, cancel).

A classic session runs a driver JVM in this process (``local[*]``, ``spark://``, ``yarn``,
``k8s://``); a Spark Connect session (``sc://host:port``) talks to a server that runs the
driver. Everything else sparkmv does with Spark (DataFrames, SQL, temporary views, reading and
writing files, ``createDataFrame`` from rows) is the same API on both. One process holds one
kind: creating a Connect session makes pyspark dispatch its functions to Connect for the whole
process (``SPARK_CONNECT_MODE_ENABLED``), so a classic session cannot be used beside it.

Defaults: Spark's log to a file under the home, no console progress bars (sparkmv prints its own), Parquet
timestamps as ``TIMESTAMP_MICROS`` (Iceberg has no INT96), session time zone UTC, a small
number of shuffle partitions (adaptive execution coalesces them further). A local driver JVM
(``local[*]``: it also runs the tasks) keeps both JIT tiers but starts the optimizing one
later (:data:`LOCAL_JAVA_OPTIONS`): a short CLI run then spends less of its 2 cores compiling,
and a long or heavy one still gets optimized code (``bench/RESULTS.md``, 2026-11-28, the local
driver's JIT: the first tier alone had made a warm full recompute of TPC-H Q1 at SF1 2x slower); a
``spark.driver.extraJavaOptions`` that names ``TieredStopAtLevel`` or ``TieredCompilation``
itself wins. It also loads Spark's classes from this machine's class-data archive when one was
built (``sparkmv jvm-archive``, :mod:`sparkmv.storage.jvm_archive`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sparkmv.errors import StorageError
from sparkmv.storage import jvm_archive
from sparkmv.storage.spark_log import check_master, console_output_to, log_conf, log_path, remote_address

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
    # Parquet's vectored reads run in other threads, which Spark's input metrics (read per
    # task thread) do not see: a run's bytes_read would count the footers only.
    "spark.hadoop.parquet.hadoop.vectored.io.enabled": "false",
    # PySpark 4 wraps every DataFrame and Column call to send the caller's stack to the JVM
    # for error messages (four Py4J round trips, a stack walk and a failed IPython import per
    # call). sparkmv's calls are its own, not the user's: an incremental refresh spent
    # 0.5-1.5 s of its ~2-4 s in that wrapper (TPC-H SF1 Q1 after RF1: 3.2 s -> 1.7 s).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}

LOCAL_JAVA_OPTIONS = (
    "-XX:TieredStopAtLevel=4 -XX:Tier4InvocationThreshold=20000 -XX:Tier4MinInvocationThreshold=3000 "
    "-XX:Tier4CompileThreshold=40000 -XX:Tier4BackEdgeThreshold=200000"
)
"""Java options of a local driver JVM, before the user's own (see the module docstring): the
optimizing tier (C2) compiles a method after 4x the default invocations and loop iterations.
Measured on 2 quiet cores, cold CLI refreshes of the demo's TPC-H Q1 MV at SF1 (one partition /
all 84): the first tier alone 5.3-5.5 s / 28 s; both tiers as by default 6.9-7.0 s / 16 s;
these options 6.2-6.4 s / 15 s. (The first tier alone also sizes the code cache at 48 MiB,
which a long process filled: "CodeCache is full. Compiler has been disabled.")"""
QUICK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
"""Java options of a local driver JVM started for a small amount of work (``quick_start``):
the first JIT tier alone, without the profiling that feeds the optimizing tier, and the code
cache of both tiers (the first alone sizes it at 48 MiB, which a long process filled). Measured on 2
cores (``bench/RESULTS.md``, 2026-11-29), cold ``sparkmv pipeline run`` of the TPC-H SF1
two-MV project: one changed partition 8.2-8.4 s -> 6.3-6.5 s (13.6 -> 9.3 CPU seconds), 20 MiB
read 9.8-9.9 s -> 7.9-8.2 s; but a full recompute of both MVs (300 MiB) 19.0 s -> 21.8 s."""
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

_lock = threading.Lock()
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def get_spark(
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    log_home: Path | None = None,
    remote: str | None = None,
    quick_start: bool = False,
) -> SparkSession:
    """The active SparkSession, or a new one: classic for ``master``, or a Spark Connect
    session on the server at ``remote`` (``sc://host:port``, which then wins over ``master``),
    with ``conf`` over the defaults. ``quick_start``: the caller knows the process will do
    little work; a new local driver JVM then gets :data:`QUICK_JAVA_OPTIONS` instead of
    :data:`LOCAL_JAVA_OPTIONS`.

    Only the first call in a process configures the session (Spark allows one per JVM);
    later calls return it unchanged. With ``log_home``, a new session's JVM logs to
    ``<log_home>/logs/spark.log`` instead of the terminal (see :mod:`sparkmv.storage.spark_log`).
    A Connect session has no JVM here: only the runtime SQL settings of the defaults (``spark.sql.*``)
    and of ``conf`` apply to it (the server's own configuration is the server's), and only the
    Python side logs to that file.

    Raises:
        StorageError: when ``master`` is not a Spark master URL, ``remote`` is not a Spark
            Connect URL or nothing listens there, or the log directory under ``log_home``
            cannot be created.
        pyspark / py4j errors: when Spark does not start (no Java, an unreachable master).
    """
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        if remote:
            return _start_remote(remote, conf or {}, log_home)
        check_master(master)
        os.environ.setdefault("PYSPARK_PYTHON", _python())
        settings = _with_local_java_options(master, {**DEFAULT_CONF, **(conf or {})}, quick_start)
        if log_home is None:
            return _start(master, settings)
        settings = _log_conf(log_home, settings)
        with console_output_to(log_path(log_home)):
            spark = _start(master, settings)
        _query_context_loggers_to(log_path(log_home))
        return spark


def _with_local_java_options(master: str, settings: dict[str, str], quick_start: bool = False) -> dict[str, str]:
    """``settings`` with :data:`LOCAL_JAVA_OPTIONS` (:data:`QUICK_JAVA_OPTIONS` with
    ``quick_start``) before the driver's Java options, for a
    ``local`` master whose options do not choose a JIT tier themselves, and the options that
    use this machine's class-data archive when one was built for this Java and class path and
    the options choose no archive themselves (:mod:`sparkmv.storage.jvm_archive`)."""
    options = settings.get(JAVA_OPTIONS, "")
    local = master.strip() == "local" or master.strip().startswith("local[")
    if not local:
        return settings
    ours = [jvm_archive.java_options(options, settings)]
    if "Tiered" not in options:
        ours.insert(0, QUICK_JAVA_OPTIONS if quick_start else LOCAL_JAVA_OPTIONS)
    return {**settings, JAVA_OPTIONS: " ".join(o for o in (*ours, options) if o)}


def is_connect(spark: SparkSession) -> bool:
    """True when ``spark`` is a Spark Connect session (checked by class, as pyspark has no flag)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@contextmanager
def job_scope(spark: SparkSession, tag: str, group: str, description: str) -> Iterator[None]:
    """Spark jobs this thread starts inside the block carry ``tag`` (all cancelled together
    by :func:`cancel_jobs`, from any thread) and ``group`` (the jobs of one unit of work).

    Classic: ``group`` is the SparkContext job group (with ``description``, tasks interrupted
    on cancel) and ``tag`` a SparkContext job tag. Connect: both are session operation tags
    (``SparkSession.addTag``). Classic sessions have ``addTag`` too, but there a tag added by
    one thread can only be interrupted from that same thread, and a cancel comes from the
    run's monitor thread; hence the SparkContext calls there.
    """
    if is_connect(spark):
        spark.addTag(tag)
        spark.addTag(group)
        try:
            yield
        finally:
            spark.removeTag(group)
            spark.removeTag(tag)
        return
    sc = spark.sparkContext
    sc.setJobGroup(group, description, True)
    sc.addJobTag(tag)
    try:
        yield
    finally:
        sc.removeJobTag(tag)
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def cancel_jobs(spark: SparkSession, tag: str) -> None:
    """Cancel every running Spark job (Connect: every operation) that carries ``tag``
    (see :func:`job_scope`); safe to call from any thread, a no-op when none runs."""
    if is_connect(spark):
        spark.interruptTag(tag)
    else:
        spark.sparkContext.cancelJobsWithTag(tag)


def tagged_jobs(spark: SparkSession, tag: str) -> tuple[int | None, dict[str, Any]]:
    """What Spark's status store holds of this driver's jobs that carry ``tag`` (see
    :func:`job_scope`), read in one walk over them:

    - the bytes they read, summed over their stages' attempts by Spark's input metrics
      (files and tables scanned; shuffle reads are not input);
    - their times: ``{"count": n, "seconds": s, "groups": {job group: [n, s]}}``, each job's
      seconds from its submission to its completion; ``{}`` with no job.

    ``(None, {})`` on Spark Connect, whose client has no view of the server's status store,
    and when the store has dropped the jobs (``spark.ui.retainedJobs``); bytes None when it
    has dropped a stage. The status store is Spark's own record of jobs, kept with the UI
    disabled too."""
    if is_connect(spark):
        return None, {}
    jsc = spark.sparkContext._jsc.sc()  # type: ignore[union-attr]
    store = jsc.statusStore()
    try:
        jobs = [store.job(job_id) for job_id in jsc.statusTracker().getJobIdsForTag(tag)]
    except Exception:  # a job evicted from the store (a py4j error)
        return None, {}
    return _input_bytes(spark, store, jobs), _job_times(jobs)


def _input_bytes(spark: SparkSession, store: Any, jobs: list[Any]) -> int | None:
    no_quantiles = spark.sparkContext._gateway.new_array(spark.sparkContext._jvm.double, 0)  # type: ignore[union-attr]
    total = 0
    try:
        for job in jobs:
            stages = job.stageIds()
            for i in range(stages.size()):
                attempts = store.stageData(stages.apply(i), False, None, False, no_quantiles)
                total += sum(attempts.apply(k).inputBytes() for k in range(attempts.size()))
    except Exception:  # a stage evicted from the store (a py4j error)
        return None
    return total


def _job_times(jobs: list[Any]) -> dict[str, Any]:
    groups: dict[str, list[float]] = {}
    for job in jobs:
        submitted, completed = job.submissionTime(), job.completionTime()
        seconds = 0.0
        if submitted.isDefined() and completed.isDefined():
            seconds = (completed.get().getTime() - submitted.get().getTime()) / 1000.0
        group = job.jobGroup().get() if job.jobGroup().isDefined() else ""
        entry = groups.setdefault(group, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
    if not groups:
        return {}
    count = sum(int(n) for n, _ in groups.values())
    total = round(sum(s for _, s in groups.values()), 3)
    return {"count": count, "seconds": total, "groups": {g: [int(n), round(s, 3)] for g, (n, s) in groups.items()}}


def _log_conf(log_home: Path, settings: dict[str, str]) -> dict[str, str]:
    try:
        return log_conf(log_home, settings)
    except OSError as exc:
        raise StorageError(f"cannot create Spark's log directory under {log_home}: {exc.strerror}") from exc


def _start_remote(remote: str, conf: dict[str, str], log_home: Path | None) -> SparkSession:
    """A Spark Connect session on ``remote`` with the runtime SQL defaults and ``conf``."""
    host, port = remote_address(remote)
    try:  # pyspark's client retries an unreachable server for minutes: fail at once instead
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        raise StorageError(f"cannot reach the Spark Connect server at {remote}: {exc.strerror or exc}") from exc
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # grpc's C core would print to the terminal
    settings = {k: v for k, v in DEFAULT_CONF.items() if k.startswith("spark.sql.")} | conf
    if log_home is not None:
        _log_conf(log_home, {})  # the Python loggers to the file
    builder = SparkSession.builder.remote(remote).appName("sparkmv")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_home is not None:
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
