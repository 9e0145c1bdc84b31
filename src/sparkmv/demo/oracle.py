"""An independent oracle for an MV: DuckDB computes its query over the same files and snapshots.

Nothing of sparkmv's reading path is used for the expected side. Each base table the query
names is looked up in sparkmv's catalog (what it is and where: kind, format, location, reader
options, external catalog properties) and read by a reader that shares no code with sparkmv:

- Parquet, CSV and JSON directories by DuckDB itself (``read_parquet`` / ``read_csv`` /
  ``read_json`` with ``hive_partitioning``), with DuckDB's own type inference;
- ORC by ``pyarrow.dataset`` (Arrow's ORC reader, Hive partitions);
- Delta by ``deltalake.DeltaTable(...).to_pyarrow_table()``;
- Iceberg tables (MVs used as bases, refreshable tables, plain tables of sparkmv's pyiceberg
  catalog, tables of external catalogs) by pyiceberg ``scan().to_arrow()`` (position and
  equality deletes applied by pyiceberg), hidden ``__smv_*`` columns dropped.

The Spark SQL query is translated to DuckDB by sqlglot's transpiler (``read="spark"``,
``write="duckdb"``), its table names replaced by the registered relations. The MV side is what
a user reads (``Client.table``); the MV's own Iceberg table, read by pyiceberg, must hold the
same rows on its visible columns. Column names (lower case) and order are compared as well as
the rows, as multisets of normalized values (see :func:`normalize`).

DuckDB is a test oracle only: it is imported lazily, and its absence is a clear error.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sparkmv.client.client import Client
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName, is_hidden_column

SIGNIFICANT_DIGITS = 9
"""Floats and decimals are compared rounded to this many significant digits (DuckDB and
Spark sum in different orders); integers are compared exactly."""
RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE = 1e-6
"""Rows the exact comparison leaves over are paired when their numbers agree within these
(Spark rounds a DECIMAL average to 6 places: an absolute error up to 5e-7)."""
_SHOWN = 10


def require_duckdb() -> Any:
    """The ``duckdb`` module.

    Raises:
        SparkMvError: when DuckDB is not installed (it is a dev dependency).
    """
    try:
        import duckdb
    except ImportError as exc:  # pragma: no cover - duckdb is a dev dependency
        raise SparkMvError(
            "the MV check needs DuckDB (the independent oracle): install it with `make install` "
            "or `pip install 'duckdb>=1.1,<3'`"
        ) from exc
    return duckdb


@dataclass
class Comparison:
    """The MV against its query computed by DuckDB.

    ``mv_columns`` / ``expected_columns``: lower-case column names in order;
    ``only_in_mv`` / ``only_in_query``: normalized rows of the multiset differences;
    ``stored_only`` / ``stored_missing``: rows the MV's Iceberg table (visible columns)
    holds more / fewer than ``Client.table``; ``hidden_columns``: its ``__smv_*`` columns.
    """

    mv_columns: list[str]
    expected_columns: list[str]
    only_in_mv: list[tuple[Any, ...]] = field(default_factory=list)
    only_in_query: list[tuple[Any, ...]] = field(default_factory=list)
    stored_only: list[tuple[Any, ...]] = field(default_factory=list)
    stored_missing: list[tuple[Any, ...]] = field(default_factory=list)
    hidden_columns: list[str] = field(default_factory=list)
    rows: int = 0

    @property
    def ok(self) -> bool:
        """True when columns, rows and the stored table all agree."""
        return (
            self.mv_columns == self.expected_columns
            and not self.only_in_mv
            and not self.only_in_query
            and not self.stored_only
            and not self.stored_missing
        )

    def describe(self) -> str:
        """A readable account of every difference (empty when :attr:`ok`)."""
        out: list[str] = []
        if self.mv_columns != self.expected_columns:
            out.append(f"columns differ: MV {self.mv_columns} vs query {self.expected_columns}")
        for label, rows in (
            ("rows only in the MV", self.only_in_mv),
            ("rows only in the query result (DuckDB)", self.only_in_query),
            ("rows only in the MV's Iceberg table", self.stored_only),
            ("rows missing from the MV's Iceberg table", self.stored_missing),
        ):
            if rows:
                out.append(f"{len(rows)} {label}: {sorted(rows, key=_sort_key)[:_SHOWN]}")
        return "\n".join(out)


def compare_mv(client: Client, mv: str, query: str, duck_query: str | None = None) -> Comparison:
    """Compare MV ``mv`` with ``query`` (Spark SQL) computed by DuckDB over the base tables.

    ``duck_query``: a DuckDB query to use instead of transpiling ``query`` (for Spark-only
    functions); it names the base tables as the Spark query does.

    Raises:
        SparkMvError: DuckDB missing, or a base table of a kind the oracle cannot read.
    """
    duckdb = require_duckdb()
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        sql = _bind_query(client, con, duck_query or query, "duckdb" if duck_query else "spark")
        result = con.execute(sql)
        expected_columns = [d[0].lower() for d in result.description]
        expected = [normalize_row(r) for r in result.fetchall()]
    finally:
        con.close()
    table = client.table(mv)
    mv_rows = [normalize_row(tuple(r)) for r in table.collect()]
    cmp = Comparison([c.lower() for c in table.columns], expected_columns, rows=len(mv_rows))
    cmp.only_in_mv, cmp.only_in_query = _differences(mv_rows, expected)
    stored, cmp.hidden_columns = _stored_rows(client, mv, table.columns)
    cmp.stored_only, cmp.stored_missing = _differences(stored, mv_rows)
    return cmp


def oracle_rows(client: Client, query: str) -> list[tuple[Any, ...]]:
    """The rows of ``query`` (Spark SQL) computed by DuckDB over the base tables it names,
    read as :func:`compare_mv` reads them (normalized, in DuckDB's order).

    Raises:
        SparkMvError: DuckDB missing, or a base table of a kind the oracle cannot read.
    """
    con = require_duckdb().connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        return [normalize_row(r) for r in con.execute(_bind_query(client, con, query, "spark")).fetchall()]
    finally:
        con.close()


def _differences(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any]]:
    """The multiset differences (a - b, b - a); rows left over by the exact comparison are
    then paired when every value is :func:`close` (Spark's DECIMAL average is rounded to 6
    places where DuckDB's DOUBLE is not)."""
    ca, cb = Counter(a), Counter(b)
    left, right = list((ca - cb).elements()), list((cb - ca).elements())
    candidates: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for row in right:
        candidates.setdefault(_exact_part(row), []).append(row)
    unmatched: list[tuple[Any, ...]] = []
    for row in left:
        group = candidates.get(_exact_part(row), [])
        match = next((i for i, other in enumerate(group) if _rows_close(row, other)), None)
        if match is None:
            unmatched.append(row)
        else:
            group.pop(match)
    return unmatched, [row for group in candidates.values() for row in group]


def _exact_part(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The values of ``row`` compared exactly (numbers replaced by a marker)."""
    return tuple(0 if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in row)


def _rows_close(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b, strict=True))


def close(a: Any, b: Any) -> bool:
    """Equal, or both numbers within a relative :data:`RELATIVE_TOLERANCE` or an absolute
    :data:`ABSOLUTE_TOLERANCE`.

    >>> close(25.503333, 25.5033333), close(0.051594, 0.0515942029), close(1, 2), close("a", "a")
    (True, True, False, True)
    >>> close(1000000, 1000001)
    False
    """
    if isinstance(a, int) and isinstance(b, int):
        return a == b  # integers exactly (an integral decimal or float was made an int)
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)
    return bool(a == b)


def _stored_rows(client: Client, mv: str, columns: list[str]) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The rows of the MV's own Iceberg table on ``columns`` (pyiceberg), and its hidden columns."""
    data = client.runtime.iceberg.load(ObjectName.parse(mv)).scan().to_arrow()
    hidden = [c for c in data.column_names if is_hidden_column(c)]
    by_lower = {c.lower(): c for c in data.column_names}
    picked = data.select([by_lower[c.lower()] for c in columns if c.lower() in by_lower])
    return [normalize_row(tuple(r.values())) for r in picked.to_pylist()], hidden


# ---------------------------------------------------------------------------------------------
# the query: sqlglot's transpiler, table names replaced by the registered relations


def _bind_query(client: Client, con: Any, query: str, dialect: str) -> str:
    """Register every base table ``query`` names in ``con`` and return the DuckDB SQL."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(query, read=dialect)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    relations: dict[str, str] = {}
    for node in list(tree.find_all(exp.Table)):
        parts = [p for p in (node.catalog, node.db, node.name) if p]
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        name = ObjectName.parse(".".join(parts))
        key = ".".join(p for p in (name.catalog, name.namespace, name.name) if p)
        if key not in relations:
            relations[key] = f"__oracle_{len(relations)}"
            _register(client, con, name, relations[key])
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name))
        node.replace(exp.Table(this=exp.to_identifier(relations[key]), alias=alias))
    return str(sqlglot.transpile(tree.sql(dialect=dialect), read=dialect, write="duckdb")[0])


def _register(client: Client, con: Any, name: ObjectName, relation: str) -> None:
    """Make base table ``name`` the DuckDB relation ``relation``, read independently of sparkmv."""
    if name.catalog:
        con.register(relation, _visible(_external_catalog_table(client, name).scan().to_arrow()))
        return
    rt = client.runtime
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, name)
    if row is None or str(row.kind) != "EXTERNAL_TABLE":
        # an MV, a refreshable table or a plain table of sparkmv's pyiceberg catalog
        con.register(relation, _visible(rt.iceberg.load(name).scan().to_arrow()))
        return
    fmt = (row.format or "parquet").lower()
    location = _local_path(row.location or "")
    options = {k.lower(): v for k, v in dict((row.options or {}).get("read_options", {})).items()}
    if fmt == "delta":
        from deltalake import DeltaTable

        con.register(relation, DeltaTable(location).to_pyarrow_table())
    elif fmt == "orc":
        con.register(relation, _orc(location))
    elif fmt in ("parquet", "csv", "json"):
        con.execute(f"CREATE VIEW {relation} AS SELECT * FROM {_file_scan(fmt, location, options)}")
    else:
        raise SparkMvError(f"oracle: base table '{name.display}' has format {fmt!r}, which it cannot read")


def _visible(data: Any) -> Any:
    """An Arrow table without sparkmv's hidden ``__smv_*`` columns."""
    return data.select([c for c in data.column_names if not is_hidden_column(c)])


def _local_path(location: str) -> str:
    return location.removeprefix("file://").rstrip("/") or "/"


def _data_files(root: str) -> list[str]:
    """Every data file under ``root``: Hadoop's rule, names starting ``_`` or ``.`` (files and
    directories) are not data, nor are ``.crc`` checksums."""
    out: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        out += [
            str(Path(directory) / f) for f in sorted(files) if not f.startswith(("_", ".")) and not f.endswith(".crc")
        ]
    return out


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _file_scan(fmt: str, location: str, options: dict[str, Any]) -> str:
    """DuckDB's table function over the data files of ``location`` (Hive partitions,
    DuckDB's own type inference)."""
    files = _data_files(location)
    if not files:
        raise SparkMvError(f"oracle: no data files under {location}; the oracle infers no empty schema")
    listed = "[" + ", ".join(_sql_text(f) for f in files) + "]"
    args = ["hive_partitioning = true", "union_by_name = true"]
    if fmt == "csv":
        header = str(options.get("header", "false")).lower() == "true"
        args.append(f"header = {str(header).lower()}")
        sep = options.get("sep", options.get("delimiter"))
        if sep:
            args.append(f"delim = {_sql_text(str(sep))}")
    function = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}[fmt]
    return f"{function}({listed}, {', '.join(args)})"


def _orc(location: str) -> Any:
    """An ORC directory through Arrow's ORC reader, with Hive partition columns."""
    import pyarrow.dataset as ds

    partitioning = ds.HivePartitioning.discover(infer_dictionary=False)
    return ds.dataset(
        _data_files(location), format="orc", partitioning=partitioning, partition_base_dir=location
    ).to_table()


def _external_catalog_table(client: Client, name: ObjectName) -> Any:
    """A table of an external Iceberg catalog, loaded by pyiceberg from the catalog's
    registered properties (``env:NAME`` values resolved, sparkmv's own keys dropped)."""
    from pyiceberg.catalog import load_catalog

    rt = client.runtime
    with rt.catalog.read() as s:
        row = rt.catalog.external_catalogs.find(s, name.catalog)
    if row is None:
        raise SparkMvError(f"oracle: external catalog '{name.catalog}' is not registered")
    props: dict[str, str] = {}
    for key, value in dict(row.properties).items():
        value = os.environ.get(value[4:], "") if value.startswith("env:") else value
        if key.lower() == "iceberg.catalog.type":
            props["type"] = value.lower()
        elif key.lower() != "type" and not key.lower().startswith("sparkmv."):
            props[key] = value
    load_name = props.pop("iceberg.catalog.name", name.catalog)
    return load_catalog(load_name, **props).load_table((name.namespace, name.name))


# ---------------------------------------------------------------------------------------------
# values


def normalize(value: Any) -> Any:
    """One value in a form both engines agree on: integers exact (an integral decimal or
    float becomes an int), other decimals and floats rounded to :data:`SIGNIFICANT_DIGITS`
    significant digits, timestamps naive UTC, bytes as ``bytes``, nested values recursively.

    >>> normalize(Decimal("2.50")), normalize(3.0), normalize(1 / 3)
    (2.5, 3, 0.333333333)
    """
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, (float, Decimal)):
        number = float(value)
        if not math.isfinite(number):
            return repr(number)
        if value == int(value) and abs(number) < 2**53:
            return int(value)
        return float(f"{number:.{SIGNIFICANT_DIGITS}g}")
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, date):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), normalize(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(normalize(v) for v in value)
    return value


def normalize_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """:func:`normalize` on every value of ``row``."""
    return tuple(normalize(v) for v in row)


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((v is None, str(v)) for v in row)
