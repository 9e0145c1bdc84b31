"""The per-vnode merge of staged source rows into the table, with its changelog.

For a batch of vnodes, staging ``s`` and the table's pinned files ``t`` are joined on the
primary key (Spark picks a sort-merge join for large inputs; full outer):

=================  ==========================================  =======================
key in             OVERWRITE                                   IGNORE
=================  ==========================================  =======================
``s`` only         insert ``I``                                insert ``I``
``t`` only         delete ``D``                                delete ``D``
both, different    update ``U`` (source values)                untouched (table values)
both, equal        untouched                                   untouched
=================  ==========================================  =======================

Only vnodes with at least one change get new table files (the whole vnode, rewritten).
Changelog rows (the format of :mod:`sparkmv.refresh.reload.ddl`) are ``op``, the declared
columns, ``run_id`` and ``sign``: ``I`` (new row, +1); for an update ``U`` (new row, +1)
and ``UB`` (old row, -1); ``D`` (old row, -1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from sparkmv.refresh.reload.options import CHANGELOG_LEAF, SIGN_COLUMN, VNODE_COLUMN, TableDef
from sparkmv.storage import warehouse
from sparkmv.storage.files import PARTITION_COPY, collect_staged, write_staged


@dataclass
class VnodeResult:
    """What the merge did to one vnode: counts of I/U/D and the new table files."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    files: list[str] = field(default_factory=list)
    rows: int = 0

    @property
    def changed(self) -> bool:
        """True when the vnode's table files must be replaced."""
        return bool(self.inserted or self.updated or self.deleted)


@dataclass
class BatchResult:
    """Result of merging one batch of vnodes: per-vnode results and the changelog files."""

    vnodes: dict[int, VnodeResult]
    changelog_files: list[str]
    changelog_rows: int


_OLD = "__smv_old_"
"""Prefix of the old (table) values of a declared column in the merged rows (by position)."""


def changelog_frame(tdef: TableDef, run_id: int, new: DataFrame, old: DataFrame) -> DataFrame:
    """The changelog rows of one batch, columns ``op``, declared columns, ``run_id``, ``sign``.

    Args:
        new: the inserted and updated rows: ``op`` (``I`` / ``U``) and the declared
            columns with their new values; each becomes one row of sign +1.
        old: the updated and deleted rows: ``op`` (``U`` / ``D``) and the declared
            columns with their old (table) values; each becomes ``UB`` / ``D`` of sign -1.
    """
    cols = [F.col(f"`{c.name}`") for c in tdef.columns]
    plus = new.select(F.col("op"), *cols, F.lit(1).alias(SIGN_COLUMN))
    minus = old.select(
        F.when(F.col("op") == "U", F.lit("UB")).otherwise(F.col("op")).alias("op"), *cols, F.lit(-1).alias(SIGN_COLUMN)
    )
    return plus.unionByName(minus).select(
        F.col("op"),
        *cols,
        F.lit(run_id).cast("long").alias("run_id"),
        F.col(SIGN_COLUMN).cast("int").alias(SIGN_COLUMN),
    )


def _schema(spark: SparkSession, tdef: TableDef) -> StructType:
    from pyspark.sql.types import _parse_datatype_string

    return StructType(
        [
            *[StructField(c.name, _parse_datatype_string(c.type), True) for c in tdef.columns],
            StructField(VNODE_COLUMN, IntegerType(), True),
        ]
    )


def _read(spark: SparkSession, files: list[str], schema: StructType, prefix: str) -> DataFrame:
    df = spark.read.schema(schema).parquet(*_spark_paths(files)) if files else spark.createDataFrame([], schema)
    return df.select(
        *[F.col(f"`{f.name}`").alias(prefix + f.name) for f in schema.fields], F.lit(True).alias(prefix + "present")
    )


def merge_batch(
    spark: SparkSession,
    tdef: TableDef,
    run_id: int,
    vnodes: list[int],
    staged_files: list[str],
    table_files: list[str],
    directory: str,
    staged_by_vnode: dict[int, tuple[list[str], int]] | None = None,
    changelog_dir: str | None = None,
    table_by_vnode: dict[int, list[str]] | None = None,
) -> BatchResult:
    """Merge ``vnodes``: staged files vs the table's pinned files of those vnodes.

    With ``ON CONFLICT OVERWRITE`` and ``staged_by_vnode`` (vnode -> staged files, rows)
    the narrow merge of :func:`_merge_overwrite` is used.

    Args:
        staged_files / table_files: Parquet file URIs of exactly these vnodes.
        directory: attempt directory; table files go to ``table/``.
        changelog_dir: attempt directory for the changelog files (default ``directory``);
            they go to its ``__smv_changelog/``. Give one inside the changelog table's own
            location, so that a vacuum of the table never sees them as orphans.
        table_by_vnode: vnode -> the table's pinned files (the narrow merge reads the old
            rows of updated and deleted keys from the changed vnodes' files only); without
            it ``table_files`` are read, filtered on ``_vnode``.

    Returns:
        Per-vnode counts and new files (every vnode of ``vnodes`` present), changelog files.
    """
    changelog_dir = changelog_dir or directory
    if tdef.on_conflict == "OVERWRITE" and staged_by_vnode is not None:
        return _merge_overwrite(
            spark, tdef, run_id, vnodes, staged_by_vnode, table_files, changelog_dir, table_by_vnode
        )
    schema = _schema(spark, tdef)
    s = _read(spark, staged_files, schema, "s__")
    t = _read(spark, table_files, schema, "t__")
    merged = _merged_rows(tdef, s, t).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        results = _merged_counts(merged, vnodes)
        changed = sorted(v for v, r in results.items() if r.changed)
        if not changed:
            return BatchResult(results, [], 0)
        return _write_merged(tdef, run_id, merged, results, changed, directory, changelog_dir)
    finally:
        merged.unpersist()


def _merged_rows(tdef: TableDef, s: DataFrame, t: DataFrame) -> DataFrame:
    """The full outer join of staged rows ``s`` and table rows ``t`` (columns prefixed
    ``s__`` / ``t__``) on the primary key: the kept values of the declared columns,
    ``_vnode``, ``op`` (I / U / D or NULL), ``__keep`` (the key is in the source) and the
    old values (``__smv_old_<i>``) of updated and deleted rows."""
    cond = reduce(lambda a, b: a & b, [F.col(f"s__{k}") == F.col(f"t__{k}") for k in tdef.primary_key])
    j = s.join(t, cond, "full_outer")
    in_s = F.col("s__present").isNotNull()
    in_t = F.col("t__present").isNotNull()
    values = tdef.value_columns
    if values and tdef.on_conflict == "OVERWRITE":
        differs: Column = reduce(lambda a, b: a | b, [~F.col(f"s__{v}").eqNullSafe(F.col(f"t__{v}")) for v in values])
        op = F.when(~in_t, "I").when(~in_s, "D").when(differs, "U")
    else:
        op = F.when(~in_t, "I").when(~in_s, "D")
    keep_source = ~in_t if tdef.on_conflict == "IGNORE" else F.lit(True)

    def value(name: str) -> Column:
        if name in tdef.primary_key:
            return F.coalesce(F.col(f"s__{name}"), F.col(f"t__{name}"))
        return F.when(keep_source, F.col(f"s__{name}")).otherwise(F.col(f"t__{name}"))

    return j.select(
        *[value(c.name).alias(c.name) for c in tdef.columns],
        F.coalesce(F.col(f"s__{VNODE_COLUMN}"), F.col(f"t__{VNODE_COLUMN}")).alias(VNODE_COLUMN),
        op.alias("op"),
        in_s.alias("__keep"),
        # the old row of an update or delete (NULL otherwise: cheap to cache)
        *[F.when(op.isin("U", "D"), F.col(f"t__{c.name}")).alias(f"{_OLD}{i}") for i, c in enumerate(tdef.columns)],
    )


def _write_merged(
    tdef: TableDef,
    run_id: int,
    merged: DataFrame,
    results: dict[int, VnodeResult],
    changed: list[int],
    directory: str,
    changelog_dir: str,
) -> BatchResult:
    """Write the changelog of ``merged`` and the new table files of the ``changed`` vnodes
    (into ``results``' files)."""
    new = merged.where(F.col("op").isin("I", "U"))
    old = merged.where(F.col("op").isin("U", "D")).select(
        F.col("op"), *[F.col(f"{_OLD}{i}").alias(c.name) for i, c in enumerate(tdef.columns)]
    )
    log = changelog_frame(tdef, run_id, new, old)
    log_out = write_staged(log, warehouse.join(changelog_dir, CHANGELOG_LEAF), None, max_files=2)
    table = merged.where(F.col("__keep") & F.col(VNODE_COLUMN).isin(changed)).select(
        *[F.col(f"`{c.name}`") for c in tdef.columns], F.col(VNODE_COLUMN)
    )
    # written straight from the join's tasks (no extra shuffle): at most one file per
    # task and changed vnode
    table_dir = warehouse.join(directory, "table")
    table.withColumn(PARTITION_COPY, F.col(VNODE_COLUMN)).write.mode("overwrite").partitionBy(PARTITION_COPY).parquet(
        warehouse.spark_path(table_dir)
    )
    table_out = collect_staged(table_dir)
    for uri in table_out.files:
        vnode = int(warehouse.name(warehouse.parent(uri)).split("=", 1)[1])
        results[vnode].files.append(uri)
    return BatchResult(results, log_out.files, log_out.rows)


def _merged_counts(merged: DataFrame, vnodes: list[int]) -> dict[int, VnodeResult]:
    """Per-vnode I/U/D counts and rows kept, from the merged rows' ``_vnode`` and ``op``."""
    results = {v: VnodeResult() for v in vnodes}
    for row in merged.groupBy(VNODE_COLUMN, "op").count().collect():
        r = results.setdefault(int(row[VNODE_COLUMN]), VnodeResult())
        n = int(row["count"])
        if row["op"] == "I":
            r.inserted += n
        elif row["op"] == "U":
            r.updated += n
        elif row["op"] == "D":
            r.deleted += n
        if row["op"] != "D":
            r.rows += n
    return results


def _old_rows(
    spark: SparkSession,
    schema: StructType,
    changes: DataFrame,
    vnodes: list[int],
    table_files: list[str],
    table_by_vnode: dict[int, list[str]] | None,
) -> DataFrame:
    """The table's rows of the updated and deleted keys of ``changes`` (``op``, declared
    columns, ``_vnode``), read from the files of ``vnodes`` only (``table_by_vnode``; else
    ``table_files`` filtered on ``_vnode``)."""
    if table_by_vnode is not None:
        files = [f for v in vnodes for f in table_by_vnode.get(v, [])]
    else:
        files = table_files if vnodes else []
    t = _read_files(spark, schema, files)
    keys = [c for c in changes.columns if c not in ("op", VNODE_COLUMN)]
    return t.where(F.col(VNODE_COLUMN).isin(vnodes)).join(
        F.broadcast(changes.where(F.col("op") != "I").drop(VNODE_COLUMN)), keys, "inner"
    )


def _row_hashes(df: DataFrame, values: list[str], prefix: str) -> list[Column]:
    """Two independent 64/32-bit hashes of the value columns (NULL-aware), for equality."""
    parts: list[Column] = []
    for v in values:
        parts += [F.col(f"`{v}`"), F.col(f"`{v}`").isNull()]
    if not parts:
        return [F.lit(0).cast("long").alias(prefix + "h1"), F.lit(0).alias(prefix + "h2")]
    return [F.xxhash64(*parts).alias(prefix + "h1"), F.hash(*parts).alias(prefix + "h2")]


def _merge_overwrite(
    spark: SparkSession,
    tdef: TableDef,
    run_id: int,
    vnodes: list[int],
    staged_by_vnode: dict[int, tuple[list[str], int]],
    table_files: list[str],
    changelog_dir: str,
    table_by_vnode: dict[int, list[str]] | None = None,
) -> BatchResult:
    """``OVERWRITE`` merge on narrow rows: key, vnode and two hashes of the values.

    The source is the truth, so a changed vnode's new table files *are* its staged files
    (declared columns + ``_vnode``, written by the load): nothing is rewritten. Only the
    changelog's rows are read back (joined with the small set of changed keys): inserted
    and updated rows from staging, the old rows of updated and deleted keys from the
    table's files of the vnodes that have such keys. Two values are equal when both
    hashes are (xxhash64 and murmur3, 96 bits).
    """
    schema = _schema(spark, tdef)
    staged_files = [f for v in vnodes for f in staged_by_vnode.get(v, ([], 0))[0]]
    s = _read_files(spark, schema, staged_files)
    t = _read_files(spark, schema, table_files)
    changes = _narrow_changes(tdef, s, t).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        results = _overwrite_counts(changes, vnodes, staged_by_vnode)
        changed = [v for v, r in results.items() if r.changed]
        if not changed:
            return BatchResult(results, [], 0)
        new = s.join(F.broadcast(changes.where(F.col("op") != "D").drop(VNODE_COLUMN)), tdef.primary_key, "inner")
        retracted = sorted(v for v in changed if results[v].updated or results[v].deleted)
        old = _old_rows(spark, schema, changes, retracted, table_files, table_by_vnode)
        log = changelog_frame(tdef, run_id, new, old)
        log_out = write_staged(log, warehouse.join(changelog_dir, CHANGELOG_LEAF), None, max_files=2)
        for v in changed:
            results[v].files = list(staged_by_vnode.get(v, ([], 0))[0])
        return BatchResult(results, log_out.files, log_out.rows)
    finally:
        changes.unpersist()


def _read_files(spark: SparkSession, schema: StructType, files: list[str]) -> DataFrame:
    """The rows of Parquet ``files`` read with ``schema`` (an empty frame when none)."""
    return spark.read.schema(schema).parquet(*_spark_paths(files)) if files else spark.createDataFrame([], schema)


def _narrow_changes(tdef: TableDef, s: DataFrame, t: DataFrame) -> DataFrame:
    """The changed keys of an ``OVERWRITE`` merge of staged rows ``s`` into table rows
    ``t``: primary key columns, ``_vnode`` and ``op`` (I / U / D), from a full outer join
    of narrow rows (key, vnode, two hashes of the values)."""
    values = tdef.value_columns
    pk = tdef.primary_key

    def narrow(df: DataFrame, prefix: str) -> DataFrame:
        return df.select(
            *[F.col(f"`{k}`").alias(prefix + k) for k in pk],
            F.col(VNODE_COLUMN).alias(prefix + "vn"),
            *_row_hashes(df, values, prefix),
        )

    ns, nt = narrow(s, "s__"), narrow(t, "t__")
    cond = reduce(lambda a, b: a & b, [F.col(f"s__{k}") == F.col(f"t__{k}") for k in pk])
    j = ns.join(nt, cond, "full_outer")
    in_s, in_t = F.col("s__vn").isNotNull(), F.col("t__vn").isNotNull()
    differs = (F.col("s__h1") != F.col("t__h1")) | (F.col("s__h2") != F.col("t__h2"))
    op = F.when(~in_t, "I").when(~in_s, "D").when(differs, "U")
    return j.select(
        *[F.coalesce(F.col(f"s__{k}"), F.col(f"t__{k}")).alias(k) for k in pk],
        F.coalesce(F.col("s__vn"), F.col("t__vn")).alias(VNODE_COLUMN),
        op.alias("op"),
    ).where(F.col("op").isNotNull())


def _overwrite_counts(
    changes: DataFrame, vnodes: list[int], staged_by_vnode: dict[int, tuple[list[str], int]]
) -> dict[int, VnodeResult]:
    """Per-vnode I/U/D counts of ``changes``; a vnode's rows are its staged rows."""
    results = {v: VnodeResult(rows=staged_by_vnode.get(v, ([], 0))[1]) for v in vnodes}
    for row in changes.groupBy(VNODE_COLUMN, "op").count().collect():
        r = results[int(row[VNODE_COLUMN])]
        setattr(r, {"I": "inserted", "U": "updated", "D": "deleted"}[row["op"]], int(row["count"]))
    return results


def _spark_paths(files: list[str]) -> list[str]:
    """Recorded file URIs as Spark reads them (``s3a://`` for ``s3://``)."""
    return [warehouse.spark_path(f) for f in files]
