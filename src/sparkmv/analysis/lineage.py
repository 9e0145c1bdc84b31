"""Partition lineage: how the MV partition column derives from base partition columns.

For each base table, either a :class:`PartitionMapping` (the table is a *reference table*:
its partitions map onto MV partitions through a known transform) or nothing (a change in
it refreshes every MV partition). Traced with ``sqlglot.lineage`` through CTEs,
subqueries, joins and ``UNION ALL``.

Known transforms of a base partition value ``v`` (text):

- identity: ``v``
- ``date_format(col, 'yyyy-MM')`` / ``'yyyy'`` / ``'yyyy-MM-dd'`` of a ``yyyy-MM-dd`` value
- ``substr(col, 1, n)`` / ``substring`` / ``left(col, n)``: the first ``n`` characters
- ``trunc(col, 'MM'|'YYYY')`` (a DATE) and ``cast(date_trunc('month'|'year'|'day', col) AS
  DATE)``: the first day of the month/year as ``yyyy-MM-dd``
- ``date_trunc(...)`` without the cast is a TIMESTAMP in Spark: the same with ``00:00:00``
- ``cast(col AS DATE)``: the first 10 characters

A set operation (``UNION ALL``) maps each branch separately; the same table in several
branches must map the same way.

>>> t = Transform("prefix", 7)
>>> t.apply("1995-02-14")
'1995-02'
>>> Transform("trunc_month", 0).apply("1995-02-14")
'1995-02-01'
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.lineage import Node, lineage

from sparkmv.analysis.partition_transforms import IDENTITY, TIME_SUFFIX, Transform, _compose, _transform_of
from sparkmv.analysis.query import DIALECT, table_name
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName

__all__ = [
    "IDENTITY",
    "TIME_SUFFIX",
    "Lineage",
    "PartitionMapping",
    "Transform",
    "as_object_names",
    "partition_lineage",
    "reference_tables",
    "tables_read_twice",
]


@dataclass(frozen=True)
class PartitionMapping:
    """MV partition = ``transform(base_table.base_column)``."""

    base_table: str
    base_column: str
    transform: Transform


@dataclass(frozen=True)
class Lineage:
    """Partition lineage of one MV.

    Attributes:
        mappings: qualified base table -> mapping, for reference tables.
        reason: why lineage is unknown for some or all tables (None when all known).
        complete: True when every row's MV partition value is the image of a reference
            partition: each branch of the partition column traces to a reference table and
            no outer join can pad it with NULL. Otherwise rows may carry values no
            reference partition maps to, and the planner computes them in a rest chunk.
    """

    mappings: dict[str, PartitionMapping]
    reason: str | None = None
    complete: bool = False
    sources: tuple[tuple[str, str], ...] = ()
    """(qualified table, column) of every base column the MV partition column traces to."""

    @property
    def known(self) -> bool:
        """True when at least one reference table maps onto the MV partitions."""
        return bool(self.mappings)


def partition_lineage(
    query: exp.Query,
    partition_by: str,
    schema: dict[str, dict[str, str]],
    partition_columns: dict[str, list[str]],
) -> Lineage:
    """Trace ``partition_by`` of ``query`` to the partition columns of its base tables.

    Args:
        query: the parsed defining query (table names unbound).
        partition_by: the MV partition column (an output column of ``query``).
        schema: qualified table -> column -> type, for every base table.
        partition_columns: qualified table -> its partition columns.

    Returns:
        A :class:`Lineage`; tables whose contribution is unknown or many-to-many are left
        out of ``mappings`` and named in ``reason``.
    """
    sg_schema: dict[str, dict[str, dict[str, str]]] = {}
    for qualified, cols in schema.items():
        ns, name = qualified.split(".", 1)
        sg_schema.setdefault(ns, {})[name] = cols
    bound = query.copy()
    for table in bound.find_all(exp.Table):
        if table.name and not table.db and not isinstance(table.this, exp.Func):
            qualified = table_name(table).qualified
            if qualified in schema:
                table.set("db", exp.to_identifier(qualified.split(".", 1)[0]))
    try:
        root = lineage(partition_by, bound, schema=sg_schema, dialect=DIALECT)
    except (SqlglotError, ValueError, KeyError) as exc:
        return Lineage({}, f"cannot trace partition column {partition_by!r}: {exc}")
    mappings: dict[str, PartitionMapping] = {}
    problems: list[str] = []
    leaves: list[tuple[str, str, Transform]] = []
    _walk(root, IDENTITY, partition_columns, mappings, problems, leaves)
    _map_join_equivalents(bound, leaves, partition_columns, mappings, problems)
    for twice in sorted(tables_read_twice(bound) & set(mappings)):
        # Restricting every read of a self-joined table to the changed partitions would drop
        # the rows the other read needs from other partitions: it is a non-reference table.
        del mappings[twice]
        problems.append(f"table {twice} is read more than once in one query branch (a self-join)")
    mappings = {t: m for t, m in mappings.items() if m.transform.kind != "conflict"}
    unmapped = sorted(set(partition_columns) - set(mappings))
    reason = "; ".join(problems) if problems else None
    if not mappings and reason is None:
        reason = f"partition column {partition_by!r} does not derive from a base partition column"
    elif unmapped and reason is None:
        reason = None  # non-reference tables: their changes refresh all partitions
    outer = any(j.args.get("side") for j in bound.find_all(exp.Join))
    sources = tuple(sorted({(t, c) for t, c, _ in leaves}))
    return Lineage(mappings, reason, complete=bool(mappings) and not problems and not outer, sources=sources)


def tables_read_twice(query: exp.Query) -> set[str]:
    """Qualified names of the tables read more than once within one ``UNION`` branch of
    ``query`` (a self-join, directly or through a subquery or a CTE read twice).

    >>> from sparkmv.analysis.query import parse_query
    >>> sorted(tables_read_twice(parse_query("SELECT * FROM f a JOIN f b ON a.k = b.k")))
    ['default.f']
    >>> tables_read_twice(parse_query("SELECT k FROM f UNION ALL SELECT k FROM f"))
    set()
    >>> q = "WITH c AS (SELECT k FROM f) SELECT * FROM c x JOIN c y ON x.k = y.k"
    >>> sorted(tables_read_twice(parse_query(q)))
    ['default.f']
    """
    ctes = {cte.alias_or_name.lower(): cte.this for cte in query.find_all(exp.CTE)}
    twice: set[str] = set()
    for branch in _union_branches(query):
        counts = _table_reads(branch, ctes, depth=0)
        twice |= {t for t, n in counts.items() if n > 1}
    return twice


def _union_branches(query: exp.Expr) -> list[exp.Expr]:
    if isinstance(query, exp.Union):
        return _union_branches(query.left) + _union_branches(query.right)
    return [query]


def _table_reads(node: exp.Expr, ctes: dict[str, exp.Expr], depth: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for table in node.find_all(exp.Table):
        if any(isinstance(a, exp.CTE) for a in _ancestors(table, node)) or not table.name:
            continue
        if isinstance(table.this, exp.Func):
            continue
        cte = ctes.get(table.name.lower()) if not table.db else None
        if cte is not None and depth < 16:
            for t, n in _table_reads(cte, ctes, depth + 1).items():
                counts[t] = counts.get(t, 0) + n
            continue
        qualified = table_name(table).qualified
        counts[qualified] = counts.get(qualified, 0) + 1
    return counts


def _ancestors(node: exp.Expr, stop: exp.Expr) -> list[exp.Expr]:
    out: list[exp.Expr] = []
    parent = node.parent
    while parent is not None and parent is not stop:
        out.append(parent)
        parent = parent.parent
    return out


def _walk(
    node: Node,
    acc: Transform,
    partition_columns: dict[str, list[str]],
    out: dict[str, PartitionMapping],
    problems: list[str],
    leaves: list[tuple[str, str, Transform]],
) -> None:
    expr = node.expression
    if isinstance(node.source, exp.Table) and not node.downstream:
        table = table_name(node.source).qualified
        column = node.name.split(".")[-1]
        parts = partition_columns.get(table, [])
        # Any level of a multi-level partitioning maps (a path y=../m=.. holds each value).
        level = next((p for p in parts if p.lower() == column.lower()), None)
        leaves.append((table, column.lower(), acc))
        if level is not None:
            mapping = PartitionMapping(table, level, acc)
            previous = out.get(table)
            if previous is not None and previous != mapping:
                problems.append(f"{table} maps onto the MV partitions in more than one way (many-to-many)")
                out[table] = PartitionMapping(table, parts[0], Transform("conflict"))
            elif previous is None:
                out[table] = mapping
        else:
            problems.append(f"MV partition column comes from {table}.{column}, not its partition column")
        return
    step: Transform | None = IDENTITY
    if isinstance(node.source, exp.SetOperation) and node.downstream:
        # The node of a set operation shows the first branch's expression; each branch
        # is its own child node and is walked with its own transform.
        for child in node.downstream:
            _walk(child, acc, partition_columns, out, problems, leaves)
        return
    if isinstance(expr, exp.Alias | exp.Column | exp.Cast | exp.Paren) or not isinstance(expr, exp.Expression):
        recognised = _transform_of(expr) if isinstance(expr, exp.Expression) else (IDENTITY, None)
        step = recognised[0] if recognised else None
    elif isinstance(expr, exp.Query):
        step = IDENTITY  # a set operation node: each branch is walked
    else:
        recognised = _transform_of(expr)
        step = recognised[0] if recognised else None
    if step is None:
        problems.append(f"unsupported transform of the partition column: {expr.sql(DIALECT)[:80]}")
        return
    composed = _compose(acc, step)
    if composed is None:
        problems.append(f"nested transforms are not supported: {expr.sql(DIALECT)[:80]}")
        return
    for child in node.downstream:
        _walk(child, composed, partition_columns, out, problems, leaves)


def _map_join_equivalents(
    query: exp.Expr,
    leaves: list[tuple[str, str, Transform]],
    partition_columns: dict[str, list[str]],
    out: dict[str, PartitionMapping],
    problems: list[str],
) -> None:
    """Map base tables through equi-join equivalence classes: when the MV partition column
    comes from ``a.x`` and an inner join says ``a.x = b.p`` with ``p`` a partition column
    of ``b``, then ``b`` is a reference table with the same transform (each MV row's
    ``a.x`` equals its ``b.p``). Outer joins are not followed (their NULL rows break the
    equality)."""
    classes = _equivalence_classes(query)
    for table, column, transform in leaves:
        derived = False
        for other, other_column in sorted(classes.get((table, column), set())):
            parts = partition_columns.get(other, [])
            level = next((p for p in parts if p.lower() == other_column), None)
            if other == table or level is None:
                continue
            mapping = PartitionMapping(other, level, transform)
            derived = True
            previous = out.get(other)
            if previous is None:
                out[other] = mapping
            elif previous != mapping and previous.transform.kind != "conflict":
                problems.append(f"{other} maps onto the MV partitions in more than one way (many-to-many)")
                out[other] = PartitionMapping(other, level, Transform("conflict"))
        if derived:
            # The leaf's own table is not partitioned by the column, but a table joined to it is.
            problems[:] = [p for p in problems if not p.startswith(f"MV partition column comes from {table}.")]


def _equivalence_classes(query: exp.Expr) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """(qualified table, column) -> every (table, column) an inner equi-join (or a WHERE
    equality) makes equal to it, transitively."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for select in query.find_all(exp.Select):
        aliases = _aliases(select)
        conditions = [select.args.get("where")]
        conditions += [j.args.get("on") for j in select.args.get("joins") or [] if not j.args.get("side")]
        for cond in conditions:
            if cond is None:
                continue
            for eq in cond.find_all(exp.EQ):
                left, right = _resolve(eq.left, aliases), _resolve(eq.right, aliases)
                if left and right and _conjunct(eq, cond):
                    parent[find(left)] = find(right)
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for member in list(parent):
        groups.setdefault(find(member), set()).add(member)
    return {m: group - {m} for group in groups.values() for m in group}


def _aliases(select: exp.Select) -> dict[str, str]:
    """Alias (or table name) -> qualified table, for the tables read directly by ``select``."""
    sources = [select.args.get("from_"), *(select.args.get("joins") or [])]
    out: dict[str, str] = {}
    for source in sources:
        table = source.this if source is not None else None
        if isinstance(table, exp.Table) and table.name and not isinstance(table.this, exp.Func):
            try:
                out[(table.alias or table.name).lower()] = table_name(table).qualified
            except AnalysisError:
                continue
    return out


def _resolve(node: exp.Expression, aliases: dict[str, str]) -> tuple[str, str] | None:
    if not isinstance(node, exp.Column):
        return None
    if node.table:
        qualified = aliases.get(node.table.lower())
    else:
        qualified = next(iter(aliases.values())) if len(aliases) == 1 else None
    return (qualified, node.name.lower()) if qualified else None


def _conjunct(eq: exp.Expression, cond: exp.Expression) -> bool:
    """True when ``eq`` is one of the AND-ed terms of ``cond`` (not under OR / NOT)."""
    node = eq.parent
    while node is not None and node is not cond.parent:
        if not isinstance(node, exp.And | exp.Paren | exp.Where):
            return False
        node = node.parent
    return True


def reference_tables(lineage_: Lineage) -> set[str]:
    """Qualified names of the reference tables."""
    return set(lineage_.mappings)


def as_object_names(tables: set[str]) -> list[ObjectName]:
    """Qualified names as :class:`ObjectName`, sorted."""
    return sorted(ObjectName.parse(t, allow_reserved=True) for t in tables)
