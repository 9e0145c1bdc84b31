"""Affected-key recomputation: incremental refresh of a keyed query whose top operator the
delta rules do not maintain (DESIGN.md, "Incremental refresh").

A ``GROUP BY`` query (or a ``SELECT DISTINCT``) whose aggregate layer is not linear —
``HAVING``, DISTINCT aggregates, expressions over aggregates, aggregate functions other than
SUM/COUNT/AVG/MIN/MAX — is still maintained when the relation it groups is linear: filters,
projections, inner joins, and derived tables and CTEs that are themselves such (a ``UNION
ALL`` of such branches too: a ``UNION`` is the DISTINCT of one, :mod:`sparkmv.analysis.unions`); outer joins
of those (:mod:`sparkmv.analysis.outer`: more key queries). A query whose window functions
share one ``PARTITION BY`` is maintained the same way, its partitions being the groups
(:mod:`sparkmv.analysis.windows`). A group's
output can change only if a base row reaching it was inserted or retracted, so the group keys
of that relation's delta (inserted and retracted rows alike, signs ignored) are a superset of
the groups whose output changed. Those groups are recomputed from the new input (the query
filtered to their keys) and replace the MV's rows with the same keys; every other row stays.
DBSP (Budiu et al., VLDB 2023) maintains any aggregate so, from the groups of the input's
delta; Snowflake dynamic tables and Databricks recompute touched groups the same way.

The MV's visible rows are the only state (no hidden columns): the group keys must be output
columns, so the MV's rows are matched to the touched keys by them (NULL-safe).

>>> from sparkmv.analysis.query import parse_query
>>> plan = keyed_plan(parse_query("SELECT k, count(DISTINCT x) AS n FROM f WHERE y > 0 GROUP BY k HAVING n > 1"))
>>> plan.keys, plan.key_sql
(('k',), 'SELECT k AS k FROM f WHERE y > 0')
>>> keyed_plan(parse_query("WITH s AS (SELECT a, b FROM t) SELECT DISTINCT a FROM s")).key_sql
'SELECT a AS a FROM (SELECT a, b FROM t) AS s'
>>> keyed_plan(parse_query("SELECT f.k, max(g.x) FROM f LEFT JOIN g ON f.k = g.k GROUP BY f.k")).outer_terms[1]
('SELECT f.k AS k FROM f JOIN g ON f.k = g.k', (False, True))
>>> keyed_plan(parse_query("SELECT k, max(x) FROM f LEFT JOIN g ON f.k = g.k GROUP BY k"))
'k is not incrementally maintainable: a column beside an outer join must be qualified by its table'
>>> keyed_plan(parse_query("SELECT k, v, sum(v) OVER (PARTITION BY k) AS total FROM t WHERE v > 0")).key_sql
'SELECT k AS k FROM t WHERE v > 0'
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from sparkmv.analysis.constructs import (
    WHY_WINDOW,
    _same,
    group_keys,
    grouping_sets,
    inner_join_sources,
    is_aggregate,
    modifier_problem,
    node_problem,
    not_maintainable,
    output_name,
    source_problem,
    unparen,
)
from sparkmv.analysis.outer import has_outer_join, is_outer, join_sources, outer_terms
from sparkmv.analysis.query import DIALECT
from sparkmv.analysis.subqueries import (
    conjunct_of,
    is_subquery_predicate,
    predicates,
    subquery_body,
    subquery_problem,
    subquery_terms,
    without_subqueries,
)
from sparkmv.analysis.unions import branch_queries, union_branches
from sparkmv.analysis.windows import key_names as window_key_names
from sparkmv.analysis.windows import outer_problem, partition_columns, windowed_problem, windowed_select

TECHNIQUE = "affected-key recomputation"
HIDDEN_KEY = "__smv_key_"
"""Prefix of the hidden key columns: GROUP BY expressions not in the select list, and the
constant key of a global aggregate's one row (``__smv_key_0``)."""


@dataclass(frozen=True)
class KeyedPlan:
    """How affected-key recomputation maintains one defining query.

    Attributes:
        keys: the output column names (lower case) of the group keys, in select-list order.
        names: every output column name (lower case), in select-list order.
        key_sql: Spark SQL of the grouped relation projected to the group keys, named as the
            output columns (``SELECT <key> AS <name>, ... FROM ... WHERE ...``; CTEs inlined
            as derived tables; conjuncts holding a subquery replaced by TRUE): bound to a
            base table's delta, it yields the touched keys.
        subquery_terms: per subquery predicate, the key query touched through it and which
            of its table references are the subquery's
            (:func:`~sparkmv.analysis.subqueries.subquery_terms`).
        outer_terms: when the relation has outer joins, the key queries replacing
            ``key_sql`` under the delta rule, each with the references it is bound to the
            delta at (:func:`~sparkmv.analysis.outer.outer_terms`); empty otherwise.
        branch_terms: when the relation reads a ``UNION ALL`` derived table (no outer
            join), the key queries replacing ``key_sql`` under the delta rule: ``key_sql``
            with that union replaced by each of its branches in turn
            (:func:`~sparkmv.analysis.unions.branch_queries`); empty otherwise.
        augmented_sql: when some keys are hidden (:data:`HIDDEN_KEY` columns: GROUP BY
            expressions not in the select list, or a global aggregate's constant key), the
            query with them appended to its select list: the rows the MV's table stores.
            ``keys`` and ``names`` then end with them. Empty otherwise.
    """

    keys: tuple[str, ...]
    names: tuple[str, ...]
    key_sql: str
    subquery_terms: tuple[tuple[str, tuple[bool, ...]], ...] = ()
    outer_terms: tuple[tuple[str, tuple[bool, ...]], ...] = ()
    branch_terms: tuple[str, ...] = ()
    augmented_sql: str = ""


def is_keyed_shape(query: exp.Query) -> bool:
    """True for a SELECT (after its CTEs) with ``GROUP BY`` or ``DISTINCT``, or a projection
    with a subquery predicate (every output column is then a key, TPC-H Q2), or over an outer
    join, or with window functions (in the query or the derived table it reads, CTEs
    inlined): the queries affected-key recomputation is for, whose refusal reason is its own."""
    select = query.this if isinstance(query, exp.Subquery) else query
    if isinstance(select, exp.Intersect | exp.Except):
        return True
    inlined = inline_ctes(select) if isinstance(select, exp.Select) and select.args.get("with_") else select
    return isinstance(select, exp.Select) and (
        select.args.get("group") is not None
        or select.args.get("distinct") is not None
        or (not any(_has_aggregate(e) for e in select.expressions) and bool(predicates(select)))
        or (isinstance(inlined, exp.Select) and windowed_select(inlined) is not None)
        or has_outer_join(select)
    )


def keyed_plan(query: exp.Query, inner: bool = False) -> KeyedPlan | str:
    """The affected-key recomputation of ``query`` (parsed, tables unbound), or the reason
    it cannot be maintained so (``"<construct> is not incrementally maintainable: <why>"``).

    ``inner``: ``query`` is an inner stage (:mod:`sparkmv.analysis.stages`); a global
    aggregate is then one too, its one row keyed by a constant hidden key and recomputed
    whenever its relation changes, so the query above it is still maintained. At the top it
    is refused: recomputing its one row is a full refresh.
    """
    inlined = inline_ctes(query)
    if isinstance(inlined, str):
        return inlined
    select = inlined
    if isinstance(select, exp.Intersect | exp.Except):
        return _set_operation_plan(select)
    if isinstance(select, exp.Select) and windowed_select(select) is not None:
        return _window_plan(select, inner)
    is_global = inner and isinstance(select, exp.Select) and _is_global_aggregate(select)
    if not isinstance(select, exp.Select) or not (is_keyed_shape(select) or is_global):
        return not_maintainable(select, "affected-key recomputation needs GROUP BY or DISTINCT")
    problem = _top_problem(select)
    if problem:
        return problem
    items = [unparen(item.unalias()) for item in select.expressions]
    names = tuple(output_name(item) for item in select.expressions)
    hidden: list[exp.Expr] = []
    if select.args.get("group") is not None:
        positions, _ = group_keys(select, items)
        hidden = _hidden_keys(select, items)
    elif is_global:
        positions, hidden = set(), [exp.Literal.number(0)]  # a global aggregate: its one row
    else:  # SELECT DISTINCT or a projection: every column is a key
        positions = set(range(len(items)))
        aggregate = next((item for item in items if _has_aggregate(item)), None)
        if aggregate is not None:
            return not_maintainable(aggregate, "an aggregate without GROUP BY is not a keyed query")
    loose = next((items[i] for i in range(len(items)) if i not in positions and _loose(items[i], select)), None)
    if loose is not None:
        return not_maintainable(loose, "a select item of an aggregate query must be a GROUP BY key")
    if len(set(names)) < len(names):
        return not_maintainable(select, "output column names must be distinct")
    problem = _star_problem(select) or _relation_problem(select, outer_allowed=True)
    if problem:
        return problem
    hidden_names = tuple(f"{HIDDEN_KEY}{i}" for i in range(len(hidden)))
    keys = tuple(names[i] for i in sorted(positions)) + hidden_names
    relation = select.copy()
    having = relation.args.get("having")
    for arg in ("group", "having", "distinct", "qualify"):
        relation.set(arg, None)
    for predicate in predicates(having) if having is not None else []:  # a HAVING subquery touches via WHERE
        conjunct = conjunct_of(predicate)
        if conjunct is not None:
            relation.where(conjunct.copy(), copy=False, append=True)
    key_items = [(items[i], names[i]) for i in sorted(positions)] + list(zip(hidden, hidden_names, strict=True))
    relation.set("expressions", [exp.alias_(item.copy(), name) for item, name in key_items])
    return _with_hidden(_finish(keys, names, relation), select, hidden)


def _is_global_aggregate(select: exp.Select) -> bool:
    """A SELECT that aggregates without GROUP BY or DISTINCT: one row."""
    plain = select.args.get("group") is None and select.args.get("distinct") is None
    return plain and any(_has_aggregate(item) for item in select.expressions)


def _loose(item: exp.Expr, select: exp.Select) -> bool:
    """True for a select item that is neither an aggregate nor an expression of GROUP BY
    keys (a column outside both: Spark refuses the query)."""
    if _has_aggregate(item) or item.find(exp.Column) is None:
        return False
    group = select.args.get("group")
    keys = [] if group is None or group.args.get("all") else list(group.expressions)
    copy = item.copy()
    for node in list(copy.dfs()):
        if node is not copy and any(_same(unparen(node), unparen(k)) for k in keys):
            node.replace(exp.Literal.number(0))
    return not any(_same(unparen(copy), unparen(k)) for k in keys) and copy.find(exp.Column) is not None


def _hidden_keys(select: exp.Select, items: list[exp.Expr]) -> list[exp.Expr]:
    """The GROUP BY expressions not in the select list (TPC-DS q46's ``ss_addr_sk``, q85's
    ``r_reason_desc`` shown as ``substring(r_reason_desc, 1, 20)``): each is kept as a hidden
    key column of the MV, so its rows are matched to the touched groups; a select item that
    is not a key is then a value of its group (an expression of the keys, as Spark demands)."""
    group = select.args["group"]
    if group.args.get("all"):
        return []
    aliases = {item.alias.lower() for item in select.expressions if isinstance(item, exp.Alias)}
    out = []
    for key in group.expressions:
        if isinstance(key, exp.Literal) and key.is_int:
            continue
        if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
            continue
        if not any(_same(item, key) for item in items):
            out.append(unparen(key).copy())
    return out


def _finish(keys: tuple[str, ...], names: tuple[str, ...], relation: exp.Select) -> KeyedPlan | str:
    """The plan of a keyed relation (its select list the keys, named as output columns):
    its key query, subquery terms and outer-join terms."""
    terms = tuple(subquery_terms(relation))
    key_relation = without_subqueries(relation)
    assert isinstance(key_relation, exp.Select)
    outer = outer_terms(key_relation)
    if isinstance(outer, str):
        return outer
    branches = () if outer else tuple(branch_queries(key_relation))
    return KeyedPlan(keys, names, key_relation.sql(DIALECT), terms, tuple(outer), branches)


def _star_problem(select: exp.Select) -> str | None:
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            return not_maintainable(item, "a star select item is not maintained by affected-key recomputation")
    return None


def _window_plan(select: exp.Select, inner: bool = False) -> KeyedPlan | str:
    """The affected-key recomputation of a query with window functions
    (:mod:`sparkmv.analysis.windows`): the partitions of the delta are recomputed. As an
    inner stage (``inner``), windows without an output partition column (a ranking over the
    whole grouped result, TPC-DS q44, q49) are recomputed whole under a constant hidden key
    whenever their relation changes: the stages above and below are still maintained."""
    windowed = windowed_select(select)
    assert windowed is not None
    problem = windowed_problem(windowed) or (outer_problem(select) if windowed is not select else None)
    if problem:
        return problem
    names = tuple(output_name(item) for item in select.expressions)
    if len(set(names)) < len(names):
        return not_maintainable(select, "output column names must be distinct")
    partition = partition_columns(windowed)
    found = window_key_names(windowed, select, partition) if not isinstance(partition, str) else partition
    whole = isinstance(found, str) and inner
    if isinstance(found, str) and not whole:
        return found
    problem = _star_problem(windowed) or _star_problem(select) or _relation_problem(windowed, outer_allowed=True)
    if problem:
        return problem
    relation = windowed.copy()
    for arg in ("qualify", "group", "having"):  # a touched partition's groups are recomputed whole
        relation.set(arg, None)
    if whole:
        relation.set("expressions", [exp.alias_(exp.Literal.number(0), f"{HIDDEN_KEY}0")])
        plan = _finish((f"{HIDDEN_KEY}0",), names, relation)
        return _with_hidden(plan, select, [exp.Literal.number(0)])
    assert not isinstance(found, str)
    key_names = [name for _, name in found]
    relation.set("expressions", [exp.alias_(p.copy(), n) for p, n in found])
    return _finish(tuple(n for n in names if n in key_names), names, relation)


def _with_hidden(plan: KeyedPlan | str, select: exp.Select, hidden: list[exp.Expr]) -> KeyedPlan | str:
    """``plan`` with the hidden key columns ``hidden`` appended to ``select``'s list: the
    query whose rows the table stores (:attr:`KeyedPlan.augmented_sql`)."""
    if isinstance(plan, str) or not hidden:
        return plan
    hidden_names = tuple(f"{HIDDEN_KEY}{i}" for i in range(len(hidden)))
    augmented = select.copy()
    appended = [exp.alias_(h.copy(), n) for h, n in zip(hidden, hidden_names, strict=True)]
    augmented.set("expressions", [*augmented.expressions, *appended])
    return replace(plan, names=plan.names + hidden_names, augmented_sql=augmented.sql(DIALECT))


def _set_operation_plan(query: exp.SetOperation) -> KeyedPlan | str:
    """INTERSECT / EXCEPT (ALL or DISTINCT, nested set operations too) by affected-key
    recomputation, every output column a key: how often a row is in the result depends only
    on how often it is in each branch, so the touched keys are the rows of each branch's
    delta (the key query is the UNION ALL of the branches, each projected to the output
    columns) and the result filtered to them gives their new rows (DBSP's rule for
    ``distinct`` over the sum of its inputs, Budiu et al., VLDB 2023).

    >>> from sparkmv.analysis.query import parse_query
    >>> plan = keyed_plan(parse_query("SELECT DISTINCT a FROM t WHERE x > 0 INTERSECT SELECT b FROM u"))
    >>> plan.keys, plan.key_sql
    (('a',), 'SELECT a FROM (SELECT a AS a FROM t WHERE x > 0 UNION ALL SELECT b AS a FROM u) AS __smv_set')
    """
    branches = _set_leaves(query)
    if not branches:
        return not_maintainable(query, "a set operation with ORDER BY or LIMIT inside is not maintained")
    names = tuple(output_name(item) for item in branches[0].expressions)
    if len(set(names)) < len(names):
        return not_maintainable(query, "output column names must be distinct")
    parts = []
    for branch in branches:
        problem = _star_problem(branch) or _branch_problem(branch) or _relation_problem(branch)
        if problem:
            return problem
        part = branch.copy()
        part.set("distinct", None)
        part.set(
            "expressions", [exp.alias_(i.unalias().copy(), n) for i, n in zip(branch.expressions, names, strict=True)]
        )
        parts.append(part)
    union: exp.Query = parts[0]
    for part in parts[1:]:
        union = exp.union(union, part, distinct=False)
    relation = exp.select(*[exp.column(n) for n in names]).from_(
        exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier(SET_ALIAS)))
    )
    return _finish(names, names, relation)


SET_ALIAS = "__smv_set"


def _set_leaves(query: exp.Expr) -> list[exp.Select]:
    """The SELECT branches of a tree of set operations (parentheses dropped); empty when one
    has ORDER BY / LIMIT below the top, a WITH, or is not a SELECT."""
    if isinstance(query, exp.Subquery):
        return [] if modifier_problem(query) else _set_leaves(query.this)
    if isinstance(query, exp.Select):
        return [query] if not query.args.get("with_") else []
    if isinstance(query, exp.SetOperation):
        if any(query.args.get(m) is not None for m in ("order", "limit", "offset")):
            return []
        left, right = _set_leaves(query.this), _set_leaves(query.expression)
        return left + right if left and right else []
    return []


def _branch_problem(branch: exp.Select) -> str | None:
    """A branch of INTERSECT / EXCEPT: a projection (DISTINCT allowed) of a linear relation."""
    problem = modifier_problem(branch)
    for arg in ("group", "having", "qualify"):
        if problem is None and branch.args.get(arg) is not None:
            problem = not_maintainable(branch.args[arg], "a grouped branch of INTERSECT or EXCEPT is not maintained")
    return problem or _expressions_problem(list(branch.expressions), aggregates_allowed=False)


def _has_aggregate(expr: exp.Expr) -> bool:
    return any(is_aggregate(node) for node in expr.dfs())


def inline_ctes(query: exp.Query) -> exp.Query | str:
    """``query`` (a copy) with each CTE replaced by a derived table of its body where it is
    read, or the reason it cannot be (a recursive CTE, a CTE of a set operation's branch).

    >>> from sparkmv.analysis.query import parse_query
    >>> inline_ctes(parse_query("WITH a AS (SELECT x FROM t), b AS (SELECT x FROM a) SELECT x FROM b")).sql()
    'SELECT x FROM (SELECT x FROM (SELECT x FROM t) AS a) AS b'
    """
    query = query.copy()
    with_ = query.args.get("with_")
    if with_ is None:
        return query
    if with_.args.get("recursive"):
        return not_maintainable(with_, "recursive CTEs are not maintained")
    query.set("with_", None)
    ctes = list(with_.expressions)
    for i, cte in enumerate(ctes):
        name = cte.alias.lower()
        for later in [*ctes[i + 1 :], query]:
            body = later.this if isinstance(later, exp.CTE) else later
            for table in list(body.find_all(exp.Table)):
                if table.db or table.catalog or table.name.lower() != name:
                    continue
                alias = cte.args["alias"].copy()
                alias.set("this", exp.to_identifier(table.alias or cte.alias))
                table.replace(exp.Subquery(this=cte.this.copy(), alias=alias))
    return query


def _top_problem(select: exp.Select) -> str | None:
    """The problems of the keyed SELECT's own clauses and expressions: ORDER BY / LIMIT,
    windows, grouping sets, subqueries and non-deterministic functions in the select list
    or HAVING (any aggregate function is fine: each touched group is recomputed whole)."""
    problem = modifier_problem(select)
    if problem:
        return problem
    if select.args.get("qualify") is not None:
        return not_maintainable(select.args["qualify"], WHY_WINDOW)
    distinct = select.args.get("distinct")
    if distinct is not None and distinct.args.get("on") is not None:
        return not_maintainable(distinct, "DISTINCT ON keeps one row per key in an order")
    group = select.args.get("group")
    if grouping_sets(group):
        return not_maintainable(group, "grouping sets, ROLLUP and CUBE are not maintained")
    roots = [*select.expressions, group]
    return _expressions_problem(roots, aggregates_allowed=True) or _expressions_problem(
        [select.args.get("having")], aggregates_allowed=True, subqueries_allowed=True
    )


def _expressions_problem(
    roots: list[exp.Expr | None], aggregates_allowed: bool, subqueries_allowed: bool = False
) -> str | None:
    """The first problem among the expressions under ``roots``; subquery predicates in a
    WHERE or HAVING conjunct are checked by
    :func:`~sparkmv.analysis.subqueries.subquery_problem` when ``subqueries_allowed``."""
    for root in roots:
        for node in _outside_subqueries(root) if root is not None else ():
            if subqueries_allowed and is_subquery_predicate(node):
                problem = subquery_problem(node) or _subquery_body_problem(node)
                if problem:
                    return problem
                continue
            if aggregates_allowed and (is_aggregate(node) or isinstance(node, exp.Filter)):
                continue
            if not aggregates_allowed and is_aggregate(node) and not node.find_ancestor(exp.Window):
                return not_maintainable(node, "an aggregate inside the grouped relation is not maintained")
            problem = node_problem(node)
            if problem:
                return problem
    return None


def _outside_subqueries(root: exp.Expr) -> list[exp.Expr]:
    """The nodes under ``root`` (pre-order), a subquery predicate's own node but not its
    inside."""
    out: list[exp.Expr] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        if node is root or not is_subquery_predicate(node):
            stack.extend(reversed(list(node.iter_expressions())))
    return out


def _subquery_body_problem(predicate: exp.Expr) -> str | None:
    """The subquery's relation must be linear (its delta rule gives the touched rows): inner
    joins of base tables and linear derived tables; its select list may aggregate."""
    body = subquery_body(predicate)
    assert isinstance(body, exp.Select)
    problem = _expressions_problem([*body.expressions, body.args.get("having")], aggregates_allowed=True)
    return problem or _relation_problem(body, subqueries_allowed=False)


def _relation_problem(select: exp.Select, subqueries_allowed: bool = True, outer_allowed: bool = False) -> str | None:
    """The first problem of the relation ``select`` groups (or of a derived table in it):
    only base tables and linear derived tables, joined by inner joins, with deterministic
    filters. A base table may be read more than once (each reference is its own input of
    the delta rule); the keyed SELECT's own joins may be outer when ``outer_allowed``
    (:mod:`sparkmv.analysis.outer`)."""
    outer = next((j for j in select.args.get("joins") or [] if is_outer(j)), None)
    if outer is not None and not outer_allowed:
        bare = outer.copy()
        bare.set("on", None)
        bare.set("using", None)
        why = "an outer join is maintained in the query's own FROM only, not inside a derived table or subquery"
        return not_maintainable(bare.sql(dialect=DIALECT, normalize_functions="lower").strip(), why)
    sources, problem = join_sources(select) if outer_allowed else inner_join_sources(select)
    if problem:
        return problem
    conditions = [join.args.get("on") for join in select.args.get("joins") or []]
    problem = _expressions_problem(conditions, aggregates_allowed=False) or _expressions_problem(
        [select.args.get("where")], aggregates_allowed=False, subqueries_allowed=subqueries_allowed
    )
    for source in sources:
        problem = problem or _source_problem(source)
    return problem


def _source_problem(source: exp.Expr) -> str | None:
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        return _derived_problem(source.this)
    branches = union_branches(source.this) if isinstance(source, exp.Subquery) else []
    if branches:  # a UNION ALL of linear branches is linear
        return next((p for p in map(_derived_problem, branches) if p), None)
    problem = source_problem(source)
    if problem or not isinstance(source, exp.Table):
        return problem or not_maintainable(source, "only base tables are maintained")
    return None


def _derived_problem(select: exp.Select) -> str | None:
    """A derived table inside the grouped relation must be linear: a projection and filter
    of inner joins, no grouping, DISTINCT, LIMIT or window."""
    problem = modifier_problem(select)
    if problem:
        return problem
    for arg, why in (
        ("with_", "a WITH inside a derived table is not maintained"),
        ("distinct", "DISTINCT inside the grouped relation is not maintained"),
        ("group", "GROUP BY inside the grouped relation is not maintained"),
        ("having", "HAVING inside the grouped relation is not maintained"),
        ("qualify", WHY_WINDOW),
    ):
        if select.args.get(arg) is not None:
            return not_maintainable(select.args[arg], why)
    problem = _expressions_problem(list(select.expressions), aggregates_allowed=False)
    return problem or _relation_problem(select)
