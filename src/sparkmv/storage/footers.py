"""The Parquet footers of staged data files, read once per process.

A chunk lists its staged files and reads their footers for the row counts
(:func:`sparkmv.storage.files.collect_staged`); the publish needs the same footers again for
each file's Iceberg data-file entry (column statistics, partition, record count). Reading a
footer is a round trip per file (0.36 s for 84 files, bench/RESULTS.md "Machinery tax"), so
the footers read by the chunk are kept here and the publish of the same process takes them
instead of reading them back. A publish in another process (recovery) finds none and reads
the files, as before: the entry is the same either way, built by pyiceberg's own statistics
code (:func:`data_file`).

Staged files are written once and never changed; an entry is still used only for the same
path and size. The cache holds at most :data:`MAX_ENTRIES` footers (the oldest dropped).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.manifest import DataFile
    from pyiceberg.table.metadata import TableMetadata

MAX_ENTRIES = 20_000
"""Footers kept at most (a footer of a flat table is a few kB)."""

_lock = threading.Lock()
_footers: OrderedDict[str, tuple[int, Any]] = OrderedDict()


def remember(uri: str, size: int, metadata: Any) -> None:
    """Keep the footer ``metadata`` (``pyarrow.parquet.FileMetaData``) of the staged file
    ``uri`` (as it will be committed) of ``size`` bytes."""
    with _lock:
        _footers[uri] = (size, metadata)
        _footers.move_to_end(uri)
        while len(_footers) > MAX_ENTRIES:
            _footers.popitem(last=False)


def take(uri: str) -> tuple[int, Any] | None:
    """The kept ``(size, footer)`` of ``uri``, removed from the cache; None when not kept."""
    with _lock:
        return _footers.pop(uri, None)


def data_file(io: FileIO, metadata: TableMetadata, uri: str) -> DataFile:
    """The Iceberg data-file entry of the Parquet file ``uri`` for a table with ``metadata``:
    from its kept footer when the file still has the kept size, else read from the file
    (pyiceberg's ``parquet_file_to_data_file``).

    Raises:
        OSError: the file is missing or unreadable. ValueError: its schema does not match
            the table's.
    """
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    kept = take(uri)
    if kept is None:
        return parquet_file_to_data_file(io, metadata, uri)
    size, footer = kept
    input_file = io.new_input(uri)
    if len(input_file) != size:
        return parquet_file_to_data_file(io, metadata, uri)
    return _from_footer(metadata, uri, size, footer)


def _from_footer(table_metadata: TableMetadata, uri: str, size: int, footer: Any) -> DataFile:
    """``parquet_file_to_data_file`` (pyiceberg 0.12) with the footer and size given."""
    from pyiceberg.io.pyarrow import (
        _check_pyarrow_schema_compatible,
        compute_statistics_plan,
        data_file_statistics_from_parquet_metadata,
        parquet_path_to_id_mapping,
    )
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    schema = table_metadata.schema()
    arrow_schema = footer.schema.to_arrow_schema()
    _check_pyarrow_schema_compatible(schema, arrow_schema, format_version=table_metadata.format_version)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, table_metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=statistics.partition(table_metadata.spec(), schema),
        file_size_in_bytes=size,
        sort_order_id=None,
        spec_id=table_metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )
