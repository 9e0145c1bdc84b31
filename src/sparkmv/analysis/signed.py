"""Signed delta queries: a maintainable query rewritten to read one base table as signed
changelog rows (+1 inserted, -1 retracted), so its result is the signed change of the
query's result (RisingWave's and Flink's retraction streams, for a batch).

* A projection carries each row's sign as the column :data:`SIGN`.
* An aggregate weighs every row by its sign: ``SUM(x)`` adds ``-x`` for a retraction,
  ``COUNT(*)`` becomes ``SUM(sign)``, ``COUNT(x)`` counts signs of non-NULL ``x``; ``MIN`` /
  ``MAX`` see inserted rows only, and :data:`RETRACTED` carries the extreme of each group's
  retracted values: only a group where that value reaches the merged MIN / MAX may have lost
  its extreme and is recomputed (a retraction below the MAX leaves the MAX in place).

Pure sqlglot, no Spark.
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.query import table_name
from sparkmv.names import ObjectName

SIGN = "__smv_sign"
"""The sign column (+1 / -1) of signed rows, of the changelog view and of a projection's delta."""
RETRACTED = "__smv_retracted"
"""Of a signed aggregate delta: a struct whose field ``r<j>`` is, per group, the MIN (for a
MIN) or MAX (for a MAX) of the values retracted from the j-th MIN / MAX call of the select
list (NULL: none retracted). After the merge (:func:`sparkmv.refresh.incremental.merge_rows.combine`)
it is the flag 1 for a group whose retracted value reaches its merged extreme (so the extreme
may be gone and the group is recomputed), else 0."""


def signed_query(query: exp.Query, table: ObjectName, aggregate: bool, occurrence: int | None = None) -> exp.Query:
    """``query`` (a SELECT or a UNION ALL of SELECTs, each reading ``table``) with ``table``
    read as signed rows carrying :data:`SIGN`; ``occurrence`` (of a SELECT reading ``table``
    more than once): the index of its reference read as signed rows, in the order of
    :func:`~sparkmv.analysis.query.table_occurrences` (None: the first).

    >>> from sparkmv.analysis.query import parse_query
    >>> q = parse_query("SELECT k, SUM(v) AS s, COUNT(*) AS n, MAX(v) AS m FROM t GROUP BY k")
    >>> print(signed_query(q, ObjectName("default", "t"), True).sql())
    SELECT k, SUM(CASE WHEN t.__smv_sign < 0 THEN -(v) ELSE v END) AS s, SUM(t.__smv_sign) AS n, \
MAX(CASE WHEN t.__smv_sign > 0 THEN v END) AS m, NAMED_STRUCT('r0', MAX(CASE WHEN t.__smv_sign < 0 THEN v END)) \
AS __smv_retracted \
FROM t GROUP BY k
    >>> signed_query(parse_query("SELECT a FROM t AS x"), ObjectName("default", "t"), False).sql()
    'SELECT a, x.__smv_sign AS __smv_sign FROM t AS x'
    """
    out = query.copy()
    for select in out.find_all(exp.Select):
        sign = _sign_of(select, table, occurrence or 0)
        if sign is None:
            continue
        if aggregate:
            _weigh(select, sign)
        else:
            select.select(exp.alias_(sign.copy(), SIGN), copy=False)
    return out


def unsigned_projection(query: exp.Query) -> exp.Query:
    """A projection's branches with a constant sign ``1 AS __smv_sign`` (the delta of an
    append-only base table in the same run as a signed one).

    >>> from sparkmv.analysis.query import parse_query
    >>> unsigned_projection(parse_query("SELECT a FROM t")).sql()
    'SELECT a, 1 AS __smv_sign FROM t'
    """
    out = query.copy()
    for select in out.find_all(exp.Select):
        select.select(exp.alias_(exp.Literal.number(1), SIGN), copy=False)
    return out


def _sign_of(select: exp.Select, table: ObjectName, occurrence: int) -> exp.Column | None:
    """The sign column of the ``occurrence``-th reference of ``table`` as ``select`` names
    it (its alias), or None when the SELECT does not read it."""
    refs = [r for r in select.find_all(exp.Table) if r.find_ancestor(exp.Select) is select and table_name(r) == table]
    return exp.column(SIGN, table=refs[occurrence].alias_or_name) if len(refs) > occurrence else None


def _weigh(select: exp.Select, sign: exp.Column) -> None:
    """Weigh the aggregate calls of ``select``'s list by ``sign`` (in place)."""
    negative = exp.LT(this=sign.copy(), expression=exp.Literal.number(0))
    positive = exp.GT(this=sign.copy(), expression=exp.Literal.number(0))
    extrema: list[exp.Expr] = []  # NAMED_STRUCT arguments: 'r<j>', the j-th MIN / MAX of retracted values
    for item in select.expressions:
        for node in list(item.find_all(exp.Sum, exp.Count, exp.Min, exp.Max)):
            arg = node.this
            if isinstance(node, exp.Sum):
                weighed = exp.Case().when(negative.copy(), exp.Neg(this=exp.paren(arg.copy()))).else_(arg.copy())
                node.set("this", weighed)
            elif isinstance(node, exp.Count):
                if isinstance(arg, exp.Star):
                    node.replace(exp.Sum(this=sign.copy()))
                else:
                    nonnull = exp.Case().when(arg.copy().is_(exp.null()), exp.Literal.number(0)).else_(sign.copy())
                    node.replace(exp.Sum(this=nonnull))
            else:
                # The extreme of the retracted values, beside the extreme of the inserted ones.
                gone = exp.Case().when(negative.copy(), arg.copy())
                extrema.append(exp.Literal.string(f"r{len(extrema) // 2}"))
                extrema.append(type(node)(this=gone))
                node.set("this", exp.Case().when(positive.copy(), arg.copy()))
    if extrema:
        packed = exp.Anonymous(this="NAMED_STRUCT", expressions=extrema)
        select.select(exp.alias_(packed, RETRACTED), copy=False)
