"""Pinned input: the exact files of every base partition a run reads.

A run pins its input once, at plan time, and stores it in the run's plan; every chunk,
also after a resume, reads exactly these files. Plain Python (no Spark), JSON-able.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from sparkmv.storage.partition_values import PartitionText, PartitionValueError, canonical, kind_of_spark_type

UNPARTITIONED = ""
LISTED_FORMATS = ("parquet", "csv", "json", "orc", "text")
"""Kinds of external tables that are directories of files, changes detected by listing."""
HIVE_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
"""The directory name of the NULL partition in a Hive-style path (Spark's and Hive's)."""


@lru_cache(maxsize=1024)
def _kinds(schema_json: str, columns: tuple[str, ...]) -> dict[str, str]:
    try:
        fields = json.loads(schema_json).get("fields", [])
    except (ValueError, AttributeError):
        fields = []
    types = {f["name"].lower(): f["type"] for f in fields if isinstance(f, dict) and "name" in f}
    return {
        c.lower(): kind_of_spark_type(t) if isinstance(t := types.get(c.lower(), "string"), str) else "string"
        for c in columns
    }


@dataclass(frozen=True)
class PinnedPartition:
    """One base partition as pinned.

    Attributes:
        files: absolute paths or URIs of its data files.
        version: opaque version (Parquet: ``n=<files>;b=<bytes>;m=<newest mtime ns>;h=<names
            hash>``; Iceberg: the last-updated snapshot id).
        changed_at: epoch seconds of the newest change, if known.
        bytes: total size in bytes; rows: row count when known (Iceberg), else None.
        file_stats: Parquet only: per file of ``files``, aligned, ``[size_bytes, mtime_ns]``
            (what the change log of :mod:`sparkmv.sources.changes` compares); None for
            Iceberg and for positions pinned before the listing was kept.
        delete_files: Iceberg delete files applying to ``files`` (an external table's
            partition with any is read through pyiceberg, which applies them).
    """

    files: list[str]
    version: str
    changed_at: float | None = None
    bytes: int = 0
    rows: int | None = None
    file_stats: list[list[int]] | None = None
    delete_files: int = 0


_PARTITION_FIELDS = fields(PinnedPartition)


def _plain(value: Any) -> Any:
    """``value`` with its lists and dicts copied (leaves are str, int, float, bool or None)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class PinnedTable:
    """One base table as pinned by a run.

    Attributes:
        name: qualified base table name.
        kind: ``parquet``, ``csv``, ``json``, ``orc`` (listed directories), ``delta`` (a
            Delta Lake table, ``snapshot_id`` its version), ``iceberg`` (Iceberg tables and MVs), ``refreshable`` (a
            refreshable table: Iceberg, with its reload run and changelog position) or
            ``changelog`` (the changelog rows of a refreshable table's delta, signed) or
            ``signed`` (the signed change of an Iceberg table, :mod:`sparkmv.sources.signed`).
        schema_json: Spark schema JSON used to read the files.
        partition_columns: Hive/identity partition columns, outermost first.
        partitions: partition path (``col=value[/col2=value2]``, ``""`` unpartitioned) ->
            pinned partition.
        location: base directory for Parquet tables (Spark's ``basePath``).
        snapshot_id: pinned snapshot for Iceberg tables.
        reload_run_id: refreshable tables (kind ``refreshable``): the reload run whose
            result the pinned snapshot holds (0 before the first reload).
        changelog_snapshot_id: refreshable tables: the snapshot of the changelog table,
            read before the table's (so every later run's changelog comes after it).
        row_filter: a Spark SQL condition the rows read must meet (a changelog delta:
            ``run_id > 3 AND run_id <= 5``); None reads every row.
        partition_transforms: tables of an external Iceberg catalog: per partition
            column, its Iceberg transform (``identity``, ``year``, ``month``, ``day``,
            ``hour``); a partition key holds the first value of the source column it covers.
            Empty: identity.
        partition_reason: why a partitioned table is no reference table for partition
            change tracking (``bucket``, ``truncate``, spec evolution); None otherwise.
        catalog_properties: tables of an external Iceberg catalog: the catalog's
            properties as registered (secrets only as ``env:NAME``), to load it again.
        read_options: Spark reader options of an external CSV/JSON/ORC table
            (``{"header": "true"}``); None otherwise.
        since_snapshot_id: kind ``signed``: the consumed snapshot the change starts from
            (``snapshot_id`` is where it ends); None otherwise.
        files_from_snapshot: True when every partition holds all the live data files of
            snapshot ``snapshot_id`` in it (an external Iceberg table pinned whole, no delete
            files): :meth:`to_json` then stores no file lists (a reference to the
            snapshot), and a reader recomputes them from the snapshot's manifests
            (:func:`sparkmv.sources.external_tables.snapshot_files`). A delta built from
            such a table (a subset of its files) must set it False.
    """

    name: str
    kind: str
    schema_json: str
    partition_columns: list[str]
    partitions: dict[str, PinnedPartition] = field(default_factory=dict)
    location: str | None = None
    snapshot_id: int | None = None
    reload_run_id: int | None = None
    changelog_snapshot_id: int | None = None
    row_filter: str | None = None
    partition_transforms: list[str] = field(default_factory=list)
    partition_reason: str | None = None
    catalog_properties: dict[str, str] | None = None
    read_options: dict[str, str] | None = None
    since_snapshot_id: int | None = None
    files_from_snapshot: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (stored in the run's plan); without file lists when
        :attr:`files_from_snapshot`."""
        # Not dataclasses.asdict: it deep-copies every string, ~0.2 s per run for a table of
        # 2,500 partitions (an external Iceberg table by day); every leaf here is immutable.
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "partitions"}
        omit = {"files"} if self.files_from_snapshot and self.kind == "iceberg" else set()
        out["partitions"] = {
            k: {f.name: [] if f.name in omit else _plain(getattr(p, f.name)) for f in _PARTITION_FIELDS}
            for k, p in self.partitions.items()
        }
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PinnedTable:
        """Inverse of :meth:`to_json`."""
        parts = {k: PinnedPartition(**v) for k, v in data["partitions"].items()}
        return cls(**{**data, "partitions": parts})

    def total_bytes(self) -> int:
        """Bytes of the pinned data files, over every partition."""
        return sum(p.bytes for p in self.partitions.values())

    def versions(self) -> dict[str, str]:
        """Partition path -> version."""
        return {k: p.version for k, p in self.partitions.items()}

    def partition_kinds(self) -> dict[str, str]:
        """Partition column (lower case) -> kind of its typed values
        (:mod:`sparkmv.storage.partition_values`), from the stored schema."""
        return _kinds(self.schema_json, tuple(self.partition_columns))

    def value(self, path: str, column: str) -> PartitionText:
        """The value of partition column ``column`` in partition path ``path``, in the one
        text form of its kind (a Hive directory ``d=2024-01-01T00:00`` of a timestamp
        column is ``2024-01-01 00:00:00``); a text that is not of the kind stays as it is.

        >>> t = PinnedTable("t", "parquet", '{"type": "struct", "fields": [{"name": "ts", '
        ...                 '"type": "timestamp_ntz", "nullable": true, "metadata": {}}]}', ["ts"])
        >>> t.value("ts=2024-01-01T10%3A00", "ts"), t.value("ts=__HIVE_DEFAULT_PARTITION__", "ts")
        ('2024-01-01 10:00:00', None)
        """
        return _value(path, column, self.partition_kinds().get(column.lower(), "string"))


@lru_cache(maxsize=65536)
def _value(path: str, column: str, kind: str) -> PartitionText:
    """:meth:`PinnedTable.value` (a pure function, cached: a planner maps every base
    partition of every run, thousands for a table partitioned by day)."""
    raw = partition_values(path).get(column)
    try:
        return canonical(raw, kind)
    except PartitionValueError:
        return raw


def partition_values(path: str) -> dict[str, str | None]:
    """Column -> value of a Hive-style partition path.

    >>> partition_values("l_shipmonth=1995-02")
    {'l_shipmonth': '1995-02'}
    >>> partition_values("y=1995/m=__HIVE_DEFAULT_PARTITION__")
    {'y': '1995', 'm': None}
    >>> partition_values("")
    {}
    """
    out: dict[str, str | None] = {}
    if not path:
        return out
    for part in path.split("/"):
        col, _, raw = part.partition("=")
        value = unquote(raw)
        out[col] = None if value == HIVE_NULL_PARTITION else value
    return out


def partition_path(column: str, value: str | None) -> str:
    """Hive-style path of one identity partition value.

    >>> partition_path("d", "1995-01-02")
    'd=1995-01-02'
    """
    from urllib.parse import quote

    text = HIVE_NULL_PARTITION if value is None else quote(value, safe=" -_.:")
    return f"{column}={text}"
