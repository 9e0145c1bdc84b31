"""Outer joins that a WHERE condition makes inner: the null-supplying side's padded rows
are all filtered out, so the join means the same without them (Spark's
``EliminateOuterJoin``, every optimizer's outer-join simplification).

A conjunct of a SELECT's WHERE *rejects nulls* of a source when it is a comparison
(``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``LIKE``, ``BETWEEN``, ``IN``, ``IS NOT NULL``)
one of whose operands is a null-propagating expression (columns, literals, arithmetic,
casts) over a column qualified by that source: a row whose columns of the source are all
NULL makes it NULL, never true. Then, with ``b`` rejected:

- ``a LEFT JOIN b`` becomes ``a JOIN b``; ``a FULL JOIN b`` becomes ``a RIGHT JOIN b``;
- ``a RIGHT JOIN c`` with ``b`` among the sources before it (its left input) becomes
  ``a JOIN c``; ``a FULL JOIN c`` becomes ``a LEFT JOIN c``.

Rows whose ``b`` columns are not NULL do not depend on the padded rows removed, and every
row whose ``b`` columns are NULL is filtered, so the result is unchanged. Incremental
maintenance then sees an inner join, linear in both inputs (TPC-DS q93 writes
``store_sales LEFT OUTER JOIN store_returns ... WHERE sr_reason_sk = r_reason_sk``).
Only qualified columns count: an unqualified one names no source (qualify first,
:func:`sparkmv.analysis.qualify.qualify_unqualified`).

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT a.k FROM a LEFT JOIN b ON a.k = b.k CROSS JOIN r WHERE b.x = r.x")
>>> simplify_outer_joins(q).sql()
'SELECT a.k FROM a JOIN b ON a.k = b.k CROSS JOIN r WHERE b.x = r.x'
>>> q = parse_query("SELECT a.k FROM a LEFT JOIN b ON a.k = b.k WHERE coalesce(b.x, 0) = 0 OR b.y > 1")
>>> simplify_outer_joins(q) is q
True
"""

from __future__ import annotations

from sqlglot import exp

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.Between, exp.In)
_STRICT: tuple[type[exp.Expr], ...] = (exp.Column, exp.Identifier, exp.Literal, exp.Paren, exp.Cast, exp.DataType)
_STRICT += (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg)  # arithmetic: NULL in, NULL out


def simplify_outer_joins(query: exp.Query) -> exp.Query:
    """``query`` with every outer join whose null-supplying side a WHERE conjunct of its
    SELECT rejects nulls of made inner (or ``FULL`` one-sided), as the module docstring
    says; ``query`` itself (the same object) when no join changes."""
    copy = query.copy()
    changed = False
    for select in copy.find_all(exp.Select):
        changed |= _simplify(select)
    return copy if changed else query


def _simplify(select: exp.Select) -> bool:
    """Simplify ``select``'s own joins in place; True when one changed."""
    where = select.args.get("where")
    from_ = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins") or []
    if where is None or from_ is None or not joins:
        return False
    rejected = set()
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        rejected |= _rejected_sources(conjunct)
    if not rejected:
        return False
    changed = False
    before = {from_.this.alias_or_name.lower()}
    for join in joins:
        side = (join.side or "").upper()
        right = join.this.alias_or_name.lower()
        left_rejected = bool(before & rejected)
        right_rejected = right in rejected
        new = _new_side(side, left_rejected, right_rejected)
        if new != side:
            join.set("side", new or None)
            join.set("kind", None if (join.kind or "").upper() == "OUTER" else join.args.get("kind"))
            changed = True
        before.add(right)
    return changed


def _new_side(side: str, left_rejected: bool, right_rejected: bool) -> str:
    """The join side once the padded rows of a rejected input are dropped."""
    keeps_left = side in ("LEFT", "FULL") and not right_rejected  # left rows padded with NULLs
    keeps_right = side in ("RIGHT", "FULL") and not left_rejected
    if keeps_left and keeps_right:
        return "FULL"
    return "LEFT" if keeps_left else "RIGHT" if keeps_right else ""


def _rejected_sources(conjunct: exp.Expr) -> set[str]:
    """The sources (lower-case aliases) whose all-NULL rows make ``conjunct`` not true."""
    if isinstance(conjunct, exp.Paren):
        return _rejected_sources(conjunct.this)
    if isinstance(conjunct, exp.Not):
        inner = conjunct.this.unnest() if isinstance(conjunct.this, exp.Paren) else conjunct.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return _strict_sources(inner.this)
        return _rejected_sources(inner) if isinstance(inner, _COMPARISONS) else set()
    if not isinstance(conjunct, _COMPARISONS):
        return set()
    operands = [conjunct.this] + ([] if isinstance(conjunct, exp.In) else [conjunct.args.get("expression")])
    if isinstance(conjunct, exp.Between):
        operands = [conjunct.this]
    out: set[str] = set()
    for operand in operands:
        if operand is not None:
            out |= _strict_sources(operand)
    return out


def _strict_sources(expression: exp.Expr) -> set[str]:
    """The sources of the columns of ``expression`` when it is NULL whenever any of them is
    (only null-propagating nodes); empty otherwise."""
    if any(not isinstance(node, _STRICT) for node in expression.walk()):
        return set()
    return {c.table.lower() for c in expression.find_all(exp.Column) if c.table}
