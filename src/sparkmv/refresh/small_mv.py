"""Small MVs held in memory for query rewrite: a rewritten query that reads only small MVs
runs on a Spark session tuned for tiny inputs over in-memory copies of their snapshots.

Why: a rewritten query over an MV of a few hundred rows costs Spark 150 to 450 ms on its
first run, almost all of it fixed cost, not data: listing and scheduling the MV's Parquet
files, adaptive query execution re-planning after each shuffle stage, and compiling
generated code (measured in ``bench/RESULTS.md``, "Query rewrite"). Here:

- the current snapshot of an MV of at most :data:`SMALL_MV_ROWS` rows and
  :data:`SMALL_MV_BYTES` bytes (Iceberg snapshot summary) is read once into the driver
  (Spark reads the files, so types are exactly Spark's) and held as a Spark
  ``LocalRelation``; it is replaced when the MV's current snapshot or schema moves on
  (snapshots are immutable, so a held copy is never stale for its snapshot id);
- such queries run on a child session (``SparkSession.newSession``: same SparkContext,
  its own SQL settings and temporary views) with :data:`TINY_INPUT_CONF`: adaptive
  execution off, whole-stage code generation off, interpreted expressions, one shuffle
  partition. The settings are the child session's own and never change, so concurrent
  queries on the parent session are not affected (setting them per query on the shared
  session would race with other threads' queries).

Spark Connect sessions have no ``newSession``; there the regular path is used.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from sparkmv.storage.iceberg import snapshot_key
from sparkmv.storage.spark import is_connect

SMALL_MV_ROWS = 100_000
SMALL_MV_BYTES = 16 * 1024 * 1024
# For inputs of at most SMALL_MV_ROWS rows: re-planning (AQE), code generation (compiled per
# new query) and many shuffle partitions cost more than they save.
TINY_INPUT_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.leafNodeDefaultParallelism": "1",
}

_lock = threading.Lock()
_SESSIONS: weakref.WeakKeyDictionary[Any, SparkSession] = weakref.WeakKeyDictionary()
_names = itertools.count()
# Per child session: MV -> its last two (snapshot id, schema id, temporary view over the
# in-memory copy of that snapshot), newest last.
_VIEWS: weakref.WeakKeyDictionary[Any, dict[str, list[tuple[int, int, str]]]] = weakref.WeakKeyDictionary()


def tiny_session(spark: SparkSession) -> SparkSession | None:
    """The child session of ``spark`` with :data:`TINY_INPUT_CONF` (made once per parent),
    or None for a Spark Connect session."""
    if is_connect(spark):
        return None
    with _lock:
        child = _SESSIONS.get(spark)
        if child is None:
            child = spark.newSession()
            for key, value in TINY_INPUT_CONF.items():
                child.conf.set(key, value)
            _SESSIONS[spark] = child
        return child


def is_small(table: Any) -> bool:
    """Whether the current snapshot of pyiceberg ``table`` is small enough to hold in memory
    (row count and file bytes from its snapshot summary; False when unknown or empty)."""
    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot is not None else None
    if summary is None:
        return False
    try:
        rows = int(summary["total-records"])
        size = int(summary["total-files-size"])
    except (KeyError, TypeError, ValueError):
        return False
    return rows <= SMALL_MV_ROWS and size <= SMALL_MV_BYTES


def local_view(session: SparkSession, qualified: str, table: Any, files_frame: DataFrame) -> str:
    """The name of the temporary view (on ``session``) holding the in-memory copy of MV
    ``qualified``'s current snapshot, whose files ``files_frame`` reads; made on first use of
    each snapshot and schema, then reused (registering a view costs ~10 ms per query).

    The view of the snapshot before is kept (a query that picked it just before the MV moved
    on may still be resolving it); the one before that is dropped with its rows.
    """
    key = snapshot_key(table)
    with _lock:
        views = _VIEWS.setdefault(session, {})
        held = views.get(qualified, [])
    if held and held[-1][:2] == key:
        return held[-1][2]
    view = f"__smv_small{next(_names)}"
    session.createDataFrame(files_frame.toArrow(), files_frame.schema).createOrReplaceTempView(view)
    with _lock:
        held = views.setdefault(qualified, [])
        held.append((*key, view))
        dropped = held[:-2]
        del held[:-2]
    for _, _, old in dropped:
        session.catalog.dropTempView(old)
    return view
