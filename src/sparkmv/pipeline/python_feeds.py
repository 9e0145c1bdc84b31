"""A pipeline dataset (or a sparkmv table) read as a stream by a Python flow:
``spark.readStream.table("b")``.

This Spark has no Iceberg streaming source, so while a flow's function runs,
``DataStreamReader.table`` of a name that is a sparkmv Iceberg table (a materialized view or
streaming table of the pipeline, or any sparkmv table) returns a stream of Spark's Parquet
file source over a **feed**: a directory, one per (streaming table, flow, source), under
``<storage>/_checkpoints/_feeds/``. Before the flow's stream runs, the feed is given the rows
that are new in the source since the snapshot it last exported (:meth:`Feed.export`), as
Parquet files named after the source's snapshot; the file source's checkpoint (the flow's,
:mod:`.python_stream`) then reads each file once, so each new row is appended once.

"New rows" of the source between the exported snapshot and its current one are the rows of
the data files the current snapshot added, less (as a multiset, ``exceptAll``) the rows of the
files it removed: for an ``append`` the appended rows; for a materialized view recomputed in
full (an ``overwrite`` of every file) the rows that its new contents hold beyond its old ones.
Rows retracted from the source are not retracted from the streaming table (it is
append-only). This is a deliberate difference from ``spark-pipelines``, whose file-table
stream re-reads every file an overwrite writes (appending the view's whole new contents
again) and whose Delta stream fails on it unless ``skipChangeCommits`` (which appends
nothing): sparkmv appends what is new, the one reading that neither duplicates nor loses a row.

The first export (and every one after a full refresh of the reading table, or after the
source table was replaced by a new one) gives every row of the source's current snapshot.
Exactly once: the feed's ``_position.json`` records the exported snapshot and the files
exported (written last, by rename); files a crashed export left behind, never read by a
stream (the stream runs only after an export completed), are deleted by the next export.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkmv.names import ObjectName
from sparkmv.storage import warehouse

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkmv.client.client import Client

POSITION = "_position.json"


@dataclass(frozen=True)
class Feed:
    """The feed of ``source`` (a sparkmv Iceberg table) for one flow: its ``directory``."""

    source: ObjectName
    directory: str

    def export(self, client: Client, reset: bool) -> int:
        """Give the feed the source's new rows (rules in the module docstring); ``reset``:
        start over (every row of the current snapshot). The rows exported."""
        store = client.runtime.iceberg
        table = store.load(self.source)
        if reset:
            warehouse.remove_tree(self.directory)
        state = _position(self.directory)
        current = table.current_snapshot()
        table_id = str(table.metadata.table_uuid)
        if current is None or (state and state["table"] == table_id and state["snapshot"] == current.snapshot_id):
            return 0
        old: set[str] = set()
        if state and state["table"] == table_id and table.snapshot_by_id(state["snapshot"]) is not None:
            old = _files(table, state["snapshot"])
        new = _files(table, current.snapshot_id)
        exported = list(state["files"]) if state else []
        for entry in warehouse.list_dir(self.directory):  # a crashed export's files: never read
            if not entry.name.startswith(("_", ".")) and entry.name not in exported:
                warehouse.remove_file(warehouse.join(self.directory, entry.name))
        rows, names = self._write(client, table, sorted(new - old), sorted(old - new), current.snapshot_id)
        _write_position(self.directory, {"table": table_id, "snapshot": current.snapshot_id, "files": exported + names})
        return rows

    def _write(
        self, client: Client, table: Any, added: list[str], removed: list[str], snapshot: int
    ) -> tuple[int, list[str]]:
        """Write ``added``'s rows less ``removed``'s as ``snap-<snapshot>-<n>.parquet``."""
        if not added:
            return 0, []
        columns = [f"`{c}`" for c in table.schema().as_arrow().names]
        spark = client.spark
        df = spark.read.parquet(*[warehouse.spark_path(p) for p in added]).select(*columns)
        if removed:
            df = df.exceptAll(spark.read.parquet(*[warehouse.spark_path(p) for p in removed]).select(*columns))
        temp = warehouse.join(self.directory, f".tmp-{uuid.uuid4().hex}")
        df.write.mode("overwrite").parquet(warehouse.spark_path(temp))
        names: list[str] = []
        rows = 0
        parts = [f for f in warehouse.list_files(temp) if f.name.endswith(".parquet") and not f.name.startswith(".")]
        for n, part in enumerate(sorted(parts, key=lambda f: f.name)):
            rows += int(warehouse.parquet_metadata(part.path).num_rows)
            names.append(f"snap-{snapshot}-{n}.parquet")
            warehouse.rename(part.path, warehouse.join(self.directory, names[-1]))
        warehouse.remove_tree(temp)
        return rows, names


def _files(table: Any, snapshot_id: int) -> set[str]:
    return {t.file.file_path for t in table.scan(snapshot_id=snapshot_id).plan_files()}


def _position(directory: str) -> dict[str, Any] | None:
    path = warehouse.join(directory, POSITION)
    if not warehouse.exists(path):
        return None
    with warehouse.open_input(path) as f:
        state: dict[str, Any] = json.loads(f.read().decode())
    return state


def _write_position(directory: str, state: dict[str, Any]) -> None:
    temp = warehouse.join(directory, f"_position-{uuid.uuid4().hex}.tmp")
    with warehouse.open_output(temp) as f:
        f.write(json.dumps(state).encode())
    warehouse.rename(temp, warehouse.join(directory, POSITION))


def feed_directory(checkpoints: str, reader: ObjectName, flow: str, source: ObjectName) -> str:
    """``<checkpoints>/_feeds/<reader>/<flow>/<source>``."""
    return warehouse.join(checkpoints, "_feeds", reader.qualified, flow, source.qualified)


@contextmanager
def streamed_tables(
    client: Client, resolve: Callable[[str], ObjectName | None], directory: Callable[[ObjectName], str]
) -> Iterator[list[Feed]]:
    """While the block runs, ``spark.readStream.table(name)`` of a name ``resolve`` maps to a
    sparkmv table (``resolve`` may raise, e.g. for a dataset not yet refreshed) is a stream of
    its feed in ``directory(table)``; the feeds read so are appended to the yielded list.
    Other names are read as Spark reads them."""
    from pyspark.sql.streaming.readwriter import DataStreamReader

    original = DataStreamReader.table
    feeds: list[Feed] = []

    def table(reader: DataStreamReader, tableName: str) -> DataFrame:
        name = resolve(tableName)
        if name is None:
            return original(reader, tableName)
        feed = Feed(name, directory(name))
        warehouse.make_dirs(feed.directory)  # Spark's file source needs its directory
        if feed not in feeds:
            feeds.append(feed)
        schema = client.table(name.qualified).schema
        return client.spark.readStream.schema(schema).parquet(warehouse.spark_path(feed.directory))

    DataStreamReader.table = table  # type: ignore[method-assign, assignment]
    try:
        yield feeds
    finally:
        DataStreamReader.table = original  # type: ignore[method-assign]
