"""The signed change of a Delta base table read from its change data feed (CDF).

A Delta table with the table property ``delta.enableChangeDataFeed = true`` records, for
each commit that rewrites rows (delete, update, merge), ``cdc`` actions: files under
``_change_data/`` holding the changed rows with a ``_change_type`` column (``insert``,
``delete``, ``update_preimage``, ``update_postimage``). A commit without ``cdc`` actions
(an append, a delete of whole files) changes the rows of its added files (inserts) and of
its removed files (deletes). delta-rs reads the feed (``DeltaTable.load_cdf``).

The feed covers the range ``(consumed, pinned]`` when:

- the property is true at the consumed version and no commit of the range sets it
  otherwise (a ``metaData`` action), so every commit of the range recorded its changes;
- every commit file of the range and every file the feed reads still exist (a VACUUM
  removes removed data files and old ``_change_data`` files);
- the files it reads total at most :data:`FEED_MAX_BYTES` (the feed is read and netted in
  Arrow on the driver; a larger change is read by Spark through the remove-action path of
  :mod:`sparkmv.sources.delta`).

Then the change is a PinnedTable of kind ``signed`` with the one partition :data:`FEED`
(the files the feed reads, for the estimate and EXPLAIN; the rows are read again from the
two versions at read time): ``insert`` and ``update_postimage`` rows are +1,
``delete`` and ``update_preimage`` rows -1, the feed's own columns (``_change_type``,
``_commit_version``, ``_commit_timestamp``) dropped, the rest cast to the table's schema and
netted per distinct row. Otherwise :func:`feed_change` returns None and the caller falls
back to the remove-action path (or its reason). Deletion vectors: delta-rs 1.6 does not
write them (its delete and update rewrite files copy-on-write) and sparkmv refuses to pin a
table whose files carry them, so the feed does not lift that refusal.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sparkmv.errors import SourceError
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from sparkmv.sources.signed import ARROW_NETTING_BYTES, FEED, SIGN_COLUMN
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sparkmv.sources.base_change import BaseChange

ENABLE_PROPERTY = "delta.enableChangeDataFeed"
FEED_MAX_BYTES = ARROW_NETTING_BYTES
"""The most bytes of files a change read from the feed may read (driver memory)."""
INSERTED = ("insert", "update_postimage")
"""Values of ``_change_type`` whose rows are inserted (+1); the others are retracted (-1)."""
FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
SOURCE_TEXT = "change data feed"
"""How the candidates and EXPLAIN REFRESH name a change read from the feed."""


@dataclasses.dataclass
class _Range:
    """What the feed reads for a range of commits: ``files`` (absolute path -> bytes) and
    the rows inserted and retracted (counted from the files)."""

    files: dict[str, int] = dataclasses.field(default_factory=dict)
    inserted: int = 0
    retracted: int = 0


def enabled(configuration: dict[str, Any] | None) -> bool:
    """True when a Delta table's configuration turns the change data feed on.

    >>> enabled({"delta.enableChangeDataFeed": "TRUE"}), enabled({}), enabled(None)
    (True, False, False)
    """
    return str((configuration or {}).get(ENABLE_PROPERTY, "false")).strip().lower() == "true"


def from_feed(delta: PinnedTable | None) -> bool:
    """True when ``delta`` (a base change's delta) was read from a change data feed."""
    return delta is not None and FEED in delta.partitions


def feed_change(consumed: PinnedTable, current: PinnedTable) -> BaseChange | None:
    """The signed change from the consumed version to the pinned one read from the table's
    change data feed, or None when the feed does not cover the range (module docstring).

    Raises:
        SourceError: the consumed version cannot be opened (see
            :func:`sparkmv.sources.delta.open_table`).
    """
    from sparkmv.sources.base_change import SIGNED, BaseChange
    from sparkmv.sources.delta import _is_local, _root, open_table

    old, new, location = consumed.snapshot_id, current.snapshot_id, current.location or ""
    if old is None or new is None or new <= old or not _is_local(location):
        return None
    if not enabled(open_table(current.name, location, old).metadata().configuration):
        return None
    found = _walk(_root(location), old, new)
    if found is None:
        return None
    part = PinnedPartition(files=sorted(found.files), version=str(new), bytes=sum(found.files.values()))
    delta = dataclasses.replace(
        current, kind=SIGNED, partition_columns=[], partitions={FEED: part}, since_snapshot_id=old
    )
    return BaseChange(
        current.name,
        SIGNED,
        None,
        consumed,
        delta,
        delta_bytes=part.bytes,
        delta_rows=found.inserted,
        rows_retracted=found.retracted,
        files_read=len(part.files),
    )


def _walk(root: str, old: int, new: int) -> _Range | None:
    """The files and row counts the feed reads for commits ``(old, new]`` of the table at
    ``root``; None when a commit file is gone, a commit turns the feed off, a file is gone,
    or the files exceed :data:`FEED_MAX_BYTES`."""
    found = _Range()
    for version in range(old + 1, new + 1):
        try:
            with warehouse.open_input(warehouse.join(root, "_delta_log", f"{version:020d}.json")) as f:
                actions = [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]
        except OSError:
            return None
        if any("metaData" in a and not enabled(a["metaData"].get("configuration")) for a in actions):
            return None
        try:
            _commit(root, actions, found)
        except OSError:  # a file the feed reads was vacuumed
            return None
        if sum(found.files.values()) > FEED_MAX_BYTES:
            return None
    return found


def _commit(root: str, actions: list[dict[str, Any]], found: _Range) -> None:
    """Add what the feed reads of one commit to ``found``: its ``cdc`` files when it has
    any, else its added (+) and removed (-) data files that change data.

    Raises:
        OSError: a file is gone.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cdc = [a["cdc"] for a in actions if "cdc" in a]
    if cdc:
        for action in cdc:
            path = _path(root, action["path"])
            kinds = pq.read_table(path, columns=["_change_type"]).column(0)
            inserted = int(pc.sum(pc.is_in(kinds, value_set=_inserted_values())).as_py() or 0)
            found.inserted += inserted
            found.retracted += len(kinds) - inserted
            found.files[path] = int(action.get("size") or warehouse.stat(path).size)
        return
    for kind in ("add", "remove"):
        for action in (a[kind] for a in actions if kind in a):
            if not action.get("dataChange", True):
                continue
            path = _path(root, action["path"])
            found.files[path] = int(action.get("size") or warehouse.stat(path).size)
            rows = pq.ParquetFile(path).metadata.num_rows  # also: the file still exists
            if kind == "add":
                found.inserted += rows
            else:
                found.retracted += rows


def _path(root: str, relative: str) -> str:
    from sparkmv.sources.delta import _absolute

    return _absolute(root, unquote(relative))


def _inserted_values() -> pa.Array:
    import pyarrow as pa

    return pa.array(INSERTED)


def read_feed(spark: SparkSession, pinned: PinnedTable) -> DataFrame:
    """The signed rows of a change read from the feed: the table's columns and
    :data:`~sparkmv.sources.signed.SIGN_COLUMN`, netted per distinct row.

    Raises:
        SourceError: the feed of the range cannot be read any more (files vacuumed since
            the run was planned), naming the table and the versions.
    """
    from sparkmv.sources.delta import open_table
    from sparkmv.sources.signed import _from_arrow, netted
    from sparkmv.sources.signed_arrow import net_arrow
    from sparkmv.storage.schema import schema_from_json

    schema = schema_from_json(pinned.schema_json)
    since, until = pinned.since_snapshot_id, pinned.snapshot_id
    table = open_table(pinned.name, pinned.location or "", until)
    try:
        feed = table.load_cdf(starting_version=(since or 0) + 1, ending_version=until)
        rows = signed_rows(_arrow_table(feed), schema)
    except Exception as exc:  # delta-rs raises its own error types for every reading failure
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SourceError(
            f"table '{pinned.name}': cannot read the change data feed of versions {since} to {until}: {text}"
        ) from exc
    in_arrow = net_arrow(rows)
    if in_arrow is None:  # columns Arrow cannot group: Spark nets them
        return netted(_from_arrow(spark, rows, schema), [f.name for f in schema.fields])
    return _from_arrow(spark, in_arrow, schema)


def _arrow_table(feed: Any) -> pa.Table:
    import pyarrow as pa

    return pa.table(feed)


def signed_rows(feed: pa.Table, schema: Any) -> pa.Table:
    """The feed's rows (``schema``'s columns, matched by name case-insensitively, and the
    feed's own columns) as signed rows: ``schema``'s columns cast to its Arrow types and
    :data:`~sparkmv.sources.signed.SIGN_COLUMN` (int32).

    Raises:
        KeyError: a column of ``schema`` is not in the feed.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from sparkmv.storage.schema import spark_to_arrow

    target = spark_to_arrow(schema)
    names = {n.lower(): n for n in feed.column_names if n not in FEED_COLUMNS}
    columns = [feed.column(names[f.name.lower()]).cast(f.type) for f in target]
    kinds = feed.column("_change_type").cast(pa.string())
    sign = pc.if_else(pc.is_in(kinds, value_set=_inserted_values()), 1, -1).cast(pa.int32())
    return pa.Table.from_arrays([*columns, sign], names=[*target.names, SIGN_COLUMN])
