"""Normal forms for query rewrite: qualified queries, canonical expressions, SELECT blocks.

A query is qualified by sqlglot (every column gets its table, stars are expanded) against the
base tables' schemas; then every table reference is renamed to one alias derived from the
table's name (``default.lineitem`` -> ``default__lineitem``), so table aliases do not matter.
Two expressions are the same when their canonical trees are equal: parentheses dropped,
``a > b`` read as ``b < a``, operands of commutative operators (``=``, ``+``, ``*``, ``AND``,
``OR``) sorted, ``count(1)`` read as ``count(*)``.

>>> schema = {ObjectName("default", "t"): {"a": "int", "b": "int"}}
>>> q = qualify_query(parse_query("SELECT x.a FROM t AS x WHERE 1 < x.b AND x.a BETWEEN 2 AND 3"), schema)
>>> b = select_block(q)
>>> [c.sql() for c in b.conjuncts]
['1 < default__t.b', 'default__t.a >= 2', 'default__t.a <= 3']
>>> canonical(b.conjuncts[0]) == canonical(parse_query("SELECT default__t.b > 1").selects[0])
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from sparkmv.analysis.constructs import is_aggregate_call
from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.errors import AnalysisError
from sparkmv.names import DEFAULT_NAMESPACE, ObjectName

Schema = Mapping[ObjectName, Mapping[str, str]]
"""Base table -> column name (lower case) -> Spark SQL type (``decimal(15,2)``, ``date``)."""

_SWAPPED: dict[type[exp.Expr], type[exp.Expr]] = {exp.GT: exp.LT, exp.GTE: exp.LTE}
_COMMUTATIVE = (exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.Add, exp.Mul, exp.And, exp.Or)
__all__ = ["Block", "Schema", "canonical", "parse_query", "qualify_query", "select_block", "table_alias"]


def table_alias(name: ObjectName) -> str:
    """The one alias of base table ``name`` in normalized queries.

    >>> table_alias(ObjectName("sales", "orders"))
    'sales__orders'
    """
    return f"{name.namespace}__{name.name}"


def qualify_query(query: exp.Query, schema: Schema) -> exp.Query:
    """A qualified copy of ``query``: tables get their namespace, columns their table, stars
    are expanded, identifiers lower-cased (Spark resolves them case-insensitively).

    Raises:
        AnalysisError: when sqlglot cannot qualify it (an ambiguous or unknown column).
    """
    nested: dict[str, object] = {}
    for name, columns in schema.items():
        tables = nested.setdefault(name.namespace, {})
        assert isinstance(tables, dict)
        tables[name.name] = dict(columns)
    try:
        return qualify(
            query.copy(),
            schema=nested,
            dialect=DIALECT,
            db=DEFAULT_NAMESPACE,
            quote_identifiers=False,
            validate_qualify_columns=False,
        )
    except SqlglotError as exc:
        raise AnalysisError(f"the query cannot be qualified: {str(exc).splitlines()[0]}") from exc


def canonical(expr: exp.Expr) -> exp.Expr:
    """The canonical tree of ``expr`` (see the module docstring); compare with ``==``."""
    out = _canon(expr.copy())
    return out


def _canon(node: exp.Expr) -> exp.Expr:
    while isinstance(node, exp.Paren):
        node = node.this
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expr):
            node.set(key, _canon(value))
        elif isinstance(value, list):
            node.set(key, [_canon(v) if isinstance(v, exp.Expr) else v for v in value])
    swapped = _SWAPPED.get(type(node))
    if swapped is not None:
        node = swapped(this=node.expression, expression=node.this)
    elif isinstance(node, _COMMUTATIVE):
        left, right = node.this, node.expression
        if left.sql(DIALECT) > right.sql(DIALECT):
            node = type(node)(this=right, expression=left)
    elif isinstance(node, exp.Count):
        node.set("big_int", None)  # how sqlglot reads Spark's COUNT: not part of the meaning
        if isinstance(node.this, exp.Literal):  # count(1): a literal is never NULL
            node.set("this", exp.Star())
    return node


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    """The AND-ed parts of ``condition``; ``a BETWEEN lo AND hi`` is two parts.

    >>> where = parse_query("SELECT 1 WHERE (a = 1 AND b) AND c BETWEEN 1 AND 2").args["where"]
    >>> [c.sql() for c in conjuncts(where.this)]
    ['a = 1', 'b', 'c >= 1', 'c <= 2']
    """
    if condition is None:
        return []
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Between):
        low = exp.GTE(this=condition.this.copy(), expression=condition.args["low"].copy())
        high = exp.LTE(this=condition.this.copy(), expression=condition.args["high"].copy())
        return [low, high]
    return [condition]


@dataclass
class Block:
    """One qualified SELECT, in the parts rewrite matching compares.

    Attributes:
        select: the SELECT, its base tables aliased by :func:`table_alias`.
        tables: the base tables it reads (each once).
        join_shape: None when all joins are inner (their conditions are then in
            ``conjuncts``); else the canonical FROM and JOIN clauses, which must be equal.
        conjuncts: WHERE parts (and inner-join conditions).
        keys: GROUP BY expressions.
        aggregate: True for GROUP BY queries and global aggregates.
        problem: why the block cannot be matched at all (a subquery source, a table read
            twice, ...), else None.
    """

    select: exp.Select
    tables: frozenset[ObjectName]
    join_shape: exp.Expr | None
    conjuncts: list[exp.Expr]
    keys: list[exp.Expr]
    aggregate: bool
    problem: str | None = None


def select_block(select: exp.Select) -> Block:
    """The :class:`Block` of a qualified SELECT; its base tables and their columns are renamed
    in place to :func:`table_alias` names."""
    aliases: dict[str, ObjectName] = {}
    problem = None
    joins = select.args.get("joins") or []
    from_ = select.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [j.this for j in joins]
    for source in sources:
        if not isinstance(source, exp.Table) or not source.db or isinstance(source.this, exp.Func):
            problem = problem or "it reads a subquery or a common table expression"
            continue
        name = ObjectName(source.db.lower(), source.name.lower())
        if name in aliases.values():
            problem = problem or f"it reads {name.display} twice"
        aliases[source.alias_or_name.lower()] = name
    _rename(select, aliases)
    inner = all(not j.side and j.kind in ("", "INNER", "CROSS") and not j.args.get("using") for j in joins)
    parts = conjuncts(select.args["where"].this) if select.args.get("where") else []
    shape = None
    if inner:
        for join in joins:
            parts.extend(conjuncts(join.args.get("on")))
    else:
        shape = exp.Tuple(expressions=[canonical(s) for s in [from_, *joins]])
    group = select.args.get("group")
    keys = list(group.expressions) if group is not None else []
    aggregate = group is not None or any(_has_aggregate(item) for item in select.expressions)
    sets = (exp.Rollup, exp.Cube, exp.GroupingSets)
    grouping_sets = group is not None and (
        not keys
        or any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube", "totals"))
        or any(isinstance(k, sets) for k in keys)
    )
    if select.args.get("laterals") or grouping_sets:
        problem = problem or "LATERAL VIEW, ROLLUP, CUBE and grouping sets are not matched"
    return Block(select, frozenset(aliases.values()), shape, parts, keys, aggregate, problem)


def _rename(select: exp.Select, aliases: dict[str, ObjectName]) -> None:
    """Rename the base tables of ``select`` and the columns referring to them, also from
    nested subqueries (correlated references) unless those define the same alias."""
    for table in select.find_all(exp.Table):
        if table.find_ancestor(exp.Select) is select and table.alias_or_name.lower() in aliases:
            new = table_alias(aliases[table.alias_or_name.lower()])
            table.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
    for column in select.find_all(exp.Column):
        alias = column.table.lower()
        if alias in aliases and _resolves_to(column, alias, select):
            column.set("table", exp.to_identifier(table_alias(aliases[alias])))


def _resolves_to(column: exp.Column, alias: str, select: exp.Select) -> bool:
    scope = column.find_ancestor(exp.Select)
    while scope is not None and scope is not select:
        if alias in _source_aliases(scope):
            return False
        scope = scope.find_ancestor(exp.Select)
    return scope is select


def _source_aliases(select: exp.Select) -> set[str]:
    from_ = select.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
    return {s.alias_or_name.lower() for s in sources}


def _has_aggregate(expr: exp.Expr) -> bool:
    return any(is_aggregate_call(n) and not n.find_ancestor(exp.Window) for n in expr.walk())
