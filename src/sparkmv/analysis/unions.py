"""``UNION`` (distinct) for affected-key recomputation.

``a UNION b`` is ``SELECT DISTINCT <columns> FROM (a UNION ALL b) AS __smv_union``: the
same rows, column names (the first branch's) and types (the union's). Affected-key
recomputation maintains that form with every column a key
(:mod:`sparkmv.analysis.keyed`): the rows of each branch's delta are the touched keys, and
the touched rows are recomputed from the new input, so a row deleted from one branch stays
while another branch (or another duplicate of it in the same branch) still has it.

The rewrite is an analysis step only (its caller inlines CTEs first): the MV's query is stored and fully refreshed as
written. Nested unions flatten under the top ``UNION``: ``DISTINCT(DISTINCT(x) ∪ y)`` is
``DISTINCT(x ∪ y)``, so ``a UNION ALL b UNION c`` is the DISTINCT of all three branches.
A union with ORDER BY / LIMIT (on it or a nested one), ``INTERSECT`` / ``EXCEPT``, a ``*``
select item or an unnamed expression in the first branch (its name is Spark's own) is left
as it is (and refused with its reason).

>>> from sparkmv.analysis.query import parse_query
>>> print(distinct_union(parse_query("SELECT a, b + 1 AS c FROM t UNION SELECT x, y FROM u WHERE y > 0")).sql())
SELECT DISTINCT a, c FROM (SELECT a, b + 1 AS c FROM t UNION ALL SELECT x, y FROM u WHERE y > 0) AS __smv_union
>>> branch_queries(parse_query("SELECT k FROM (SELECT k FROM t UNION ALL SELECT k FROM u) AS s WHERE k > 0"))
['SELECT k FROM (SELECT k FROM t) AS s WHERE k > 0', 'SELECT k FROM (SELECT k FROM u) AS s WHERE k > 0']
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import ORDERING
from sparkmv.analysis.query import DIALECT

UNION_ALIAS = "__smv_union"
"""The alias of the ``UNION ALL`` derived table of :func:`distinct_union`."""
_MODIFIERS = ("limit", "offset", *ORDERING)


def distinct_union(query: exp.Query) -> exp.Select | None:
    """``query`` (a ``UNION`` at the top, its CTEs inlined by the caller:
    :func:`~sparkmv.analysis.keyed.inline_ctes`) as the DISTINCT of the ``UNION ALL`` of
    its branches; None for any other query, one with a WITH, or a union the module leaves
    as it is. Raises nothing."""
    inlined = query
    if not isinstance(inlined, exp.Union) or not inlined.args.get("distinct") or _modified(inlined):
        return None
    if any(inlined.args.get(m) is not None for m in _MODIFIERS):
        return None
    branches = union_branches(inlined, distinct_ok=True)
    if not branches:
        return None
    first = branches[0]
    if not all(isinstance(item, exp.Alias | exp.Column) and not _star(item) for item in first.expressions):
        return None
    union: exp.Query = branches[0].copy()
    for branch in branches[1:]:
        union = exp.union(union, branch.copy(), distinct=False)
    names = [exp.column(exp.to_identifier(item.alias_or_name)) for item in first.expressions]
    derived = exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier(UNION_ALIAS)))
    return exp.select(*names).distinct().from_(derived)


def _star(item: exp.Expr) -> bool:
    return isinstance(item, exp.Column) and isinstance(item.this, exp.Star)


def union_branches(query: exp.Query, distinct_ok: bool = False) -> list[exp.Select]:
    """The SELECT branches of a ``UNION ALL`` (of ``UNION`` too when ``distinct_ok``),
    parenthesized branches and nested unions flattened; empty when a set operation is
    another (INTERSECT, EXCEPT, or UNION when not ``distinct_ok``) or has ORDER BY / LIMIT
    below the top. Raises nothing."""
    if isinstance(query, exp.Select):
        return [query]
    if isinstance(query, exp.Subquery):
        inner = query.this
        if any(query.args.get(m) is not None for m in _MODIFIERS) or not isinstance(inner, exp.Query):
            return []
        return union_branches(inner, distinct_ok) if not _modified(inner) else []
    if not isinstance(query, exp.Union) or (query.args.get("distinct") and not distinct_ok):
        return []
    left = union_branches(query.left, distinct_ok) if not _modified(query.left) else []
    right = union_branches(query.right, distinct_ok) if not _modified(query.right) else []
    return left + right if left and right else []


def _modified(query: exp.Expr) -> bool:
    return any(query.args.get(m) is not None for m in _MODIFIERS) or query.args.get("with_") is not None


def branch_queries(relation: exp.Select) -> list[str]:
    """The key query ``relation`` once per branch of its first ``UNION ALL`` derived table
    (the branch alone in its place, Spark SQL); empty when it reads none. The delta of the
    relation is the union of these queries' deltas (it is linear in the union), and a
    branch not reading a changed table adds nothing, where the whole union would add every
    row of its other branches."""
    found = next((s for s in relation.find_all(exp.Subquery) if isinstance(s.this, exp.Union)), None)
    if found is None:
        return []
    out = []
    for branch in union_branches(found.this):
        copy = relation.copy()
        target = next(s for s in copy.find_all(exp.Subquery) if isinstance(s.this, exp.Union))
        target.set("this", branch.copy())
        out.append(copy.sql(DIALECT))
    return out
