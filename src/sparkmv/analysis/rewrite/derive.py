"""Deriving a query's aggregate from an aggregate MV's columns.

Without rollup (the query groups by exactly the MV's keys) an aggregate is the MV column
holding it. With rollup (the query groups by fewer keys) it is re-aggregated:

========================  ============================================================
query                     over the MV
========================  ============================================================
``sum(x)``                ``CAST(sum(s) AS <type of s>)`` (keeps Spark's SUM type)
``count(*)``/``count(x)`` ``coalesce(sum(c), 0)`` (a count is never NULL)
``min(x)``/``max(x)``     ``min(m)``/``max(m)``
``avg(x)``                ``sum(sum x) / sum(count x)``, computed as Spark's ``Average``
                          does (for decimals: the sum cast to ``decimal(p+10,s)``, divided
                          by the count as ``decimal(20,0)``, cast to ``decimal(p+4,s+4)``)
aggregate of group keys   the same call over the MV's key columns when it ignores
                          duplicates (``min``, ``max``, ``DISTINCT`` aggregates)
========================  ============================================================

Spark's ``Average`` (sql/catalyst/.../aggregate/Average.scala) is the source of the
decimal rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from sparkmv.analysis.query import DIALECT
from sparkmv.analysis.rewrite.normalize import canonical
from sparkmv.analysis.rewrite.shape import MvShape

MAX_PRECISION = 38
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


class NoMatch(Exception):
    """An MV cannot answer a (part of a) query; ``reason`` says why (internal to matching)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def describe(expr: exp.Expr) -> str:
    """Spark SQL of a query expression without table qualifiers, for reasons.

    >>> describe(exp.column("l_partkey", "default__lineitem"))
    'l_partkey'
    """
    copy = expr.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
    return copy.sql(DIALECT, normalize_functions="lower")


def derive_aggregate(
    call: exp.Expr, shape: MvShape, ref: Callable[[str], exp.Expr], rollup: bool, keys: Callable[[exp.Expr], exp.Expr]
) -> exp.Expr:
    """The expression over the MV giving aggregate ``call`` of the query.

    Args:
        ref: an MV column name -> a reference to it.
        rollup: whether the query re-aggregates MV rows (see the module docstring).
        keys: maps a row-level query expression onto MV key columns (raises NoMatch).

    Raises:
        NoMatch: when the MV's columns cannot give it.
    """
    key = canonical(call)
    column = shape.aggregates.get(key)
    if not rollup:
        if column is not None:
            return ref(column)
        if isinstance(key, exp.Avg) and not _distinct(key):
            return _average(key.this, shape, ref, rollup)
        raise NoMatch(f"{describe(call)} is not in the MV")
    if column is not None and isinstance(key, exp.Sum) and not _distinct(key):
        return exp.cast(exp.Sum(this=ref(column)), shape.types[column], dialect=DIALECT)
    if column is not None and isinstance(key, exp.Count) and not _distinct(key):
        return exp.func("coalesce", exp.Sum(this=ref(column)), exp.Literal.number(0), dialect=DIALECT)
    if column is not None and isinstance(key, exp.Min | exp.Max):
        return type(key)(this=ref(column))
    if isinstance(key, exp.Avg) and not _distinct(key):
        return _average(key.this, shape, ref, rollup)
    if isinstance(key, exp.Min | exp.Max) or _distinct(key):
        try:
            return keys(call)  # duplicates do not matter: the same call over the key columns
        except NoMatch:
            pass
    raise NoMatch(f"{describe(call)} cannot be derived from the MV's aggregates")


def _distinct(call: exp.Expr) -> bool:
    return isinstance(call.this, exp.Distinct)


def _average(arg: exp.Expr, shape: MvShape, ref: Callable[[str], exp.Expr], rollup: bool) -> exp.Expr:
    """``avg(arg)`` from the MV's ``sum(arg)`` and ``count(arg)``, as Spark's Average."""
    total = shape.aggregates.get(canonical(exp.Sum(this=arg.copy())))
    count = shape.aggregates.get(canonical(exp.Count(this=arg.copy())))
    if total is None or count is None:
        raise NoMatch(f"avg({describe(arg)}) needs sum({describe(arg)}) and count({describe(arg)}) in the MV")
    avg_column = shape.aggregates.get(canonical(exp.Avg(this=arg.copy())))
    sum_type = shape.types[total]

    def agg(e: exp.Expr) -> exp.Expr:
        return exp.Sum(this=e) if rollup else e

    denominator = exp.func("nullif", agg(ref(count)), exp.Literal.number(0), dialect=DIALECT)
    decimal = _DECIMAL.fullmatch(sum_type.replace(" ", ""))
    if decimal is None:
        numerator = agg(exp.cast(ref(total), "double"))
        return exp.Div(this=numerator, expression=denominator)
    precision, scale = int(decimal.group(1)), int(decimal.group(2))
    if avg_column is not None:
        result_type = shape.types[avg_column]
    elif precision < MAX_PRECISION:
        p = precision - 10  # Spark's SUM of decimal(p,s) is decimal(p+10,s)
        result_type = f"decimal({min(p + 4, MAX_PRECISION)},{min(scale + 4, MAX_PRECISION)})"
    else:
        raise NoMatch(f"the type of avg({describe(arg)}) cannot be told from the MV")
    numerator = exp.cast(agg(ref(total)), sum_type, dialect=DIALECT)
    quotient = exp.Div(this=numerator, expression=exp.cast(denominator, "decimal(20,0)", dialect=DIALECT))
    return exp.cast(quotient, result_type, dialect=DIALECT)
