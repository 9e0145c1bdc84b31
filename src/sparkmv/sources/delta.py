"""Delta Lake base tables (``CREATE EXTERNAL TABLE t USING delta LOCATION '...'``), read
through the transaction log by delta-rs (the ``deltalake`` package); no Spark Delta jars.

- Pinning opens the table's current version and lists its add actions: the data files
  (Parquet), their sizes, record counts and partition values. The pinned version is the
  PinnedTable's ``snapshot_id``.
- The version of a partition is a hash of the paths of its data files at the pinned version:
  a Delta data file is never rewritten in place, so the hash changes exactly when a commit
  adds or removes a file of the partition (an append, an overwrite, a delete, a compaction);
  a partition whose files are all removed disappears. The newest ``modificationTime`` of its
  files is its ``changed_at``.
- Spark reads the pinned Parquet files; partition columns (not stored in Delta's files)
  come from the Hive directory names when the files lie in them (as delta-rs and Delta
  Spark write them), else from the add actions' partition values as literals.
- The change log between two versions is the commit files ``_delta_log/<version>.json`` in
  between: only ``add`` actions with ``dataChange`` (and compactions, ``dataChange`` false,
  of files older than the consumed version) make an append; a ``remove`` with ``dataChange``
  (delete, overwrite, update, merge) makes a signed change: - the rows of each data file of
  the consumed version no longer listed (readable until VACUUM removes the file: then the
  reason names it), + the rows of each file added (compactions net out when read). A
  deletion vector added in the range gives a reason. When the table's change data feed
  covers the range, the signed change is read from it instead
  (:mod:`sparkmv.sources.delta_cdf`): only the rows really changed, not whole files.
- Deletion vectors in use and column mapping are refused with a :class:`SourceError` naming
  the table and the reader feature (Spark would read the Parquet files wrongly); so is any
  reader feature not in :data:`READABLE_FEATURES`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sparkmv.errors import SourceError
from sparkmv.sources.pinned import UNPARTITIONED, PinnedPartition, PinnedTable, partition_path
from sparkmv.storage import warehouse

if TYPE_CHECKING:  # pyspark only where a DataFrame is made: pinning needs no Spark
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame, SparkSession

    from sparkmv.sources.base_change import BaseChange

READABLE_FEATURES = frozenset(
    {"timestampNtz", "deletionVectors", "columnMapping", "v2Checkpoint", "vacuumProtocolCheck"}
)
"""Reader features a Delta table may list: deletion vectors only while no file carries one,
column mapping only in mode ``none`` (both checked on every pin)."""


def _root(location: str) -> str:
    return location.removeprefix("file://").rstrip("/") or "/"


def _is_local(location: str) -> bool:
    return "://" not in location or location.startswith("file://")


def open_table(name: str, location: str, version: int | None = None) -> DeltaTable:
    """The Delta table at ``location`` (at ``version``, when given), its reader features checked.

    Raises:
        SourceError: the location is not a Delta table, cannot be read, or uses a reader
            feature sparkmv cannot read (the message names the table and the feature).
    """
    from deltalake import DeltaTable

    if _is_local(location):
        root = _root(location)
        if not root.startswith("/"):
            raise SourceError(f"LOCATION '{location}' is a relative path: give an absolute path")
        if not warehouse.is_dir(root):
            raise SourceError(f"table '{name}': LOCATION '{location}' does not exist")
        if not warehouse.is_dir(warehouse.join(root, "_delta_log")):
            raise SourceError(f"table '{name}': LOCATION '{location}' is not a Delta table (no _delta_log)")
    try:
        table = DeltaTable(_root(location) if _is_local(location) else location, version=version)
    except Exception as exc:  # delta-rs raises its own error types for every reading failure
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(f"table '{name}': cannot read the Delta table at '{location}': {text}") from exc
    _check_features(name, table)
    return table


def _check_features(name: str, table: DeltaTable) -> None:
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    unknown = sorted(features - READABLE_FEATURES)
    if unknown:
        raise SourceError(
            f"table '{name}': Delta reader feature{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(f) for f in unknown)} not supported"
        )
    mode = table.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise SourceError(
            f"table '{name}': Delta reader feature 'columnMapping' (mode '{mode}') not supported: "
            "its Parquet files name columns by physical names"
        )
    if "deletionVectors" in features:
        carrying = sum(batch.num_rows for batch in table.deletion_vectors())
        if carrying:
            raise SourceError(
                f"table '{name}': Delta reader feature 'deletionVectors' not supported: {carrying} data "
                f"file{'s' if carrying > 1 else ''} of version {table.version()} carry deletion vectors"
            )


def discover(name: str, location: str) -> tuple[str, list[str]]:
    """Schema JSON (Spark's) and partition columns of the Delta table at ``location``.

    Raises:
        SourceError: see :func:`open_table`; ``name`` is used in messages.
    """
    table = open_table(f"{name}", location)
    return _schema_json(table), list(table.metadata().partition_columns)


def _schema_json(table: DeltaTable) -> str:
    import pyarrow as pa

    from sparkmv.storage.schema import arrow_to_spark, schema_to_json

    return schema_to_json(arrow_to_spark(pa.schema(table.schema().to_arrow())))


def _text(value: Any) -> str | None:
    """A typed partition value of delta-rs' flattened add actions as Delta's text form."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return str(value.isoformat(sep=" ")) if hasattr(value, "hour") else str(value.isoformat())
    return str(value)


def _adds(table: DeltaTable, columns: list[str]) -> list[dict[str, Any]]:
    """The add actions of the loaded version: ``path`` (relative, decoded), ``size``,
    ``mtime_ms``, ``rows`` (None when no stats) and ``key`` (Hive partition path)."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    out = []
    for a in actions:
        key = "/".join(partition_path(c, _text(a.get(f"partition.{c}"))) for c in columns)
        out.append(
            {
                "path": unquote(a["path"]),
                "size": int(a["size_bytes"]),
                "mtime_ms": int(a["modification_time"]),
                "rows": a.get("num_records"),
                "key": key if columns else UNPARTITIONED,
            }
        )
    return out


def _absolute(location: str, path: str) -> str:
    if "://" in path or path.startswith("/"):
        return path
    return f"{_root(location)}/{path}" if _is_local(location) else f"{location.rstrip('/')}/{path}"


def pin(name: str, location: str) -> PinnedTable:
    """Pin the current version of the Delta table at ``location``.

    Raises:
        SourceError: the table is gone or unreadable, or uses an unsupported reader feature.
    """
    table = open_table(name, location)
    columns = list(table.metadata().partition_columns)
    groups: dict[str, list[dict[str, Any]]] = {}
    for add in _adds(table, columns):
        groups.setdefault(add["key"], []).append(add)
    partitions: dict[str, PinnedPartition] = {}
    for key, adds in sorted(groups.items()):
        adds.sort(key=lambda a: a["path"])
        digest = hashlib.sha1("\n".join(a["path"] for a in adds).encode()).hexdigest()[:16]
        rows = [a["rows"] for a in adds]
        partitions[key] = PinnedPartition(
            files=[_absolute(location, a["path"]) for a in adds],
            version=f"n={len(adds)};h={digest}",
            changed_at=max(a["mtime_ms"] for a in adds) / 1000,
            bytes=sum(a["size"] for a in adds),
            rows=None if any(r is None for r in rows) else sum(int(r) for r in rows),
        )
    return PinnedTable(
        name, "delta", _schema_json(table), columns, partitions, location=location, snapshot_id=table.version()
    )


def read(spark: SparkSession, pinned: PinnedTable, partitions: set[str] | None = None) -> DataFrame:
    """A DataFrame over the pinned Parquet files (of ``partitions`` only, when given), with
    the partition columns from the Hive directories, or as literals of the add actions'
    partition values where the files do not lie in such directories."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from sparkmv.storage.schema import schema_from_json

    schema = schema_from_json(pinned.schema_json)
    chosen = {k: p for k, p in pinned.partitions.items() if (partitions is None or k in partitions) and p.files}
    if not chosen:
        return spark.createDataFrame([], schema)
    base = _root(pinned.location or "")
    if all(_in_hive_dir(base, key, f) for key, p in chosen.items() for f in p.files):
        files = [f for p in chosen.values() for f in p.files]
        df = (
            spark.read.schema(schema)
            .option("basePath", warehouse.spark_path(base))
            .parquet(*[warehouse.spark_path(f) for f in files])
        )
        return df.select(*[F.col(f"`{f.name}`") for f in schema.fields])  # partition columns last: Delta's order
    lowered = {c.lower() for c in pinned.partition_columns}
    data = StructType([f for f in schema.fields if f.name.lower() not in lowered])
    frames = []
    for key, p in chosen.items():
        df = spark.read.schema(data).parquet(*[warehouse.spark_path(f) for f in p.files])
        for f in schema.fields:
            if f.name.lower() in lowered:
                df = df.withColumn(f.name, F.lit(pinned.value(key, f.name)).cast(f.dataType))
        frames.append(df.select(*[F.col(f"`{f.name}`") for f in schema.fields]))
    return reduce(lambda a, b: a.unionByName(b), frames)


def _in_hive_dir(base: str, key: str, file: str) -> bool:
    """True when ``file`` lies in the Hive directory ``key`` right under ``base``."""
    if not key:
        return os.path.dirname(file) == base
    return unquote(os.path.dirname(file)) == unquote(f"{base}/{key}")


# -- change log ------------------------------------------------------------------------------


def delta_change(
    consumed: PinnedTable, current: PinnedTable, feed: Callable[[PinnedTable, PinnedTable], BaseChange | None]
) -> BaseChange:
    """The change of a Delta base table from the consumed version to the pinned one, read
    from the commit files in between (module docstring); the delta is the added files of the
    append commits, grouped by partition. A range with removes is read by ``feed`` (the
    change data feed, :func:`sparkmv.sources.delta_cdf.feed_change`) when it can, else as
    the difference of the two versions' files."""
    import dataclasses

    from sparkmv.sources.base_change import NOT_APPEND_ONLY, UNCHANGED, BaseChange, appended

    old, new, name = consumed.snapshot_id, current.snapshot_id, current.name
    if old == new:
        return BaseChange(name, UNCHANGED, None, consumed, None)
    added, reason = _appended(name, current.location or "", old, new)
    if reason is not None and reason.startswith(_REMOVES):
        return feed(consumed, current) or _signed_change(consumed, current)
    if reason is not None:
        return BaseChange(name, NOT_APPEND_ONLY, reason, consumed, None)
    if not added:
        return BaseChange(name, UNCHANGED, None, consumed, None)
    owner = {f: key for key, p in current.partitions.items() for f in p.files}
    parts: dict[str, list[str]] = {}
    for path in added:
        absolute = _absolute(current.location or "", path)
        if absolute not in owner:
            gone = f"file '{os.path.basename(path)}' appended to base table '{name}' is gone at version {new}"
            return BaseChange(name, NOT_APPEND_ONLY, gone, consumed, None)
        parts.setdefault(owner[absolute], []).append(absolute)
    delta = {
        key: dataclasses.replace(
            current.partitions[key], files=sorted(files), bytes=sum(_size(f) for f in files), rows=None
        )
        for key, files in sorted(parts.items())
    }
    return appended(consumed, current, delta)


def _size(path: str) -> int:
    try:
        return warehouse.stat(path).size
    except OSError:
        return 0


def _appended(name: str, location: str, old: int | None, new: int | None) -> tuple[list[str], str | None]:
    """Relative paths of the files the commits ``(old, new]`` appended, or why the range is
    not append-only (a commit that removes data, a commit file cleaned up, a version older
    than the consumed one)."""
    if new is None or (old is not None and new < old):
        return [], f"base table '{name}' is at version {new}, older than the consumed version {old}"
    if not _is_local(location):
        return [], f"the change log of Delta table '{name}' at '{location}' is read only on local paths"
    log = warehouse.join(_root(location), "_delta_log")
    added: dict[str, None] = {}
    for version in range((old if old is not None else -1) + 1, new + 1):
        path = warehouse.join(log, f"{version:020d}.json")
        try:
            with warehouse.open_input(path) as f:
                lines = f.read().decode().splitlines()
        except OSError:
            return (
                [],
                f"the change history of base table '{name}' after version {old} was cleaned up (commit {version})",
            )
        for line in lines:
            action = json.loads(line) if line.strip() else {}
            reason = _action_reason(name, version, action, added)
            if reason is not None:
                return [], reason
    return list(added), None


def _action_reason(name: str, version: int, action: dict[str, Any], added: dict[str, None]) -> str | None:
    """Record an ``add`` of commit ``version`` in ``added``; the reason a ``remove`` makes
    the range not append-only (None for a compaction of files older than the range)."""
    if "add" in action:
        add = action["add"]
        if add.get("deletionVector"):
            return f"commit {version} of base table '{name}' adds a deletion vector"
        if add.get("dataChange", True):
            added[unquote(add["path"])] = None
    elif "remove" in action:
        remove = action["remove"]
        path = unquote(remove["path"])
        if remove.get("dataChange", True) or path in added:
            return f"{_REMOVES}{version} of base table '{name}' removes data (file '{os.path.basename(path)}')"
    return None


_REMOVES = "commit "
"""Start of the reason a commit removes data (the range is then read as a signed change)."""


def _file_rows(name: str, location: str, version: int | None) -> dict[str, int | None]:
    """Absolute data file -> record count at ``version`` (none before the first version)."""
    if version is None:
        return {}
    table = open_table(name, location, version)
    return {_absolute(location, a["path"]): a["rows"] for a in _adds(table, list(table.metadata().partition_columns))}


def _signed_change(consumed: PinnedTable, current: PinnedTable) -> BaseChange:
    """The signed change from the consumed version to the pinned one: the difference of the
    two versions' data files, as a PinnedTable of kind ``signed`` whose partition keys are
    ``+|<key>`` (files added) and ``-|<key>`` (files removed); or the reason a removed file
    cannot be read (vacuumed)."""
    import dataclasses

    from sparkmv.sources.base_change import NOT_APPEND_ONLY, SIGNED, BaseChange

    name, location = current.name, current.location or ""
    before = {f: key for key, p in consumed.partitions.items() for f in p.files}
    after = {f: key for key, p in current.partitions.items() for f in p.files}
    roles = {"+": sorted(set(after) - set(before)), "-": sorted(set(before) - set(after))}
    for path in roles["-"]:
        if not _exists(path):
            gone = (
                f"file '{os.path.basename(path)}' removed from base table '{name}' since version "
                f"{consumed.snapshot_id} was vacuumed: its rows cannot be retracted"
            )
            return BaseChange(name, NOT_APPEND_ONLY, gone, consumed, None)
    rows = {**_file_rows(name, location, consumed.snapshot_id), **_file_rows(name, location, current.snapshot_id)}
    parts: dict[str, PinnedPartition] = {}
    for sign, files in roles.items():
        owner = after if sign == "+" else before
        for key in sorted({owner[f] for f in files}):
            mine = [f for f in files if owner[f] == key]
            parts[f"{sign}|{key}"] = PinnedPartition(
                files=mine, version=str(current.snapshot_id), bytes=sum(_size(f) for f in mine)
            )
    delta = dataclasses.replace(current, kind=SIGNED, partitions=parts, since_snapshot_id=consumed.snapshot_id)
    return BaseChange(
        name,
        SIGNED,
        None,
        consumed,
        delta,
        delta_bytes=sum(p.bytes for p in parts.values()),
        delta_rows=sum(rows.get(f) or 0 for f in roles["+"]),
        rows_retracted=sum(rows.get(f) or 0 for f in roles["-"]),
        files_read=len(roles["+"]) + len(roles["-"]),
    )


def _exists(path: str) -> bool:
    try:
        warehouse.stat(path)
    except OSError:
        return False
    return True


def read_signed(spark: SparkSession, pinned: PinnedTable) -> DataFrame:
    """The signed rows (not netted) of a Delta ``signed`` change: the table's columns and
    ``__smv_sign``."""
    import dataclasses

    from pyspark.sql import functions as F

    frames = []
    for sign in ("+", "-"):
        parts = {k.split("|", 1)[1]: p for k, p in pinned.partitions.items() if k.startswith(sign + "|")}
        if parts:
            side = dataclasses.replace(pinned, kind="delta", partitions=parts)
            frames.append(read(spark, side).withColumn("__smv_sign", F.lit(1 if sign == "+" else -1)))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out
