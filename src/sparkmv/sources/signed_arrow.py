"""A signed Iceberg change read and netted in Arrow on the driver, one partition at a time.

Netting (:func:`net_arrow`) cancels a row retracted and added back, as a copy-on-write
rewrite does for every row it keeps. A row's partition is a function of its values (for one
partition spec), so two rows of different partitions never cancel: the change of each
partition is netted on its own, and only its few changed rows outlive the read of its files.
A copy-on-write delete that rewrote every month of TPC-H SF1 ``lineitem`` (two 200 MiB
versions, too much to net at once on the driver) is so netted a month at a time, both
versions of a month read by pyarrow and grouped in memory, with no Spark job and no
shuffle of millions of kept rows: the way DBSP's ``distinct`` consolidates a batch of
signed rows per key, here per partition.

Files written under different partition specs (partition evolution between the two
snapshots) are netted together: their rows may cancel across specs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.table import FileScanTask, Table

from sparkmv.storage.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
else:  # imported where rows are read: a read-only process never loads them
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

SIGN_COLUMN = "__smv_sign"
"""The sign of a signed row: int32, +1 inserted, -1 retracted."""


@dataclass(frozen=True)
class SignedFile:
    """One data file's part in a signed change.

    Attributes:
        task: its scan task (at the pinned snapshot for an added or kept file, at the
            consumed one for a removed file).
        sign: +1 its rows are added, -1 retracted; 0 a kept file whose rows at the positions
            deleted since are retracted (and those no longer deleted added back).
        deletes: read with the task's delete files applied (False: as written).
        before: a kept file's task at the consumed snapshot (its delete files then).
    """

    task: FileScanTask
    sign: int
    deletes: bool = False
    before: FileScanTask | None = None

    @property
    def whole_bytes(self) -> int:
        """Bytes read whole (0 for a kept file, of which only rows at positions stay)."""
        return self.task.file.file_size_in_bytes if self.sign else 0


def partition_groups(files: Iterable[SignedFile]) -> list[list[SignedFile]]:
    """``files`` grouped by the partition of their data file (one group when the files
    are of more than one partition spec: rows may then cancel across partitions).

    >>> from pyiceberg.manifest import DataFile
    >>> from pyiceberg.typedef import Record
    >>> def f(path, month, spec=0):
    ...     d = DataFile.from_args(file_path=path, partition=Record(month), file_size_in_bytes=1)
    ...     d.spec_id = spec
    ...     return SignedFile(FileScanTask(d), -1)
    >>> [[s.task.file.file_path for s in g] for g in partition_groups([f("a", 1), f("b", 2), f("c", 1)])]
    [['a', 'c'], ['b']]
    >>> len(partition_groups([f("a", 1), f("b", 2, spec=1)]))
    1
    """
    files = list(files)
    if len({f.task.file.spec_id for f in files}) > 1:
        return [files] if files else []
    groups: dict[tuple[object, ...], list[SignedFile]] = {}
    for f in files:
        key: tuple[object, ...] = tuple(f.task.file.partition)  # type: ignore[arg-type]
        groups.setdefault(key, []).append(f)
    return list(groups.values())


def net_by_partition(
    table: Table, files: list[SignedFile], columns: list[str], max_group_bytes: int, max_rows: int
) -> pa.Table | None:
    """The signed rows of ``files`` in ``columns`` and :data:`SIGN_COLUMN`, netted per
    distinct row (:func:`net_arrow`), partition by partition (:func:`partition_groups`),
    a few partitions at a time.

    None, having read nothing, when one partition's files read whole total more than
    ``max_group_bytes``; None when the netted rows exceed ``max_rows`` or Arrow cannot group
    these columns (nested types): the caller nets the change in Spark instead.
    """
    groups = partition_groups(files)
    if any(sum(f.whole_bytes for f in g) > max_group_bytes for g in groups):
        return None
    changed = _changed_positions_of(table, [f for f in files if not f.sign])
    netted: list[pa.Table] = []
    rows = 0
    # Decoding and grouping are pyarrow's (they release the GIL): a few partitions at once.
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for part in pool.map(lambda g: _net_group(table, g, columns, changed), groups):
            if part is None:
                return None
            rows += part.num_rows
            if rows > max_rows:
                return None
            if part.num_rows:
                netted.append(part)
    if not netted:
        return _no_rows(table, columns)
    return pa.concat_tables(netted, promote_options="permissive")


def _net_group(table: Table, group: list[SignedFile], columns: list[str], changed: pa.Table | None) -> pa.Table | None:
    """The netted signed rows of one partition's files (None: Arrow cannot group them)."""
    out = []
    for f in group:
        if f.sign:
            task = f.task if f.deletes else FileScanTask(f.task.file)
            out.append(signed_rows(scan(table, [task], columns), f.sign))
        elif changed is not None:
            at = _rows_at_positions(table, f.task, changed, columns)
            if at is not None:
                out.append(at)
    out = [t for t in out if t.num_rows]
    if not out:
        return _no_rows(table, columns)
    return net_arrow(pa.concat_tables(out, promote_options="permissive"))


def _no_rows(table: Table, columns: list[str]) -> pa.Table:
    """No signed rows, in ``columns`` (their Iceberg types) and :data:`SIGN_COLUMN`."""
    return signed_rows(scan(table, [], columns), 1)


def _changed_positions_of(table: Table, kept: list[SignedFile]) -> pa.Table | None:
    """The changed positions (:func:`changed_positions`) of the kept files; None for none."""
    if not kept:
        return None
    from sparkmv.storage.position_deletes import deleted_positions

    before = deleted_positions(table.io, [f.before for f in kept if f.before is not None])
    return changed_positions(before, deleted_positions(table.io, [f.task for f in kept]))


def net_arrow(rows: pa.Table) -> pa.Table | None:
    """Signed rows (any columns and :data:`SIGN_COLUMN`, int) netted per distinct row, as
    :func:`sparkmv.sources.signed.netted` does in Spark: one row of sign +1 or -1 per unit
    of each distinct row's net count, rows whose signs cancel left out; None when Arrow
    cannot group these columns (nested types).

    >>> t = pa.table({"k": ["a", "a", "b", "c"], SIGN_COLUMN: pa.array([1, -1, -1, 1], pa.int32())})
    >>> sorted(net_arrow(t.append_column("n", pa.array([1, 1, 2, 3]))).to_pylist(), key=str)
    [{'k': 'b', 'n': 2, '__smv_sign': -1}, {'k': 'c', 'n': 3, '__smv_sign': 1}]
    """
    if not rows.num_rows:
        return rows
    keys = [c for c in rows.column_names if c != SIGN_COLUMN]
    try:
        grouped = rows.group_by(keys, use_threads=False).aggregate([(SIGN_COLUMN, "sum")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    total = grouped.column(f"{SIGN_COLUMN}_sum").to_numpy()
    keep = np.nonzero(total)[0]
    repeat = np.abs(total[keep])
    index = np.repeat(keep, repeat)
    signs = np.repeat(np.sign(total[keep]), repeat).astype(np.int32)
    return grouped.select(keys).take(pa.array(index)).append_column(SIGN_COLUMN, pa.array(signs))


def changed_positions(before: pa.Table, after: pa.Table) -> pa.Table:
    """Positions deleted ``after`` but not ``before`` (sign -1: their rows left the table)
    and deleted before but no longer (sign +1), as ``file_path``, ``pos``, :data:`SIGN_COLUMN`.

    >>> b = pa.table({"file_path": ["f", "f"], "pos": pa.array([1, 2], pa.int64())})
    >>> a = pa.table({"file_path": ["f", "g"], "pos": pa.array([2, 5], pa.int64())})
    >>> changed_positions(b, a).to_pylist()
    [{'file_path': 'g', 'pos': 5, '__smv_sign': -1}, {'file_path': 'f', 'pos': 1, '__smv_sign': 1}]
    """
    keys = ["file_path", "pos"]
    gone = after.join(before, keys, join_type="left anti")
    back = before.join(after, keys, join_type="left anti")
    return pa.concat_tables([signed_rows(gone.select(keys), -1), signed_rows(back.select(keys), 1)])


def scan(table: Table, tasks: list[FileScanTask], columns: list[str]) -> pa.Table:
    """Rows of ``tasks`` (their delete files applied) in ``columns``."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    schema = table.schema()
    present = {f.name.lower() for f in schema.fields}
    projection = schema.select(*[c for c in columns if c.lower() in present], case_sensitive=False)
    return ArrowScan(table.metadata, table.io, projection, AlwaysTrue()).to_table(tasks)


def signed_rows(rows: pa.Table, sign: int) -> pa.Table:
    """``rows`` with :data:`SIGN_COLUMN` = ``sign``."""
    return rows.append_column(SIGN_COLUMN, pa.array([sign] * rows.num_rows, pa.int32()))


def _rows_at_positions(table: Table, task: FileScanTask, changed: pa.Table, columns: list[str]) -> pa.Table | None:
    """The rows of a kept data file (as written) at its changed positions, signed by them."""
    mine = changed.filter(pc.equal(changed.column("file_path"), task.file.file_path))
    if not mine.num_rows:
        return None
    raw = scan(table, [FileScanTask(task.file)], columns)
    return raw.take(mine.column("pos")).append_column(SIGN_COLUMN, mine.column(SIGN_COLUMN))
