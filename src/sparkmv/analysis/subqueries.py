"""Subquery predicates under affected-key recomputation (:mod:`sparkmv.analysis.keyed`).

A conjunct of a ``WHERE`` (or of the keyed query's ``HAVING``) may hold ``EXISTS``,
``NOT EXISTS``, ``IN (SELECT ...)``, ``NOT IN (SELECT ...)`` or a scalar subquery,
correlated or not (TPC-H Q2, Q4, Q11, Q16, Q18, Q21, Q22). Such a predicate is not linear,
but whether it holds for an outer row can change only when the rows its subquery reads for
that row change, so a superset of the outer rows it touches is:

- ``EXISTS`` / ``NOT EXISTS`` / a scalar subquery ``S``: the outer rows for which
  ``EXISTS (SELECT 1 FROM <S's FROM> WHERE <S's WHERE>)`` holds when one table reference of
  ``S`` is read as its delta (the correlation stays in ``S``'s WHERE, resolved by Spark as in
  the query; S's aggregates, GROUP BY and HAVING are dropped: the rows they read are the same);
- ``x [NOT] IN (SELECT y FROM ...)`` (no aggregate, or grouped by ``y`` alone):
  ``coalesce(x IN (SELECT y FROM <delta> WHERE ...), TRUE)``: a match, ``x`` NULL, or a NULL
  ``y`` in the delta (which changes ``NOT IN`` for every row, SQL's NULL semantics); any
  other ``IN`` subquery: the ``EXISTS`` form (every outer row, when its delta is not empty).

In the key query of the rest of the relation (the delta of an outer table), each conjunct
holding a subquery is replaced by TRUE: dropping a conjunct keeps a superset. Only whole
conjuncts are replaced (a subquery under OR or NOT is its whole conjunct's).

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT a FROM t WHERE t.b > 0 AND EXISTS (SELECT * FROM u WHERE u.k = t.k AND u.c = 1)")
>>> without_subqueries(q).sql()
'SELECT a FROM t WHERE t.b > 0 AND TRUE'
>>> [(sql, mask) for sql, mask in subquery_terms(q)]
[('SELECT a FROM t WHERE t.b > 0 AND EXISTS(SELECT 1 FROM u WHERE u.k = t.k AND u.c = 1)', (False, True))]
>>> subquery_terms(parse_query("SELECT a FROM t WHERE x NOT IN (SELECT y FROM u)"))[0][0]
'SELECT a FROM t WHERE COALESCE(x IN (SELECT y FROM u), TRUE)'
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, is_inside, modifier_problem, not_maintainable
from sparkmv.analysis.query import DIALECT


def is_subquery_predicate(node: exp.Expr) -> bool:
    """True for ``EXISTS``, ``IN (SELECT ...)`` or a scalar subquery (not a derived table of
    a FROM)."""
    if isinstance(node, exp.Exists):
        return True
    if isinstance(node, exp.In):
        return node.args.get("query") is not None
    return isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.Join)


def predicates(tree: exp.Expr) -> list[exp.Expr]:
    """The subquery predicates of ``tree`` outside other subqueries, in a fixed order."""
    found: list[exp.Expr] = []
    stack: list[exp.Expr] = [tree]
    while stack:
        node = stack.pop()
        if node is not tree and is_subquery_predicate(node):
            found.append(node)
            continue
        stack.extend(reversed(list(node.iter_expressions())))
    return found


def conjunct_of(node: exp.Expr) -> exp.Expr | None:
    """The conjunct of a WHERE or HAVING holding ``node`` (None when ``node`` is not in
    one: a select item, a join condition)."""
    path = [node]
    while path[-1].parent is not None and not isinstance(path[-1].parent, exp.Where | exp.Having):
        path.append(path[-1].parent)
    if path[-1].parent is None:
        return None
    for below in reversed(path):  # from the WHERE down: descend through AND and parentheses
        if not isinstance(below, exp.And | exp.Paren):
            return below
    return node


def subquery_problem(predicate: exp.Expr) -> str | None:
    """Why a subquery predicate cannot be maintained, or None: it must stand in a WHERE or
    HAVING conjunct, read a plain SELECT (no set operation, LIMIT or ORDER BY), and hold no
    subquery itself."""
    if conjunct_of(predicate) is None:
        return not_maintainable(predicate, "a subquery outside WHERE and HAVING is not maintained")
    body = subquery_body(predicate)
    if not isinstance(body, exp.Select):
        return not_maintainable(predicate, "only a subquery of one SELECT is maintained")
    problem = modifier_problem(body)
    if problem:
        return problem
    nested = next(iter(predicates(body)), None)
    if nested is not None:
        return not_maintainable(nested, "a subquery inside a subquery is not maintained")
    return None


def subquery_body(predicate: exp.Expr) -> exp.Expr:
    """The query a subquery predicate reads (its SELECT, unparenthesized)."""
    inner: exp.Expr = predicate.args["query"] if isinstance(predicate, exp.In) else predicate.this
    return inner.this if isinstance(inner, exp.Subquery) else inner


def without_subqueries(tree: exp.Expr) -> exp.Expr:
    """A copy of ``tree`` with each conjunct holding a subquery predicate replaced by TRUE."""
    copy = tree.copy()
    for conjunct in _conjuncts(copy):
        conjunct.replace(exp.true())
    return copy


def _conjuncts(tree: exp.Expr) -> Iterator[exp.Expr]:
    seen: list[exp.Expr] = []
    for predicate in predicates(tree):
        conjunct = conjunct_of(predicate)
        if conjunct is not None and not any(conjunct is s for s in seen):
            seen.append(conjunct)
            yield conjunct


def subquery_terms(tree: exp.Expr) -> list[tuple[str, tuple[bool, ...]]]:
    """One key query per subquery predicate of ``tree``: its conjunct replaced by the
    predicate's touch condition (module docstring), every other conjunct holding a subquery
    by TRUE; with, per table reference of that SQL (in
    :func:`~sparkmv.analysis.query.table_occurrences` order), whether it is read inside the
    touch condition (the references bound to the delta rule's roles)."""
    terms = []
    for k in range(len(predicates(tree))):
        copy = tree.copy()
        predicate = predicates(copy)[k]
        condition = touch_condition(predicate)
        own = conjunct_of(predicate)
        for conjunct in list(_conjuncts(copy)):
            conjunct.replace(condition if conjunct is own else exp.true())
        sql = copy.sql(DIALECT)
        mask = tuple(is_inside(table, condition) for table in copy.find_all(exp.Table) if table.name)
        terms.append((sql, mask))
    return terms


def in_keyed(column: exp.Expr, grouped: exp.Expr | None) -> bool:
    """Whether an ``IN`` subquery's membership of a value depends only on its rows holding
    that value: no aggregate, or grouped by the selected column alone."""
    if any(is_aggregate(n) for n in column.dfs()):
        return False
    return grouped is None or [g.sql(DIALECT) for g in grouped.expressions] == [column.sql(DIALECT)]


def touch_condition(predicate: exp.Expr) -> exp.Expr:
    """The condition an outer row meets when the rows ``predicate``'s subquery reads for it
    may have changed (module docstring), over the subquery's own tables."""
    body = subquery_body(predicate)
    assert isinstance(body, exp.Select)
    rows = body.copy()
    for arg in ("group", "having", "distinct", "qualify"):
        rows.set(arg, None)
    grouped = body.args.get("group")
    column = body.expressions[0].unalias() if len(body.expressions) == 1 else None
    if isinstance(predicate, exp.In) and column is not None and in_keyed(column, grouped):
        rows.set("expressions", [column.copy()])
        found = exp.In(this=predicate.this.copy(), query=exp.Subquery(this=rows))
        return exp.func("coalesce", found, exp.true())
    rows.set("expressions", [exp.Literal.number(1)])
    return exp.Exists(this=rows)
