"""Matching one SELECT block of a query against one materialized view.

The MV can answer the block when both read the same base tables with the same joins (inner
joins compared as sets of conditions, outer joins as written), the MV's predicates are all
implied by the block's (:mod:`sparkmv.analysis.rewrite.implies`), and every expression the
block needs beyond them can be computed from the MV's columns: for an aggregate MV the
remaining predicates and the group keys must be expressions of its group keys and the
aggregates derivable (:mod:`sparkmv.analysis.rewrite.derive`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate_call
from sparkmv.analysis.rewrite.derive import NoMatch, derive_aggregate, describe
from sparkmv.analysis.rewrite.implies import implies
from sparkmv.analysis.rewrite.normalize import Block, canonical, table_alias
from sparkmv.analysis.rewrite.shape import MvShape
from sparkmv.analysis.rewrite.union import union_source
from sparkmv.storage.partition_values import PartitionValueError

EXACT = "exact match"
ROLLUP = "aggregate rollup"
COMPENSATION = "predicate compensation"


@dataclass(frozen=True)
class Match:
    """How an MV answers a block: the replacement SELECT over the MV and the kind of rewrite
    (:data:`EXACT`, :data:`ROLLUP`, :data:`COMPENSATION`) with details."""

    select: exp.Select
    kind: str
    detail: str


def match_block(block: Block, shape: MvShape) -> Match:
    """The rewrite of ``block`` over ``shape``'s MV.

    Raises:
        NoMatch: with the reason the MV cannot answer the block.
    """
    if shape.problem or shape.block is None:
        raise NoMatch(shape.problem or "it cannot be analysed")
    if block.problem:
        raise NoMatch(f"the query cannot be matched: {block.problem}")
    mv = shape.block
    if block.tables != mv.tables:
        names = ", ".join(sorted(t.display for t in mv.tables))
        query = ", ".join(sorted(t.display for t in block.tables))
        raise NoMatch(f"it reads {names}, the query reads {query}")
    if (block.join_shape is None) != (mv.join_shape is None) or (
        block.join_shape is not None and block.join_shape != mv.join_shape
    ):
        raise NoMatch("outer joins differ from the query's")
    query_keys = [canonical(c) for c in block.conjuncts]
    for part in mv.conjuncts:
        key = canonical(part)
        if key not in query_keys and not any(implies(q, key) for q in query_keys):
            raise NoMatch(f"its predicate {describe(part)} is not implied by the query")
    mv_keys = {canonical(c) for c in mv.conjuncts}
    residual = [c for c, k in zip(block.conjuncts, query_keys, strict=True) if k not in mv_keys]
    if shape.aggregate:
        return _aggregate(block, shape, residual)
    return _spj(block, shape, residual)


def _ref_maker(shape: MvShape) -> Callable[[str], exp.Expr]:
    alias = _mv_alias(shape)
    return lambda column: exp.column(column, alias)


def _mv_alias(shape: MvShape) -> str:
    return table_alias(shape.candidate.name)


def _row_mapper(block: Block, shape: MvShape, what: str) -> Callable[[exp.Expr], exp.Expr]:
    """Maps a row-level expression of the block onto the MV's key columns (every column of
    an SPJ MV); raises NoMatch naming the first base column left."""
    ref = _ref_maker(shape)
    base = {table_alias(t) for t in block.tables}

    def lookup(node: exp.Expr) -> exp.Expr | None:
        column = shape.keys.get(canonical(node))
        return ref(column) if column is not None else None

    def mapper(expr: exp.Expr) -> exp.Expr:
        out = substitute(expr, lookup)
        _check_mapped(out, base, what)
        return out

    return mapper


def _check_mapped(expr: exp.Expr, base: set[str], what: str) -> None:
    for column in expr.find_all(exp.Column):
        if column.table in base:
            raise NoMatch(f"{what} column {column.name} not in the MV")


def substitute(expr: exp.Expr, lookup: Callable[[exp.Expr], exp.Expr | None]) -> exp.Expr:
    """A copy of ``expr`` with each outermost subtree for which ``lookup`` gives a
    replacement replaced by it."""

    def visit(node: exp.Expr) -> exp.Expr:
        hit = lookup(node)
        if hit is not None:
            return hit
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expr):
                node.set(key, visit(value))
            elif isinstance(value, list):
                node.set(key, [visit(v) if isinstance(v, exp.Expr) else v for v in value])
        return node

    return visit(expr.copy())


def _spj(block: Block, shape: MvShape, residual: list[exp.Expr]) -> Match:
    row = _row_mapper(block, shape, "")
    select = _base_select(block, shape)
    where = [_mapped(row, c, "predicate on") for c in residual]
    select.set("expressions", [_mapped(row, item, "") for item in block.select.expressions])
    _set_where(select, where)
    group = block.select.args.get("group")
    if group is not None:
        select.set("group", exp.Group(expressions=[_mapped(row, k, "group-by") for k in group.expressions]))
    for key in ("having", "order", "qualify"):
        if block.select.args.get(key) is not None:
            select.set(key, _mapped(row, block.select.args[key], ""))
    kind = COMPENSATION if residual else EXACT
    return Match(select, kind, _detail(residual))


def _mapped(mapper: Callable[[exp.Expr], exp.Expr], expr: exp.Expr, what: str) -> exp.Expr:
    try:
        return mapper(expr)
    except NoMatch as exc:
        if what and exc.reason.startswith(" column"):
            raise NoMatch(f"{what}{exc.reason}") from None
        raise NoMatch(exc.reason.strip()) from None


def _base_select(block: Block, shape: MvShape) -> exp.Select:
    """The block's SELECT reading the MV instead of its tables (with stale partitions: its
    fresh partitions UNION ALL the stale ones from the base), clauses still to be set."""
    select = block.select.copy()
    for key in ("joins", "where", "group", "having", "order", "qualify"):
        select.set(key, None)
    source: exp.Expr
    if shape.candidate.stale is not None:
        try:
            source = union_source(shape.candidate, _mv_alias(shape))
        except PartitionValueError as exc:
            raise NoMatch(f"its stale partitions cannot be compensated: {exc}") from None
    else:
        source = exp.to_table(shape.candidate.name.qualified)
        source.set("alias", exp.TableAlias(this=exp.to_identifier(_mv_alias(shape))))
    select.set("from_", exp.From(this=source))
    return select


def _set_where(select: exp.Select, parts: list[exp.Expr]) -> None:
    if parts:
        select.set("where", exp.Where(this=exp.and_(*parts, copy=False)))


def _detail(residual: list[exp.Expr], extra: str = "") -> str:
    parts = [extra] if extra else []
    if residual:
        parts.append("compensating " + " AND ".join(describe(c) for c in residual))
    return "; ".join(parts)


def _aggregate(block: Block, shape: MvShape, residual: list[exp.Expr]) -> Match:
    if not block.aggregate:
        raise NoMatch("it aggregates, the query does not")
    if any(isinstance(n, exp.Window) for n in block.select.walk()):
        raise NoMatch("the query's window functions are not rolled up")
    row = _row_mapper(block, shape, "")
    where = [_mapped(row, c, "predicate on") for c in residual]
    keys = [_mapped(row, k, "group-by") for k in block.keys]
    alias = _mv_alias(shape)
    key_columns = {k.name for k in keys if isinstance(k, exp.Column) and k.table == alias}
    same = len(key_columns) == len(keys) and key_columns == set(shape.keys.values()) and len(keys) == shape.key_count
    if same:
        try:
            return _aggregate_select(block, shape, residual, where, keys, rollup=False)
        except NoMatch:
            pass
    return _aggregate_select(block, shape, residual, where, keys, rollup=True)


def _aggregate_select(
    block: Block, shape: MvShape, residual: list[exp.Expr], where: list[exp.Expr], keys: list[exp.Expr], rollup: bool
) -> Match:
    row = _row_mapper(block, shape, "")
    ref = _ref_maker(shape)

    def lookup(node: exp.Expr) -> exp.Expr | None:
        if is_aggregate_call(node):
            return derive_aggregate(node, shape, ref, rollup, lambda e: _mapped(row, e, "aggregated"))
        column = shape.keys.get(canonical(node))
        return ref(column) if column is not None else None

    base = {table_alias(t) for t in block.tables}

    def mapper(expr: exp.Expr) -> exp.Expr:
        out = substitute(expr, lookup)
        _check_mapped(out, base, "")
        return out

    select = _base_select(block, shape)
    select.set("expressions", [_mapped(mapper, item, "") for item in block.select.expressions])
    having = block.select.args.get("having")
    if rollup:
        _set_where(select, where)
        if keys:
            select.set("group", exp.Group(expressions=keys))
        if having is not None:
            select.set("having", _mapped(mapper, having, ""))
    else:
        extra = [_mapped(mapper, having.this, "")] if having is not None else []
        _set_where(select, where + extra)
    if block.select.args.get("order") is not None:
        select.set("order", _mapped(mapper, block.select.args["order"], ""))
    if rollup:
        kept = ", ".join(describe(k) for k in keys) or "no keys"
        return Match(select, ROLLUP, _detail(residual, f"grouping by {kept}"))
    return Match(select, EXACT if not where else COMPENSATION, _detail(residual))
