"""Differential-test harness: base tables written as an outside writer would, MV queries
rendered for sparkmv (Spark SQL) and for DuckDB (the oracle), and multiset comparison.

The world of one generated example is three base tables in a temporary directory:

- ``fact``: Hive-partitioned Parquet (``p=<value>/part-N.parquet``, a NULL partition as
  ``p=__HIVE_DEFAULT_PARTITION__``) with columns ``id bigint, k string, v bigint,
  amt double`` and the partition column ``p`` of the generated partition type;
- ``extra``: non-partitioned, the same columns with ``p`` as a data column (for ``UNION
  ALL``; its ``p`` may be NULL or match no ``fact`` partition);
- ``dim``: non-partitioned ``k string, label string`` (for joins).

Each MV is written once as a :class:`MvSpec`: a Spark SQL query for sparkmv and a DuckDB
query for the oracle, both rendered from hand-written templates (no transpiler: sparkmv
itself uses sqlglot). DuckDB reads the very same Parquet files, with the column types
sparkmv registered (``DESCRIBE``), and computes nested MVs from the base files as CTEs —
the oracle never reads an MV through sparkmv.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

# Hypothesis keeps caches (not examples: database=None below) in a storage directory,
# `./.hypothesis` by default; keep them out of the repository.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(tempfile.gettempdir()) / "sparkmv-hypothesis"))

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
PROFILE_ENV = "SPARKMV_DIFF_PROFILE"

# ---------------------------------------------------------------------------------------------
# hypothesis profiles: the fast one runs in `make test`, the slow one (10x) in `make test-slow`.
# No example database in the repo, no deadline (Spark), no shrinking (each example costs
# seconds of Spark; the failure report prints the whole scenario instead), derandomized so CI
# is reproducible.
_COMMON: dict[str, Any] = {
    "database": None,
    "deadline": None,
    "derandomize": True,
    "phases": (Phase.explicit, Phase.generate),
    "report_multiple_bugs": False,
    "print_blob": False,
    "suppress_health_check": (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much),
}
# The first example hypothesis runs is the simplest one the strategies allow; they are built so
# that it already holds a NULL partition and a UNION ALL row matching no reference partition.
settings.register_profile("sparkmv-diff-fast", max_examples=1, **_COMMON)
settings.register_profile("sparkmv-diff-slow", max_examples=10, **_COMMON)
# Number of outside writes per example (min, max): short in the fast profile.
WRITE_STEPS = {"fast": (2, 2), "slow": (2, 4)}


def profile_name() -> str:
    """``fast`` (default) or ``slow``, from ``SPARKMV_DIFF_PROFILE``.

    Raises:
        ValueError: for any other value.
    """
    name = os.environ.get(PROFILE_ENV, "fast").strip().lower() or "fast"
    if name not in ("fast", "slow"):
        raise ValueError(f"{PROFILE_ENV} must be 'fast' or 'slow', not {name!r}")
    return name


def diff_settings() -> settings:
    """The hypothesis settings of the differential suite (``SPARKMV_DIFF_PROFILE=slow``: 10x)."""
    return settings.get_profile(f"sparkmv-diff-{profile_name()}")


def seeded_settings() -> settings:
    """:func:`diff_settings` for a test with fixed seeded ``@example`` inputs: the fast
    profile runs those only (Hypothesis's first generated example is nearly empty), the slow
    one runs them and its generated examples."""
    if profile_name() == "fast":
        return settings(diff_settings(), phases=(Phase.explicit,))
    return diff_settings()


# ---------------------------------------------------------------------------------------------
# partition values
PartitionValue = str | int | date | datetime | bool | None

FIRST_DAY = date(2019, 12, 23)  # a Monday; dates run across 2019/2020/2021, ISO weeks 52/53/1
DAY_SPAN = 560
# dates where years, ISO weeks, months and quarters turn
EDGE_DATES = [
    date(2019, 12, 29),
    date(2019, 12, 30),
    date(2019, 12, 31),
    date(2020, 1, 1),
    date(2020, 3, 31),
    date(2020, 4, 1),
    date(2020, 12, 31),
    date(2021, 1, 3),
    date(2021, 1, 4),
]


def hive_text(value: PartitionValue) -> str:
    """The directory text an outside (Hive) writer gives a partition value.

    >>> hive_text(None), hive_text(True), hive_text(datetime(2024, 1, 2, 3, 4, 5))
    ('__HIVE_DEFAULT_PARTITION__', 'true', '2024-01-02 03:04:05')
    """
    if value is None:
        return HIVE_NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


def _dates() -> st.SearchStrategy[date]:
    return st.one_of(
        st.sampled_from(EDGE_DATES),
        st.integers(0, DAY_SPAN).map(lambda n: FIRST_DAY + timedelta(days=n)),
    )


def _timestamps() -> st.SearchStrategy[datetime]:
    midnight = _dates().map(lambda d: datetime(d.year, d.month, d.day))
    clock = st.tuples(_dates(), st.integers(0, 23), st.sampled_from([0, 30, 59]), st.sampled_from([0, 5, 59]))
    timed = clock.map(lambda t: datetime(t[0].year, t[0].month, t[0].day, t[1], t[2], t[3]))
    return st.one_of(midnight, timed)


# Values that are not NULL, per partition type. Spark infers the column type of the Hive
# directories: `true`/`false` directories are a STRING column (Spark infers no BOOLEAN).
NON_NULL_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.sampled_from(["ab", "ba", "aa", "b", "abc", "c d"]),
    "int": st.integers(-3, 40),
    "date": _dates(),
    "timestamp": _timestamps(),
    "boolean": st.booleans(),
}


# Values outside the range the reference table's partitions are drawn from (boolean: `true`,
# absent from the simplest example, whose only non-NULL partition is `false`).
UNMATCHED_VALUES: dict[str, list[Any]] = {
    "string": ["zz"],
    "int": [99],
    "date": [date(2022, 6, 15)],
    "timestamp": [datetime(2022, 6, 15, 12, 30, 0)],
    "boolean": [True],
}


def partition_values(ptype: str) -> st.SearchStrategy[PartitionValue]:
    """Partition values of ``ptype``, NULL included."""
    return st.one_of(NON_NULL_VALUES[ptype], st.none())


def extra_values(ptype: str) -> st.SearchStrategy[PartitionValue]:
    """``p`` values of the non-partitioned ``extra`` table: first one matching no partition
    of ``fact``, then any value or NULL."""
    return st.one_of(st.sampled_from(UNMATCHED_VALUES[ptype]), st.none(), NON_NULL_VALUES[ptype])


# ---------------------------------------------------------------------------------------------
# rows and files
FACT_SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64()), ("amt", pa.float64())])
DIM_SCHEMA = pa.schema([("k", pa.string()), ("label", pa.string())])
KEYS = ["a", "b", "c", None]  # 'c' has no dim row: inner joins drop it, left joins keep it

Row = tuple[Any, ...]


def fact_rows(min_size: int = 1, max_size: int = 3) -> st.SearchStrategy[list[Row]]:
    """Rows ``(id, k, v, amt)``; ``amt`` is a multiple of 0.25 so sums are exact in both engines."""
    row = st.tuples(
        st.integers(0, 999),
        st.sampled_from(KEYS),
        st.one_of(st.integers(-5, 9), st.none()),
        st.one_of(st.integers(-8, 40).map(lambda n: n / 4), st.none()),
    )
    return st.lists(row, min_size=min_size, max_size=max_size)


def dim_rows() -> st.SearchStrategy[list[Row]]:
    """Dimension rows ``(k, label)``: a key may appear twice (a join multiplies rows)."""
    return st.lists(st.tuples(st.sampled_from(["a", "b", "a"]), st.sampled_from(["x", "y"])), max_size=3)


def _write(path: Path, schema: pa.Schema, rows: Sequence[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in schema.names]
    arrays = [pa.array(list(col), type=f.type) for col, f in zip(columns, schema, strict=True)]
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path)


# ---------------------------------------------------------------------------------------------
# outside writes
@dataclass(frozen=True)
class Write:
    """One outside write, generated abstractly and resolved against the files on disk.

    Attributes:
        kind: ``add_file`` (a new file in an existing partition), ``rewrite_file`` (replace
            an existing file), ``delete_partition`` (remove its directory), ``add_partition``
            (a new partition value), ``extra_file`` (a file into ``extra``), ``dim_rewrite``
            (replace the ``dim`` file).
        pick: which existing partition / file (taken modulo the number there are).
        value: the partition value of ``add_partition``; ``extra_p``: the ``p`` values of
            the rows written to ``extra``.
        rows: the rows written.
    """

    kind: str
    pick: int = 0
    value: PartitionValue = None
    rows: tuple[Row, ...] = ()


def _write_kinds(ptype: str, with_extra: bool, with_dim: bool) -> list[st.SearchStrategy[Write]]:
    rows = fact_rows().map(tuple)
    options = [
        st.builds(Write, st.just("delete_partition"), st.integers(0, 9)),
        st.builds(Write, st.just("add_partition"), st.just(0), partition_values(ptype), rows),
        st.builds(Write, st.just("add_file"), st.integers(0, 9), st.none(), rows),
        st.builds(Write, st.just("rewrite_file"), st.integers(0, 9), st.none(), rows),
    ]
    if with_extra:
        extra = st.lists(st.tuples(extra_values(ptype), fact_rows(1, 1)), min_size=1, max_size=2)
        options.append(extra.map(lambda xs: Write("extra_file", rows=tuple((p, *r[0]) for p, r in xs))))
    if with_dim:
        options.append(dim_rows().map(lambda rs: Write("dim_rewrite", rows=tuple(rs))))
    return options


@st.composite
def write_sequences(
    draw: st.DrawFn, ptype: str, with_extra: bool, with_dim: bool, steps: tuple[int, int]
) -> list[Write]:
    """A sequence of ``steps`` (min, max) outside writes for a world of partition type ``ptype``.

    The kinds follow a drawn permutation (cycled), so the simplest sequence deletes a
    partition, then adds one, then adds a file, then rewrites one.
    """
    kinds = _write_kinds(ptype, with_extra, with_dim)
    order = draw(st.permutations(range(len(kinds))))
    count = draw(st.integers(*steps))
    return [draw(kinds[order[i % len(order)]]) for i in range(count)]


@dataclass
class World:
    """The base tables of one example on disk, and the writes applied so far.

    Attributes:
        root: a fresh directory; ``fact``, ``extra`` and ``dim`` live under it.
        ptype: the partition type of ``fact``.
        log: human-readable description of every write applied (for failure reports).
    """

    root: Path
    ptype: str
    log: list[str] = field(default_factory=list)
    _counter: int = 0

    @property
    def fact(self) -> Path:
        return self.root / "fact"

    @property
    def extra(self) -> Path:
        return self.root / "extra"

    @property
    def dim(self) -> Path:
        return self.root / "dim"

    def _next_file(self) -> str:
        self._counter += 1
        return f"part-{self._counter}.parquet"

    def partition_dirs(self) -> list[Path]:
        return sorted(d for d in self.fact.iterdir() if d.is_dir()) if self.fact.exists() else []

    def write_fact(self, value: PartitionValue, rows: Sequence[Row], file: str | None = None) -> Path:
        path = self.fact / f"p={hive_text(value)}" / (file or self._next_file())
        _write(path, FACT_SCHEMA, rows)
        return path

    def write_extra(self, rows: Sequence[Row], p_type: pa.DataType) -> None:
        """A new file in ``extra``; rows ``(id, k, v, amt, p)``, ``p`` stored as ``p_type``."""
        schema = FACT_SCHEMA.append(pa.field("p", p_type))
        as_text = pa.types.is_string(p_type)  # e.g. boolean partitions: Spark registered STRING
        fixed = [(*r[:-1], hive_text(r[-1]) if as_text and r[-1] is not None else r[-1]) for r in rows]
        _write(self.extra / self._next_file(), schema, fixed)

    def write_dim(self, rows: Sequence[Row]) -> None:
        _write(self.dim / "part-0.parquet", DIM_SCHEMA, rows)

    def apply(self, w: Write, extra_p_type: pa.DataType | None) -> None:
        """Apply one write to the files (an outside writer), and log what it did."""
        dirs = self.partition_dirs()
        kind = w.kind
        if kind in ("add_file", "rewrite_file", "delete_partition") and not dirs:
            kind = "add_partition"  # nothing to pick from: the writer adds a partition instead
        if kind == "add_file":
            target = dirs[w.pick % len(dirs)]
            name = self._next_file()
            _write(target / name, FACT_SCHEMA, w.rows)
            self.log.append(f"add file {target.name}/{name}: {list(w.rows)}")
        elif kind == "rewrite_file":
            target = dirs[w.pick % len(dirs)]
            files = sorted(target.glob("*.parquet"))
            path = files[w.pick % len(files)]
            _write(path, FACT_SCHEMA, w.rows)
            self.log.append(f"rewrite {target.name}/{path.name}: {list(w.rows)}")
        elif kind == "delete_partition":
            target = dirs[w.pick % len(dirs)]
            shutil.rmtree(target)
            self.log.append(f"delete partition {target.name}")
        elif kind == "add_partition":
            path = self.write_fact(w.value, w.rows)
            self.log.append(f"add {path.parent.name}/{path.name}: {list(w.rows)}")
        elif kind == "extra_file":
            assert extra_p_type is not None
            self.write_extra([(*r[1:], r[0]) for r in w.rows], extra_p_type)
            self.log.append(f"extra: add file with (p, id, k, v, amt) rows {list(w.rows)}")
        elif kind == "dim_rewrite":
            self.write_dim(w.rows)
            self.log.append(f"dim: rewrite with rows {list(w.rows)}")
        else:
            raise AssertionError(kind)

    def files(self, table: str) -> list[str]:
        """The data files of ``table`` now, sorted."""
        return sorted(str(p) for p in (self.root / table).rglob("*.parquet"))


# ---------------------------------------------------------------------------------------------
# MV specs, rendered for both engines
@dataclass(frozen=True)
class PartExpr:
    """A partition expression over a column reference ``{c}``, in both dialects."""

    name: str
    spark: str
    duck: str

    def render(self, dialect: str, column: str) -> str:
        return (self.spark if dialect == "spark" else self.duck).format(c=column)


def _trunc(unit: str) -> PartExpr:
    # Spark's date_trunc yields a TIMESTAMP (also of a DATE); the oracle casts to the same.
    duck = f"CAST(date_trunc('{unit.lower()}', {{c}}) AS TIMESTAMP)"
    return PartExpr(unit.lower(), f"date_trunc('{unit}', {{c}})", duck)


PART_EXPRS: dict[str, PartExpr] = {
    "identity": PartExpr("identity", "{c}", "{c}"),
    **{u.lower(): _trunc(u) for u in ("HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")},
    "date_format": PartExpr("date_format", "date_format({c}, 'yyyy-MM')", "strftime({c}, '%Y-%m')"),
    "to_date": PartExpr("to_date", "to_date({c})", "CAST({c} AS DATE)"),
    "substr": PartExpr("substr", "substr({c}, 1, 1)", "substr({c}, 1, 1)"),
}

# Query shapes; `{pe}` is the partition expression over fact's `f.p`, `{pex}` over extra's
# `x.p`, `{inner}` the inner MV's name (nested shape). Identical text in both dialects once
# the partition expression is rendered; GROUP BY ordinals work in both engines.
SHAPES: dict[str, str] = {
    "agg": "SELECT {pe} AS pk, f.k, count(*) AS n, sum(f.v) AS sv, min(f.amt) AS mn, max(f.id) AS mx "
    "FROM fact f GROUP BY 1, 2",
    "projection": "SELECT {pe} AS pk, f.id, f.k, f.v, f.amt FROM fact f WHERE f.v IS NULL OR f.v >= 0",
    "union": "SELECT {pe} AS pk, f.id, f.v FROM fact f UNION ALL SELECT {pex} AS pk, x.id, x.v FROM extra x",
    "join": "SELECT {pe} AS pk, f.id, f.v, d.label FROM fact f JOIN dim d ON f.k = d.k",
    "left_join": "SELECT {pe} AS pk, d.label, count(*) AS n, sum(f.v) AS sv "
    "FROM fact f LEFT JOIN dim d ON f.k = d.k GROUP BY 1, 2",
}
NESTED_OUTER = "SELECT pk, sum(n) AS n, sum(sv) AS sv, min(mn) AS mn, max(mx) AS mx FROM {inner} GROUP BY 1"


@dataclass(frozen=True)
class MvSpec:
    """One MV: its name, partition column and query in each dialect, and the MV it reads."""

    name: str
    partition_by: str
    spark_sql: str
    duck_sql: str
    inner: MvSpec | None = None

    def ddl(self) -> str:
        """The CREATE statement (deferred: the harness refreshes and checks the first build)."""
        return (
            f"CREATE MATERIALIZED VIEW {self.name} PARTITION BY {self.partition_by} REFRESH DEFERRED "
            f"AS {self.spark_sql}"
        )

    def chain(self) -> list[MvSpec]:
        """This MV and the MVs it reads, innermost first (the refresh order)."""
        return [*(self.inner.chain() if self.inner else []), self]


def render(shape: str, expr: str) -> MvSpec:
    """The MV (nested: the outer of two) of query ``shape`` partitioned by ``expr`` of ``p``."""
    pe = PART_EXPRS[expr]
    if shape == "nested":
        inner = render("agg", expr)
        inner = MvSpec("mv_inner", "pk", inner.spark_sql, inner.duck_sql)
        outer = NESTED_OUTER.format(inner=inner.name)
        return MvSpec("mv_outer", "pk", outer, outer, inner)
    template = SHAPES[shape]
    sql = {d: template.format(pe=pe.render(d, "f.p"), pex=pe.render(d, "x.p")) for d in ("spark", "duck")}
    return MvSpec("mv", "pk", sql["spark"], sql["duck"])


def tables_of(spec: MvSpec) -> set[str]:
    """Base tables (of fact, extra, dim) the MV chain reads."""
    text = " ".join(s.spark_sql for s in spec.chain())
    return {t for t in ("fact", "extra", "dim") if f"FROM {t} " in text or f"JOIN {t} " in text}


# ---------------------------------------------------------------------------------------------
# the oracle
DUCK_TYPES = {
    "bigint": "BIGINT",
    "int": "INTEGER",
    "string": "VARCHAR",
    "double": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP",
    "boolean": "BOOLEAN",
}
ARROW_TYPES = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "string": pa.string(),
    "double": pa.float64(),
    "date": pa.date32(),
    # Spark's TIMESTAMP is zoned (session zone UTC): written zoned, read as TIMESTAMP.
    "timestamp": pa.timestamp("us", tz="UTC"),
    "boolean": pa.bool_(),
}


def _sql_list(items: Iterable[str]) -> str:
    return "[" + ", ".join("'" + i.replace("'", "''") + "'" for i in items) + "]"


def duck_relation(files: list[str], columns: list[tuple[str, str]], partition_columns: list[str]) -> str:
    """A DuckDB subquery over ``files`` with the registered ``columns`` (name, Spark type).

    Hive partition columns are typed by ``hive_types``; every column is cast to the type
    sparkmv registered, so both engines see the same typed values.
    """
    if not files:
        nulls = ", ".join(f"CAST(NULL AS {DUCK_TYPES[t]}) AS {n}" for n, t in columns)
        return f"(SELECT {nulls} WHERE false)"
    casts = ", ".join(f"CAST({n} AS {DUCK_TYPES[t]}) AS {n}" for n, t in columns)
    hive = {n: DUCK_TYPES[t] for n, t in columns if n in partition_columns}
    if hive:
        types = "{" + ", ".join(f"'{n}': '{t}'" for n, t in hive.items()) + "}"
        options = f"hive_partitioning = true, hive_types = {types}"
    else:
        options = "hive_partitioning = false"
    return f"(SELECT {casts} FROM read_parquet({_sql_list(files)}, {options}, union_by_name = true))"


def oracle_sql(spec: MvSpec, relations: dict[str, str]) -> str:
    """The DuckDB query of ``spec``: base tables and inner MVs as CTEs over the base files."""
    ctes = [f"{name} AS {rel}" for name, rel in relations.items()]
    ctes += [f"{inner.name} AS ({inner.duck_sql})" for inner in spec.chain()[:-1]]
    return f"WITH {', '.join(ctes)} {spec.duck_sql}"


def run_oracle(sql: str) -> tuple[list[str], list[Row]]:
    """Column names and rows of ``sql`` in a fresh in-memory DuckDB (time zone UTC)."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        rel = con.sql(sql)
        return list(rel.columns), [tuple(r) for r in rel.fetchall()]
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# comparison
def normalize(value: Any) -> Any:
    """A comparable form of one value: typed dates and timestamps (UTC, naive), rounded floats.

    >>> normalize(datetime(2024, 1, 2, 3, tzinfo=UTC)), normalize(date(2024, 1, 2))
    (('timestamp', '2024-01-02 03:00:00'), ('date', '2024-01-02'))
    >>> normalize(Decimal("1.50")), normalize(1.0000000001), normalize(None), normalize(True)
    (1.5, 1.0, None, True)
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return ("timestamp", value.isoformat(sep=" "))
    if isinstance(value, date):
        return ("date", value.isoformat())
    if isinstance(value, Decimal | float):
        out = round(float(value), 6)
        return 0.0 if out == 0 else out
    if isinstance(value, int):
        return value
    return ("other", repr(value))


def _sort_key(row: Row) -> tuple[Any, ...]:
    return tuple((v is None, repr(v)) for v in row)


def compare(
    columns: list[str], actual: Iterable[Row], oracle_columns: list[str], expected: Iterable[Row]
) -> str | None:
    """None when the two row multisets are equal, else a readable diff.

    ``actual`` is in ``columns`` order (the MV's); ``expected`` in ``oracle_columns`` order
    and is reordered by name.
    """
    if sorted(c.lower() for c in columns) != sorted(c.lower() for c in oracle_columns):
        return f"columns differ: MV {columns}, oracle {oracle_columns}"
    index = [[c.lower() for c in oracle_columns].index(c.lower()) for c in columns]
    got = Counter(tuple(normalize(v) for v in r) for r in actual)
    want = Counter(tuple(normalize(r[i]) for i in index) for r in expected)
    if got == want:
        return None
    missing = sorted((want - got).elements(), key=_sort_key)
    extra = sorted((got - want).elements(), key=_sort_key)
    lines = [f"columns: {columns}", f"MV rows: {sum(got.values())}, oracle rows: {sum(want.values())}"]
    lines += [f"  missing from MV: {r}" for r in missing[:40]]
    lines += [f"  extra in MV:     {r}" for r in extra[:40]]
    if len(missing) > 40 or len(extra) > 40:
        lines.append(f"  ... ({len(missing)} missing, {len(extra)} extra in all)")
    return "\n".join(lines)


def run_problem(run: Any) -> str | None:
    """None for a run that ended SUCCESS or SKIPPED, else what it ended with."""
    state = str(getattr(run, "state", None))
    if state in ("SUCCESS", "SKIPPED"):
        return None
    return f"refresh run {getattr(run, 'run_id', '?')} ended {state}: {getattr(run, 'error', None)}"
