"""What a materialized view offers to query rewrite: its normalized block and, per column,
the expression it holds.

An aggregate MV offers its GROUP BY keys (row-level expressions) and its aggregates; the
hidden state columns of incremental refresh (:mod:`sparkmv.analysis.incremental`) add
``count(*)`` (``__smv_count``), ``count(x)`` (``__smv_nn_<i>``, behind ``sum(x)`` or
``avg(x)`` at select item ``i``) and ``sum(x)`` (``__smv_sum_<i>``, behind ``avg(x)``). An SPJ
MV (no aggregate) offers each of its select items.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate_call
from sparkmv.analysis.incremental import ROW_COUNT, STATE_PREFIX
from sparkmv.analysis.query import parse_query, referenced_tables
from sparkmv.analysis.rewrite.normalize import Block, Schema, canonical, qualify_query, select_block
from sparkmv.analysis.rewrite.stale import StalePartitions
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName, is_hidden_column


@dataclass(frozen=True)
class MvCandidate:
    """A materialized view that may answer a query.

    Attributes:
        name: the MV.
        definition: its defining query (Spark SQL, table names as written).
        columns: its table's columns in order, ``(name, Spark SQL type)``, hidden state
            columns included (``("revenue", "decimal(25,2)")``).
        rows: rows in its current snapshot (None when unknown); among MVs that can answer
            a query, the one with the fewest rows is used.
        stale: its stale partitions when a rewrite must compute them from the base
            (partition compensation, :mod:`sparkmv.analysis.rewrite.union`); None reads
            the MV as it is.
    """

    name: ObjectName
    definition: str
    columns: tuple[tuple[str, str], ...]
    rows: int | None = None
    stale: StalePartitions | None = None


@dataclass
class MvShape:
    """A candidate MV, normalized for matching.

    Attributes:
        candidate: the MV.
        block: its normalized SELECT (None when ``problem``).
        keys: canonical row-level expression -> MV column (group keys of an aggregate MV,
            every select item of an SPJ MV).
        key_count: number of distinct GROUP BY expressions of an aggregate MV.
        aggregates: canonical aggregate call -> MV column (hidden columns included).
        types: MV column -> Spark SQL type.
        problem: why the MV is never used for rewrite, else None.
    """

    candidate: MvCandidate
    block: Block | None = None
    keys: dict[exp.Expr, str] = field(default_factory=dict)
    key_count: int = 0
    aggregates: dict[exp.Expr, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    problem: str | None = None

    @property
    def aggregate(self) -> bool:
        """True for an aggregate MV."""
        return self.block is not None and self.block.aggregate


def mv_shape(candidate: MvCandidate, schema: Schema) -> MvShape:
    """Normalize ``candidate`` against the base-table ``schema``; an MV that cannot be used
    gets ``problem`` (``its query has a HAVING clause``, ...), never an error."""
    types = {name.lower(): kind for name, kind in candidate.columns}
    try:
        query = parse_query(candidate.definition)
        if any(t not in schema for t in referenced_tables(query)):
            return MvShape(candidate, types=types, problem="a base table's schema is unknown")
        qualified = qualify_query(query, schema)
    except SparkMvError as exc:
        return MvShape(candidate, types=types, problem=str(exc))
    if not isinstance(qualified, exp.Select):
        return MvShape(candidate, types=types, problem="its query is a set operation")
    problem = _select_problem(qualified)
    if problem:
        return MvShape(candidate, types=types, problem=problem)
    block = select_block(qualified)
    if block.problem:
        return MvShape(candidate, types=types, problem=block.problem)
    visible = [name.lower() for name, _ in candidate.columns if not is_hidden_column(name)]
    items = [_unparen(item.unalias()) for item in qualified.expressions]
    if len(visible) != len(items):
        return MvShape(candidate, types=types, problem="its table's columns do not match its query")
    shape = MvShape(candidate, block, types=types)
    if block.aggregate:
        _aggregate_offers(shape, items, visible)
    else:
        shape.keys = {canonical(item): column for item, column in zip(items, visible, strict=True)}
    return shape


def _aggregate_offers(shape: MvShape, items: list[exp.Expr], visible: list[str]) -> None:
    assert shape.block is not None
    group = {canonical(k) for k in shape.block.keys}
    shape.key_count = len(group)
    for i, (item, column) in enumerate(zip(items, visible, strict=True)):
        key = canonical(item)
        if key in group:
            shape.keys.setdefault(key, column)
        elif is_aggregate_call(item):
            shape.aggregates.setdefault(key, column)
            arg = item.expressions[0] if isinstance(item, exp.Anonymous) and item.expressions else item.this
            if not isinstance(arg, exp.Expr) or isinstance(arg, exp.Distinct):
                continue
            hidden = {
                f"{STATE_PREFIX}nn_{i}": exp.Count(this=arg.copy()),
                f"{STATE_PREFIX}sum_{i}": exp.Sum(this=arg.copy()),
            }
            for name, call in hidden.items():
                if name in shape.types:
                    shape.aggregates.setdefault(canonical(call), name)
    if ROW_COUNT in shape.types:
        shape.aggregates.setdefault(canonical(exp.Count(this=exp.Star())), ROW_COUNT)


def _select_problem(select: exp.Select) -> str | None:
    for key, what in (
        ("distinct", "SELECT DISTINCT"),
        ("having", "a HAVING clause"),
        ("limit", "LIMIT"),
        ("offset", "OFFSET"),
        ("order", "ORDER BY"),
        ("qualify", "QUALIFY"),
        ("with_", "a WITH clause"),
    ):
        if select.args.get(key) is not None:
            return f"its query has {what}"
    if any(isinstance(n, exp.Window) for n in select.walk()):
        return "its query has a window function"
    if any(isinstance(n, exp.Query) and n is not select for n in select.walk()):
        return "its query has a subquery"
    return None


def _unparen(expr: exp.Expr) -> exp.Expr:
    while isinstance(expr, exp.Paren):
        expr = expr.this
    return expr
