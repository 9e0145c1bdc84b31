"""Harness of the incremental-refresh differential tests: base tables appended to as an
outside writer would (Parquet files or Iceberg snapshots), MV queries in Spark SQL and in
DuckDB (the oracle), and a typed multiset comparison.

The world of one generated example holds four base tables, each either an external Parquet
table (``CREATE EXTERNAL TABLE ... USING parquet``; an append is a new file, ``fact`` is
Hive-partitioned by ``p``) or an Iceberg table of sparkmv's pyiceberg catalog (an append is
``Table.append``; ``fact`` is identity-partitioned by ``p``):

- ``fact``: ``id bigint, k string, v bigint, amt decimal(12,2), x double, s string,
  d date`` and ``p string`` (the partition column);
- ``more``: the same columns, ``p`` a plain column, unpartitioned (for ``UNION ALL``);
- ``dim``: ``k string, label string, r string`` (joined on ``k``);
- ``reg``: ``r string, region string`` (joined to ``dim`` on ``r``: a 3-table join).

DuckDB reads the very files of the current state: the Parquet files on disk, or the data
files of an Iceberg table's current snapshot (pyiceberg's scan plan); it never reads an MV
through sparkmv. Rows are compared by :mod:`tests.differential.ivm_compare`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

from tests.differential.harness import hive_text, profile_name

Row = tuple[Any, ...]
TABLES = ("fact", "more", "dim", "reg")
NAMESPACE = "default"

# Column (name, DuckDB type, Arrow type, Spark type) of every base table, in file order.
_FACT = [
    ("id", "BIGINT", pa.int64(), "bigint"),
    ("k", "VARCHAR", pa.string(), "string"),
    ("v", "BIGINT", pa.int64(), "bigint"),
    ("amt", "DECIMAL(12,2)", pa.decimal128(12, 2), "decimal(12,2)"),
    ("x", "DOUBLE", pa.float64(), "double"),
    ("s", "VARCHAR", pa.string(), "string"),
    ("d", "DATE", pa.date32(), "date"),
    ("p", "VARCHAR", pa.string(), "string"),
]
COLUMNS: dict[str, list[tuple[str, str, pa.DataType, str]]] = {
    "fact": _FACT,
    "more": _FACT,
    "dim": [("k", "VARCHAR", pa.string(), "string"), ("label", "VARCHAR", pa.string(), "string"),
            ("r", "VARCHAR", pa.string(), "string")],
    "reg": [("r", "VARCHAR", pa.string(), "string"), ("region", "VARCHAR", pa.string(), "string")],
}  # fmt: skip

# Steps per example (min, max): 2 in the fast profile (`make test`), 3 to 5 in the slow one.
IVM_STEPS = {"fast": (2, 2), "slow": (3, 5)}


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of ``table`` with every column (``p`` included)."""
    return pa.schema([(n, t) for n, _, t, _ in COLUMNS[table]])


def spark_types(table: str) -> list[tuple[str, str]]:
    """(name, Spark type) sparkmv must register for ``table`` (a Parquet ``fact`` has ``p`` as
    its Hive partition column, an Iceberg one as a data column: the same types either way)."""
    return [(n, s) for n, _, _, s in COLUMNS[table]]


# ---------------------------------------------------------------------------------------------
# generated values. A row at position n takes pool[(n + offset + j) % len(pool)] with j drawn:
# the simplest example (every j = 0) already varies along the positions, so it holds NULL group
# keys, NULL values, and appends that make new groups.
KEYS = ["a", None, "b", "c", "d", "a", "e", "f"]
VS = [3, None, -2, 7, 0, 12, 5, 10_000_000_000]
AMTS = [None if t is None else Decimal(t) for t in ("1.25", "-3.10", "1000.01", None, "0.00", "7.33", "99999999.99")]
XS = [0.1, -2.5, 0.2, 33.3, None, -0.3, 1.7, 0.0, 2.0 / 3.0]  # not binary fractions: sums vary by order
STRS = ["m", "Z", "", "mm", "a b", None, "zz"]
DATES = [date(2020, 2, 29), None, date(1999, 12, 31), date(2021, 1, 1), date(1970, 1, 1), date(2024, 6, 30)]
PARTS: list[str | None] = ["p0", None, "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"]
DIM_KEYS = ["a", "b", "f", "c", None, "d", "a", "e"]
LABELS = ["x", "y", None, "z"]
REGION_KEYS = ["r2", "r1", None, "r3", "r1"]
REG_KEYS = ["r1", "r3", "r2", None, "r4"]
REGIONS = ["north", None, "south"]


class Positions:
    """The next row position per table (also the ``id`` of ``fact`` and ``more`` rows)."""

    def __init__(self) -> None:
        self.next: dict[str, int] = {}

    def take(self, table: str) -> int:
        n = self.next.get(table, 0)
        self.next[table] = n + 1
        return n


Choose = Callable[[int, int], int]
"""An integer between two bounds, both included: drawn by Hypothesis (:func:`drawing`) or
by a seeded ``random.Random(seed).randint`` (the fast profile's fixed examples)."""


def drawing(draw: st.DrawFn) -> Choose:
    """The :data:`Choose` of a Hypothesis ``draw``."""
    return lambda low, high: draw(st.integers(low, high))


def _pick(choose: Choose, pool: Sequence[Any], position: int) -> Any:
    return pool[(position + choose(0, len(pool) - 1)) % len(pool)]


def draw_row(choose: Choose, table: str, pos: Positions) -> Row:
    """One row of ``table`` without ``p`` (``p`` is the file's partition, set by the caller)."""
    n = pos.take(table)
    if table in ("fact", "more"):
        base = 1000 if table == "more" else 0
        values = (KEYS, VS, AMTS, XS, STRS, DATES)
        return (base + n, *(_pick(choose, pool, n + i) for i, pool in enumerate(values)))
    if table == "dim":
        return (_pick(choose, DIM_KEYS, n), _pick(choose, LABELS, n), _pick(choose, REGION_KEYS, n + 1))
    return (_pick(choose, REG_KEYS, n), _pick(choose, REGIONS, n))


def draw_rows(choose: Choose, table: str, pos: Positions, low: int, high: int) -> tuple[Row, ...]:
    """Between ``low`` and ``high`` rows of ``table`` (``low`` in the simplest example)."""
    return tuple(draw_row(choose, table, pos) for _ in range(choose(low, high)))


@dataclass(frozen=True)
class Append:
    """One outside append: a new file (Parquet) or snapshot (Iceberg) of ``table``.

    Attributes:
        table: one of :data:`TABLES`.
        rows: the rows, without ``p``.
        p: the partition value of every row (``fact``: a Hive directory or an Iceberg
            identity partition; ``more``: a plain column); None for ``dim`` and ``reg``.
        new_partition: whether ``p`` is a partition ``fact`` did not have before.
    """

    table: str
    rows: tuple[Row, ...]
    p: str | None = None
    new_partition: bool = False

    def describe(self) -> str:
        where = ""
        if self.table in ("fact", "more"):
            where = f" p={self.p!r}" + (" (new partition)" if self.new_partition else "")
        return f"append to {self.table}{where}: {list(self.rows)}"


@dataclass(frozen=True)
class Step:
    """The appends of one step, in order (none: a step with no change)."""

    appends: tuple[Append, ...]

    @property
    def tables(self) -> set[str]:
        return {a.table for a in self.appends}

    def describe(self) -> str:
        return "; ".join(a.describe() for a in self.appends) or "no change"


# Step kinds, cycled in a drawn order; the simplest example runs them in this order, so the
# fast profile (two steps) appends to one base, then to every base at once (both join sides,
# both UNION ALL sides) with a new partition of `fact`.
STEP_KINDS: list[tuple[str, ...]] = [("fact",), ("fact", "dim", "more", "reg"), ("dim",), ("more", "reg")]


InitialFiles = tuple[tuple[str, tuple[tuple[str | None, tuple[Row, ...]], ...]], ...]
"""Per table, its initial files as (p, rows)."""


@dataclass(frozen=True)
class IvmScenario:
    """Generated input of one example: the initial files of every table, and the steps.

    ``initial`` holds, per table, its files as (p, rows); steps are applied one by one.
    """

    initial: InitialFiles
    steps: tuple[Step, ...]

    def files(self, table: str) -> tuple[tuple[str | None, tuple[Row, ...]], ...]:
        return dict(self.initial)[table]

    def describe(self) -> str:
        lines = []
        for table, files in self.initial:
            lines.append(f"initial {table} ({', '.join(n for n, *_ in COLUMNS[table])}):")
            lines += [f"  file{f' p={p!r}' if table in ('fact', 'more') else ''}: {list(rows)}" for p, rows in files]
        lines.append("steps:")
        lines += [f"  {i + 1}. {s.describe()}" for i, s in enumerate(self.steps)]
        return "\n".join(lines)


def _fact_append(choose: Choose, pos: Positions, parts: list[str | None], fresh: bool | None) -> Append:
    """An append to ``fact``: into a fresh partition (``fresh`` True), an existing one
    (False), or either (None: drawn)."""
    choice = choose(0, 9)
    if fresh or (fresh is None and choice % (len(parts) + 1) == len(parts)):
        value = next(p for p in PARTS if p not in parts)
        parts.append(value)
        return Append("fact", draw_rows(choose, "fact", pos, 2, 3), value, True)
    return Append("fact", draw_rows(choose, "fact", pos, 2, 3), parts[choice % len(parts)])


def make_step(
    choose: Choose, kind: tuple[str, ...], pos: Positions, parts: list[str | None], fresh: bool | None = None
) -> Step:
    """The appends of one step to the tables of ``kind`` (``fresh``: of a ``fact`` alone, as
    :func:`_fact_append`; with other tables ``fact`` always gets a fresh partition)."""
    appends = []
    for table in kind:
        if table == "fact":
            appends.append(_fact_append(choose, pos, parts, fresh=True if len(kind) > 1 else fresh))
        elif table == "more":
            appends.append(Append("more", draw_rows(choose, "more", pos, 1, 2), _pick(choose, PARTS, 0)))
        else:
            appends.append(Append(table, draw_rows(choose, table, pos, 2 if table == "dim" else 1, 2)))
    return Step(tuple(appends))


def _step(choose: Choose, kind: tuple[str, ...], pos: Positions, parts: list[str | None]) -> Step:
    if choose(0, 9) == 9:  # one step in ten changes nothing (never in the simplest)
        return Step(())
    return make_step(choose, kind, pos, parts)


@st.composite
def ivm_scenarios(draw: st.DrawFn, steps: tuple[int, int] | None = None) -> IvmScenario:
    """Initial files of the four tables and ``steps`` (min, max; default by profile) steps.

    The simplest example: ``fact`` has partitions ``p0`` and NULL (a NULL key and NULL values
    among their rows), then one append to ``fact`` alone, then one to every table at once
    with a new ``fact`` partition and new group keys.
    """
    choose = drawing(draw)
    pos = Positions()
    parts: list[str | None] = PARTS[: choose(2, 3)]
    initial = initial_files(choose, pos, parts)
    order = draw(st.permutations(range(len(STEP_KINDS))))
    count = choose(*(steps or IVM_STEPS[profile_name()]))
    plan = [_step(choose, STEP_KINDS[order[i % len(order)]], pos, parts) for i in range(count)]
    return IvmScenario(initial, tuple(plan))


def initial_files(choose: Choose, pos: Positions, parts: list[str | None]) -> InitialFiles:
    """The initial files of the four tables: ``fact`` with one or two files per partition
    of ``parts``, the others with one file each."""
    fact = tuple((p, draw_rows(choose, "fact", pos, 2, 3)) for p in parts for _ in range(choose(1, 2)))
    more = ((_pick(choose, PARTS, 1), draw_rows(choose, "more", pos, 1, 3)),)
    dim = ((None, draw_rows(choose, "dim", pos, 2, 4)),)
    reg = ((None, draw_rows(choose, "reg", pos, 2, 3)),)
    return (("fact", fact), ("more", more), ("dim", dim), ("reg", reg))


# ---------------------------------------------------------------------------------------------
# the world on disk
def arrow_rows(table: str, rows: Sequence[Row], p: str | None, with_p: bool) -> pa.Table:
    """``rows`` of ``table`` as an Arrow table; ``with_p``: with column ``p`` set to ``p``
    (``fact`` and ``more``), else without it (a Hive-partitioned file of ``fact``)."""
    columns = COLUMNS[table] if with_p else [c for c in COLUMNS[table] if c[0] != "p"]
    full = [(*r, p) for r in rows] if with_p and table in ("fact", "more") else list(rows)
    data = list(zip(*full, strict=True)) if full else [() for _ in columns]
    arrays = [pa.array(list(col), type=t) for col, (_, _, t, _) in zip(data, columns, strict=True)]
    return pa.Table.from_arrays(arrays, schema=pa.schema([(n, t) for n, _, t, _ in columns]))


def _path_of(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


@dataclass
class IvmWorld:
    """The four base tables of one example, each Parquet or Iceberg, and a log of writes.

    Attributes:
        root: a fresh directory (Parquet tables live in ``root/<table>``).
        kinds: table -> ``parquet`` or ``iceberg``.
        client: the sparkmv Client (Iceberg tables are its pyiceberg catalog's).
        log: what every write did (for failure reports).
    """

    root: Path
    kinds: dict[str, str]
    client: Any
    log: list[str] = field(default_factory=list)
    _counter: int = 0

    def _ident(self, table: str) -> Any:
        from sparkmv.names import ObjectName

        return ObjectName(NAMESPACE, table)

    def _write_parquet(self, table: str, rows: Sequence[Row], p: str | None) -> Path:
        self._counter += 1
        folder = self.root / table
        if table == "fact":
            folder = folder / f"p={hive_text(p)}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{self._counter}.parquet"
        pq.write_table(arrow_rows(table, rows, p, with_p=table == "more"), path)
        return path

    def create(self, table: str, files: Iterable[tuple[str | None, Sequence[Row]]]) -> None:
        """Write the initial files of ``table`` and register it with sparkmv.

        Raises:
            AssertionError: when sparkmv registered other column types than the harness wrote.
        """
        if self.kinds[table] == "parquet":
            for p, rows in files:
                self._write_parquet(table, rows, p)
            self.client.sql(f"CREATE EXTERNAL TABLE {table} USING parquet LOCATION '{self.root / table}'")
        else:
            store = self.client.runtime.iceberg
            store.create_table(self._ident(table), arrow_schema(table), "p" if table == "fact" else None)
            for p, rows in files:
                store.load(self._ident(table)).append(arrow_rows(table, rows, p, with_p=True))
        got = [(r[0], r[1]) for r in self.client.sql(f"DESCRIBE {table}").collect()]
        want = spark_types(table)
        assert sorted(got) == sorted(want), f"{table}: sparkmv registered {got}, the harness wrote {want}"

    def append(self, a: Append) -> None:
        """Apply one append as an outside writer, and log it."""
        if self.kinds[a.table] == "parquet":
            path = self._write_parquet(a.table, a.rows, a.p)
            self.log.append(f"{a.describe()} -> file {path.relative_to(self.root)}")
        else:
            table = self.client.runtime.iceberg.load(self._ident(a.table))
            table.append(arrow_rows(a.table, a.rows, a.p, with_p=True))
            snapshot = self.client.runtime.iceberg.load(self._ident(a.table)).current_snapshot()
            self.log.append(f"{a.describe()} -> Iceberg snapshot {snapshot.snapshot_id if snapshot else None}")

    def files(self, table: str) -> list[str]:
        """The data files of ``table``'s current state, sorted: Parquet files on disk, or the
        data files pyiceberg plans for the current snapshot.

        Raises:
            AssertionError: when the Iceberg snapshot has delete files (the oracle reads data
                files only).
        """
        if self.kinds[table] == "parquet":
            return sorted(str(p) for p in (self.root / table).rglob("*.parquet"))
        tasks = list(self.client.runtime.iceberg.load(self._ident(table)).scan().plan_files())
        assert not any(t.delete_files for t in tasks), f"{table}: delete files in the current snapshot"
        return sorted(_path_of(t.file.file_path) for t in tasks)

    def relations(self) -> dict[str, str]:
        """Table -> DuckDB subquery over its current files."""
        return {t: duck_relation(t, self.files(t), hive=self.kinds[t] == "parquet" and t == "fact") for t in TABLES}


# ---------------------------------------------------------------------------------------------
# queries and the oracle
def _sql_list(items: Iterable[str]) -> str:
    return "[" + ", ".join("'" + i.replace("'", "''") + "'" for i in items) + "]"


def duck_relation(table: str, files: list[str], hive: bool) -> str:
    """A DuckDB subquery over ``files`` with every column of ``table`` cast to its type;
    ``hive``: ``p`` comes from the Hive directory names (``__HIVE_DEFAULT_PARTITION__`` is NULL).

    >>> duck_relation("reg", [], hive=False)
    '(SELECT CAST(NULL AS VARCHAR) AS r, CAST(NULL AS VARCHAR) AS region WHERE false)'
    """
    columns = COLUMNS[table]
    if not files:
        return "(SELECT " + ", ".join(f"CAST(NULL AS {d}) AS {n}" for n, d, _, _ in columns) + " WHERE false)"
    casts = ", ".join(f"CAST({n} AS {d}) AS {n}" for n, d, _, _ in columns)
    options = "hive_partitioning = true, hive_types = {'p': 'VARCHAR'}" if hive else "hive_partitioning = false"
    return f"(SELECT {casts} FROM read_parquet({_sql_list(files)}, {options}, union_by_name = true))"


def avg_decimal(column: str, dialect: str) -> str:
    """``avg`` of a DECIMAL(12,2) column as Spark computes it: DECIMAL(16,6), rounded half
    away from zero (Spark's ``Average`` result type ``decimal(p + 4, s + 4)``); DuckDB's own
    ``avg`` of a DECIMAL is a DOUBLE, so the oracle divides the sum in cents exactly.

    >>> avg_decimal("f.amt", "spark")
    'avg(f.amt)'
    """
    if dialect == "spark":
        return f"avg({column})"
    cents = f"CAST(sum({column}) * 100 AS HUGEINT)"
    n = f"count({column})"
    micros = f"sign(sum({column})) * ((abs({cents}) * 20000 + {n}) // (2 * {n}))"
    return f"CAST(CASE WHEN {n} = 0 THEN NULL ELSE {micros} END AS DECIMAL(38,0)) * CAST(0.000001 AS DECIMAL(38,6))"


_AGGS = (
    "sum(f.amt) AS s_amt, count(*) AS n, count(f.v) AS n_v, {avg_amt} AS a_amt, avg(f.v) AS a_v, "
    "min(f.s) AS mn_s, max(f.s) AS mx_s, min(f.d) AS mn_d, max(f.d) AS mx_d, min(f.x) AS mn_x, "
    "max(f.v) AS mx_v, sum(f.x) AS s_x"
)
# name -> (PARTITION BY column or None, query template in both dialects)
SHAPES: dict[str, tuple[str | None, str]] = {
    "proj": (
        None,
        "SELECT f.id, f.k, f.amt * 2 AS amt2, f.x + 1 AS x1, upper(f.s) AS su, f.d, f.p, coalesce(f.k, '-') AS kk "
        "FROM fact f WHERE f.v IS NULL OR f.v >= 0",
    ),
    "union": (
        None,
        "SELECT f.id, f.k, f.amt, f.x FROM fact f WHERE f.v > 0 UNION ALL SELECT m.id, m.k, m.amt, m.x FROM more m",
    ),
    "join": (None, "SELECT f.id, f.k, d.label, f.amt, f.x FROM fact f JOIN dim d ON f.k = d.k"),
    "join3": (
        None,
        "SELECT f.id, d.label, g.region, f.amt, f.v FROM fact f JOIN dim d ON f.k = d.k JOIN reg g ON d.r = g.r",
    ),
    "agg": (None, f"SELECT f.k, {_AGGS} FROM fact f GROUP BY f.k"),
    "agg_by_k": ("k", f"SELECT f.k, {_AGGS} FROM fact f GROUP BY f.k"),
    "agg_by_p": ("p", f"SELECT f.p, f.k, {_AGGS} FROM fact f GROUP BY f.p, f.k"),
    "global": (
        None,
        "SELECT count(*) AS n, count(f.v) AS n_v, sum(f.amt) AS s_amt, {avg_amt} AS a_amt, avg(f.x) AS a_x, "
        "min(f.d) AS mn_d, max(f.s) AS mx_s FROM fact f WHERE f.v IS NULL OR f.v > 3",
    ),
    "join_agg": (
        "label",
        "SELECT d.label, count(*) AS n, sum(f.amt) AS s_amt, {avg_amt} AS a_amt, max(f.v) AS mx_v, "
        "avg(f.v) AS a_v, min(f.s) AS mn_s FROM fact f JOIN dim d ON f.k = d.k GROUP BY d.label",
    ),
}


@dataclass(frozen=True)
class IvmMv:
    """One MV of a case: name, partition column, query per dialect and base tables read."""

    name: str
    partition_by: str | None
    spark_sql: str
    duck_sql: str

    @property
    def tables(self) -> set[str]:
        return {t for t in TABLES if f" {t} " in f" {self.spark_sql} "}

    def ddl(self, refresh_mode: str) -> str:
        """The deferred CREATE statement with ``refresh_mode``."""
        part = f"PARTITION BY {self.partition_by} " if self.partition_by else ""
        return (
            f"CREATE MATERIALIZED VIEW {self.name} {part}REFRESH DEFERRED "
            f"PROPERTIES ('refresh_mode' = '{refresh_mode}') AS {self.spark_sql}"
        )

    def oracle_sql(self, relations: dict[str, str]) -> str:
        """The DuckDB query over ``relations`` (table -> subquery) as CTEs."""
        ctes = ", ".join(f"{t} AS {relations[t]}" for t in sorted(self.tables))
        return f"WITH {ctes} {self.duck_sql}"


def mv_of(shape: str, name: str | None = None) -> IvmMv:
    """The MV of query ``shape`` (named ``mv_<shape>`` unless ``name``)."""
    partition_by, template = SHAPES[shape]
    spark, duck = (template.format(avg_amt=avg_decimal("f.amt", d)) for d in ("spark", "duck"))
    return IvmMv(name or f"mv_{shape}", partition_by, spark, duck)


def run_oracle(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[Row]]:
    """Column names and rows of ``sql`` in DuckDB."""
    rel = con.sql(sql)
    return list(rel.columns), [tuple(r) for r in rel.fetchall()]
