"""The associated source of a refreshable table: pin its listing, load it into staging.

Files: the listing (name, size, modification time) of the files matching ``match_pattern``
directly under ``path`` is pinned in the run; loading reads exactly those files (and fails
if one changed since). JDBC: the query is read through Spark's JDBC source with a driver
jar that is configured or installed, never downloaded (see :mod:`.jdbc`); without one,
PostgreSQL URLs are read with psycopg instead.

Loading checks every row (types, NULL keys/NOT NULL columns) with ``raise_error`` inside
the Spark job, resolves duplicate keys (``OVERWRITE``: last in file-name order then row
order; ``IGNORE``: first) and writes the rows to staging partitioned by ``_vnode``.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sparkmv.errors import SourceError
from sparkmv.refresh.reload import jdbc
from sparkmv.refresh.reload.options import VNODE_COLUMN, TableDef
from sparkmv.storage import warehouse
from sparkmv.storage.files import PARTITION_COPY

CORRUPT = "__smv_corrupt"
MARK = "SMVBAD"
_ORDER = "__smv_order"


@dataclass(frozen=True)
class SourceFile:
    """One pinned source file: name (relative to ``path``), size in bytes, mtime in ns."""

    name: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class StagedLoad:
    """The staged source of a run, recorded in the run's plan once fully written.

    Attributes:
        directory: the load attempt directory.
        vnodes: vnode -> (file URIs, rows) of its staged files (vnodes without rows absent).
        rows: total staged rows (after duplicate resolution).
    """

    directory: str
    vnodes: dict[int, tuple[list[str], int]]
    rows: int

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "directory": self.directory,
            "rows": self.rows,
            "vnodes": {str(k): [f, r] for k, (f, r) in self.vnodes.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StagedLoad:
        """Inverse of :meth:`to_json`."""
        return cls(
            data["directory"], {int(k): (list(v[0]), int(v[1])) for k, v in data["vnodes"].items()}, int(data["rows"])
        )


def list_source(tdef: TableDef) -> list[SourceFile]:
    """Pin the file listing of a ``files`` source, sorted by file name (empty for JDBC).

    Raises:
        SourceError: when ``path`` no longer exists.
    """
    opts = tdef.options
    if opts["connector"] != "files":
        return []
    root = warehouse.normalize(opts["path"])
    if not warehouse.is_dir(root):
        raise SourceError(f"Table '{tdef.name}': source path '{root}' does not exist")
    out: list[SourceFile] = []
    for entry in warehouse.list_dir(root):
        if entry.is_dir or entry.name.startswith((".", "_")):
            continue
        if not fnmatch.fnmatchcase(entry.name, opts["match_pattern"]):
            continue
        st = warehouse.stat(entry.path)
        out.append(SourceFile(entry.name, st.size, st.mtime_ns))
    return out


def listing_to_json(files: list[SourceFile]) -> list[dict[str, Any]]:
    """JSON-able listing (stored in the run's plan)."""
    return [asdict(f) for f in files]


def listing_from_json(data: list[dict[str, Any]]) -> list[SourceFile]:
    """Inverse of :func:`listing_to_json`."""
    return [SourceFile(**d) for d in data]


def _check_unchanged(tdef: TableDef, files: list[SourceFile]) -> None:
    root = tdef.options["path"]
    for f in files:
        try:
            st = warehouse.stat(warehouse.join(root, f.name))
        except FileNotFoundError as exc:
            msg = f"Table '{tdef.name}': source file '{f.name}' disappeared after the run pinned it"
            raise SourceError(msg) from exc
        if st.size != f.size or st.mtime_ns != f.mtime_ns:
            raise SourceError(f"Table '{tdef.name}': source file '{f.name}' changed after the run pinned it")


# -- reading ------------------------------------------------------------------------------------
def _declared(tdef: TableDef) -> StructType:
    from pyspark.sql.types import _parse_datatype_string

    return StructType([StructField(c.name, _parse_datatype_string(c.type), True) for c in tdef.columns])


def _read_files(spark: SparkSession, tdef: TableDef, files: list[SourceFile]) -> DataFrame:
    """Declared columns + ``__smv_corrupt`` (raw text of unparsable rows) + ``__smv_order``."""
    opts = tdef.options
    root = opts["path"]
    paths = [warehouse.spark_path(warehouse.join(root, f.name)) for f in files]
    declared = _declared(tdef)
    fmt = opts["format"]
    if fmt == "parquet":
        _check_parquet_columns(tdef, root, files)
        raw = _cast_checked(tdef, spark.read.parquet(*paths), keep_metadata=True)
    else:
        schema = StructType([*declared.fields, StructField(CORRUPT, StringType(), True)])
        reader = spark.read.schema(schema).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        if fmt == "csv":
            raw = (
                reader.option("header", str(opts["csv.header"]).lower())
                .option("sep", opts["csv.delimiter"])
                .option("enforceSchema", "true")
                .csv(paths)
            )
        else:
            raw = reader.json(paths)
    index = F.create_map(*[x for i, f in enumerate(files) for x in (F.lit(f.name), F.lit(i))])
    order = F.struct(
        index[F.col("_metadata.file_name")].alias("f"),
        F.col("_metadata.file_block_start").alias("b"),
        F.monotonically_increasing_id().alias("r"),
    )
    return raw.select(
        *[F.col(f"`{c.name}`") for c in tdef.columns],
        F.col(CORRUPT),
        F.col("_metadata.file_name").alias("__smv_file"),
        order.alias(_ORDER),
    )


def _check_parquet_columns(tdef: TableDef, root: str, files: list[SourceFile]) -> None:
    for f in files:
        names = {n.lower() for n in warehouse.parquet_schema(warehouse.join(root, f.name)).names}
        for c in tdef.columns:
            if c.name not in names:
                raise SourceError(f"Table '{tdef.name}': source file '{f.name}' has no column '{c.name}'")


def _read_jdbc(spark: SparkSession, tdef: TableDef, jars: Sequence[str] | None) -> DataFrame:
    """The JDBC query with the declared columns (by name), ``__smv_corrupt``, ``__smv_order``."""
    raw = jdbc.read_query(spark, tdef.name.display, tdef.options, jars)
    checked = _cast_checked(tdef, raw, keep_metadata=False)
    order = F.struct(F.lit(0).alias("f"), F.lit(0).cast("long").alias("b"), F.monotonically_increasing_id().alias("r"))
    return checked.select(
        *[F.col(f"`{c.name}`") for c in tdef.columns],
        F.col(CORRUPT),
        F.lit("query").alias("__smv_file"),
        order.alias(_ORDER),
    )


def _cast_checked(tdef: TableDef, raw: DataFrame, keep_metadata: bool) -> DataFrame:
    """Declared columns (matched by name, cast with ``try_cast``) and ``__smv_corrupt``:
    ``col=value`` of the first value that does not fit its declared type."""
    by_name = {f.name.lower(): f.name for f in raw.schema.fields}
    cols: list[SparkColumn] = []
    checks: list[SparkColumn] = []
    for field in _declared(tdef).fields:
        if field.name not in by_name:
            raise SourceError(f"Table '{tdef.name}': the source has no column '{field.name}'")
        src = F.col(f"`{by_name[field.name]}`")
        cols.append(src.try_cast(field.dataType).alias(field.name))
        checks.append(
            F.when(
                src.isNotNull() & src.try_cast(field.dataType).isNull(),
                F.concat(F.lit(f"{field.name}="), src.cast("string")),
            )
        )
    corrupt = F.coalesce(*checks) if checks else F.lit(None).cast(StringType())
    extra = [F.col("_metadata")] if keep_metadata else []
    return raw.select(*cols, corrupt.alias(CORRUPT), *extra)


def source_dataframe(
    spark: SparkSession, tdef: TableDef, files: list[SourceFile], jdbc_jars: Sequence[str] | None = None
) -> DataFrame:
    """The source rows, checked, with ``_vnode``, duplicates resolved, repartitioned by vnode.

    ``jdbc_jars`` are the configured JDBC driver jars (:attr:`sparkmv.config.Settings.jdbc_jars`).

    Columns: the declared columns, then ``_vnode int``. Rows that do not fit the declared
    types or have a NULL key / NOT NULL column make the Spark job fail with a marked
    ``raise_error`` message (see :func:`explain_load_error`).
    """
    if tdef.options["connector"] == "files":
        if not files:
            return spark.createDataFrame(
                [], StructType([*_declared(tdef).fields, StructField(VNODE_COLUMN, _int(), True)])
            )
        _check_unchanged(tdef, files)
        df = _read_files(spark, tdef, files)
    else:
        df = _read_jdbc(spark, tdef, jdbc_jars)
    problem = F.when(
        F.col(CORRUPT).isNotNull(), F.concat(F.lit(f"{MARK}|parse|"), F.col("__smv_file"), F.lit("|"), F.col(CORRUPT))
    )
    for c in tdef.columns:
        if c.not_null:
            kind = "nullkey" if c.name in tdef.primary_key else "notnull"
            problem = problem.when(
                F.col(f"`{c.name}`").isNull(),
                F.concat(F.lit(f"{MARK}|{kind}:{c.name}|"), F.col("__smv_file"), F.lit("|")),
            )
    pk_cols = [F.col(f"`{k}`") for k in tdef.primary_key]
    # duplicate keys are rare: find out on the key columns alone (cheap hash aggregate)
    # and skip the (sort-based) duplicate resolution when there are none
    has_duplicates = bool(df.groupBy(*pk_cols).count().where(F.col("count") > 1).limit(1).count())
    checked = df.where(F.when(problem.isNotNull(), F.raise_error(problem)).isNull())
    pk = [F.col(f"`{k}`") for k in tdef.primary_key]
    with_vnode = checked.withColumn(VNODE_COLUMN, F.pmod(F.xxhash64(*pk), F.lit(tdef.vnode_count)).cast("int"))
    parts = max(1, min(tdef.vnode_count, int(spark.conf.get("spark.sql.shuffle.partitions") or "8")))
    clustered = with_vnode.repartition(parts, F.col(VNODE_COLUMN))
    keys = [VNODE_COLUMN, *tdef.primary_key]
    values = tdef.value_columns
    if not has_duplicates:
        out = clustered.select(*[F.col(f"`{c.name}`") for c in tdef.columns], F.col(VNODE_COLUMN))
    elif values:
        pick = F.max_by if tdef.on_conflict == "OVERWRITE" else F.min_by
        packed = F.struct(*[F.col(f"`{v}`") for v in values])
        agg = clustered.groupBy(*[F.col(f"`{k}`") for k in keys]).agg(pick(packed, F.col(_ORDER)).alias("__smv_v"))
        out = agg.select(
            *[
                F.col(f"`{k}`") if k in tdef.primary_key else F.col(f"__smv_v.`{k}`").alias(k)
                for k in [c.name for c in tdef.columns]
            ],
            F.col(VNODE_COLUMN),
        )
    else:
        out = clustered.select(*[F.col(f"`{c.name}`") for c in tdef.columns], F.col(VNODE_COLUMN)).dropDuplicates(keys)
    return out


def _int() -> Any:
    from pyspark.sql.types import IntegerType

    return IntegerType()


def write_load(
    spark: SparkSession,
    tdef: TableDef,
    files: list[SourceFile],
    directory: str,
    jdbc_jars: Sequence[str] | None = None,
) -> StagedLoad:
    """Load the source into ``directory`` (replacing it), one sub-directory per vnode.

    ``jdbc_jars``: the configured JDBC driver jars (:attr:`sparkmv.config.Settings.jdbc_jars`).

    Raises:
        SourceError: a row does not fit the declared types, a key column is NULL, or a
            pinned file changed (the message names the file and line when known).
    """
    warehouse.remove_tree(directory)
    try:
        df = source_dataframe(spark, tdef, files, jdbc_jars)
        df.withColumn(PARTITION_COPY, F.col(VNODE_COLUMN)).write.mode("overwrite").partitionBy(PARTITION_COPY).parquet(
            warehouse.spark_path(directory)
        )
    except Exception as exc:
        explained = explain_load_error(tdef, files, exc)
        if explained is None:
            raise
        raise SourceError(explained) from exc
    vnodes: dict[int, tuple[list[str], int]] = {}
    total = 0
    for part in warehouse.list_dir(directory):
        if not (part.is_dir and part.name.startswith(f"{PARTITION_COPY}=")):
            continue
        vnode = int(part.name.split("=", 1)[1])
        uris: list[str] = []
        rows = 0
        for entry in warehouse.list_dir(part.path):
            if entry.is_dir or not entry.name.endswith(".parquet"):
                continue
            n = warehouse.parquet_metadata(entry.path).num_rows
            if n:
                uris.append(warehouse.file_uri(entry.path))
                rows += n
        if uris:
            vnodes[vnode] = (uris, rows)
            total += rows
    return StagedLoad(warehouse.normalize(directory), vnodes, total)


# -- error messages -------------------------------------------------------------------------------
_MARKED = re.compile(MARK + r"\|([^|]*)\|([^|]*)\|(.*?)(?:\s*SQLSTATE|\n|$)")


def explain_load_error(tdef: TableDef, files: list[SourceFile], exc: BaseException) -> str | None:
    """A clear message for a marked load failure (None when ``exc`` is not one).

    ``Table 't': source rows do not fit the declared types: file 'a.csv' line 3: 'x,abc'``;
    ``Table 't': key column 'id' is NULL in the source: file 'a.csv' line 4``.
    """
    m = _MARKED.search(str(exc))
    if m is None:
        return None
    kind, file_name, detail = m.group(1), m.group(2), m.group(3).strip()
    where = f"file '{file_name}'" if tdef.options["connector"] == "files" else "the JDBC query"
    if kind == "parse":
        line = _find_line(tdef, file_name, lambda text, _row: text.rstrip("\r\n") == detail)
        at = f" line {line}" if line else ""
        types = ", ".join(f"{c.name} {c.type}" for c in tdef.columns)
        return f"Table '{tdef.name}': source rows do not fit the declared types ({types}): {where}{at}: '{detail}'"
    col = kind.split(":", 1)[1]
    idx = [c.name for c in tdef.columns].index(col)
    line = _find_line(tdef, file_name, lambda _text, row: _is_null(row, col, idx))
    at = f" line {line}" if line else ""
    what = "key column" if kind.startswith("nullkey") else "NOT NULL column"
    return f"Table '{tdef.name}': {what} '{col}' is NULL in the source: {where}{at}"


def _is_null(row: Any, col: str, idx: int) -> bool:
    if isinstance(row, dict):
        return {k.lower(): v for k, v in row.items()}.get(col) in (None, "")
    if isinstance(row, list):
        return idx >= len(row) or row[idx].strip() == ""
    return False


def _find_line(tdef: TableDef, file_name: str, test: Any) -> int | None:
    """1-based line (CSV/JSON) or row (Parquet) of the first row passing ``test(text, row)``."""
    opts = tdef.options
    if opts.get("connector") != "files":
        return None
    path = warehouse.join(opts["path"], file_name)
    try:
        if opts["format"] == "parquet":
            table = warehouse.read_parquet(path)
            for i, record in enumerate(table.to_pylist(), start=1):
                if test("", record):
                    return i
            return None
        with warehouse.open_input(path) as fh:
            lines = fh.read().decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    start = 1 if opts["format"] == "csv" and opts["csv.header"] else 0
    for i, text in enumerate(lines):
        if i < start:
            continue
        if opts["format"] == "csv":
            row: Any = next(csv.reader([text], delimiter=opts["csv.delimiter"]), [])
        else:
            try:
                row = json.loads(text)
            except ValueError:
                row = None
        if test(text, row):
            return i + 1
    return None
