"""Can a materialized view be maintained by incremental refresh (IVM)?

A defining query is maintainable when it is a projection and filter over base tables joined
by inner joins (``UNION ALL`` of such branches allowed), or the same with ``GROUP BY`` where
every select item is a group key or one plain ``SUM``/``COUNT``/``AVG``/``MIN``/``MAX``
call. Anything else gets the exact reason, ``"<construct> is not incrementally
maintainable: <why>"``, naming the first offending construct found top-down (set operation,
WITH, LIMIT, ORDER BY, DISTINCT, ..., then FROM and joins, then expressions).

An aggregate materialized view stores hidden state columns (prefix ``__smv_``) beside its
output columns: the group's row count, and the non-NULL counts and sums SUM and AVG need to
apply deltas. :attr:`IvmAnalysis.augmented_sql` is the defining query producing them.

User-defined functions are told apart from Spark built-ins by ``spark_functions.txt``
(``SHOW FUNCTIONS`` of Spark 4.1.4; ``spark_aggregates.txt`` holds its ``agg_funcs`` group).

>>> from sparkmv.analysis.query import parse_query
>>> a = analyze_incremental(parse_query("SELECT k, sum(x) AS s FROM f GROUP BY k"))
>>> a.maintainable, a.state_columns
(True, ('__smv_count', '__smv_nn_1'))
>>> a.augmented_sql
'SELECT k, SUM(x) AS s, COUNT(*) AS __smv_count, COUNT(x) AS __smv_nn_1 FROM f GROUP BY k'
>>> analyze_incremental(parse_query("SELECT count(DISTINCT p) FROM f")).stages[0].analysis.technique
'affected-key recomputation'
>>> analyze_incremental(parse_query("SELECT count(DISTINCT p), count(DISTINCT q) FROM f")).reason
'count(DISTINCT p) is not incrementally maintainable: a DISTINCT aggregate needs every earlier value'
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Iterable, Iterator, Mapping

from sqlglot import exp

from sparkmv.analysis.constructs import (
    WHY_AGG_EXPR,
    WHY_WINDOW,
    aggregate_role,
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
from sparkmv.analysis.correlated import correlated_analysis
from sparkmv.analysis.distinct_aggregates import split_distinct_aggregates
from sparkmv.analysis.formulas import formula_of, formula_state_calls
from sparkmv.analysis.grouping_sets import expand_grouping_sets, has_grouping_sets
from sparkmv.analysis.ivm import IvmAnalysis, OutputColumn
from sparkmv.analysis.keyed import HIDDEN_KEY, TECHNIQUE, inline_ctes, is_keyed_shape, keyed_plan
from sparkmv.analysis.null_rejection import simplify_outer_joins
from sparkmv.analysis.query import DIALECT, parse_query, referenced_tables, table_name, table_occurrences
from sparkmv.analysis.relation_stage import split_outer_relation
from sparkmv.analysis.unions import distinct_union
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName, is_hidden_column

STATE_PREFIX = "__smv_"
ROW_COUNT = "__smv_count"


def analyze_incremental(query: exp.Query, columns: Mapping[str, Collection[str]] | None = None) -> IvmAnalysis:
    """Decide whether ``query`` (a parsed defining query, tables unbound) is maintainable
    by incremental refresh; for aggregates, build the query with its state columns. A
    query not maintained whole is split into stages (:mod:`sparkmv.analysis.stages`).

    ``columns`` (qualified base table -> its column names), when given, lets a query that is
    refused as written, or maintained only by affected-key recomputation, be analyzed again
    resolved (stars expanded, unqualified columns qualified by their table:
    :func:`~sparkmv.analysis.qualify.qualify_unqualified`; an outer join must know each
    column's side, a derived table under a join is merged only when qualified); the analysis
    as written is kept when that does not help.

    Raises:
        AnalysisError: for malformed table names (as :func:`~sparkmv.analysis.query.table_name`).
    """
    if has_grouping_sets(query):  # the UNION ALL of one GROUP BY per set
        expanded = _resolved_analysis(expand_grouping_sets(query), columns)
        return expanded if expanded.reason is None else _resolved_analysis(query, columns)
    analysis = _resolved_analysis(query, columns)
    if analysis.reason is None:
        return analysis
    # The aggregate over a stage: grouped by its DISTINCT argument, or its outer join's rows.
    for split in (split_distinct_aggregates, split_outer_relation):
        rewritten = split(query)
        again = _resolved_analysis(rewritten, columns) if rewritten is not None else analysis
        if again.reason is None:
            return again
    return analysis


def _resolved_analysis(query: exp.Query, columns: Mapping[str, Collection[str]] | None) -> IvmAnalysis:
    """:func:`analyze_incremental` of ``query`` as written, or resolved by ``columns``; outer
    joins a WHERE condition makes inner are analyzed inner (:mod:`sparkmv.analysis.null_rejection`)."""
    analysis = _analyze(simplify_outer_joins(query), columns)
    if not columns:
        return analysis
    from sparkmv.analysis.qualify import qualify_unqualified

    resolved = qualify_unqualified(query, columns)
    qualified = simplify_outer_joins(resolved)
    if qualified is not resolved:  # an outer join made inner once its columns are resolved
        inner = _analyze(qualified)
        if inner.reason is None and inner.keyed is None and inner.correlated is None:
            return inner
    if (analysis.reason is None and analysis.keyed is None) or qualified == query:
        return analysis
    again = _analyze(qualified)
    if analysis.reason is None:  # keyed as written: the delta rules of the resolved form are cheaper
        return again if again.reason is None and again.keyed is None else analysis
    return analysis if again.reason is not None else again


def analyze_for_table(
    query: exp.Query, table_columns: Collection[str], columns: Mapping[str, Collection[str]] | None = None
) -> IvmAnalysis:
    """:func:`analyze_incremental` of the defining query of an MV whose table has
    ``table_columns``: when the delta rules need state columns the table lacks (it was
    built while the query was maintained by affected-key recomputation, before its derived
    tables were merged or a table read twice was kept by the delta rules), the
    affected-key recomputation of the query (qualified by ``columns`` when only that
    form is maintained), which needs none; else the analysis unchanged.

    Raises:
        AnalysisError: for malformed table names (as :func:`analyze_incremental`).
    """
    analysis = analyze_incremental(query, columns)
    names = {c.lower() for c in table_columns}
    if not analysis.state_columns or all(c.lower() in names for c in analysis.state_columns):
        return analysis
    from sparkmv.analysis.qualify import qualify_unqualified

    for form in (query, qualify_unqualified(query, columns) if columns else None):
        keyed = keyed_analysis(form) if form is not None and is_keyed_shape(form) else None
        if keyed is not None and keyed.reason is None:
            return keyed
    return analysis


def _analyze(query: exp.Query, columns: Mapping[str, Collection[str]] | None = None) -> IvmAnalysis:
    whole = _analyze_whole(query)
    if whole.reason is None and whole.keyed is None:
        return whole
    merged = _merged_analysis(query)
    if merged is not None:
        return merged
    from sparkmv.analysis.stages import staged_analysis

    if whole.reason is None:
        # Semi-join stages of distinct keys first: their reads are pruned by the keys' range
        # and the query's own filters (TPC-H Q4 measured no faster through its order key).
        semijoins = _semijoin_staged(query, whole, columns)
        if semijoins is not whole:
            return semijoins
        return correlated_analysis(query, columns, _analyze_whole, _augment) or whole
    correlated = correlated_analysis(query, columns, _analyze_whole, _augment)
    if correlated is not None and correlated.correlated is not None and not correlated.correlated.shared_tables():
        # Before aggregate stages (TPC-H Q13, Q17), which recompute their touched keys over
        # both inputs and join them back: the key's rows are read once per side.
        return correlated
    staged = staged_analysis(query, _whole_or_merged, lambda q: keyed_analysis(q, reserved=False), columns)
    if staged is None or staged.reason is not None:
        return correlated or staged or whole
    return staged


def _semijoin_staged(
    query: exp.Query, whole: IvmAnalysis, columns: Mapping[str, Collection[str]] | None
) -> IvmAnalysis:
    """For ``query`` maintained ``whole`` by affected-key recomputation of its group keys:
    the delta rules over inner stages when its subqueries split into them (an ``EXISTS`` /
    ``IN`` semi-join as an inner join with its stage of distinct keys, TPC-H Q4 and Q18,
    :mod:`sparkmv.analysis.stages`), which recompute only the keys a change touches rather
    than every touched group (Q4's five priorities are all touched by any change); else
    ``whole``. Only with the base tables' ``columns``, which tell a correlation's sides."""
    if not columns:
        return whole
    from sparkmv.analysis.stages import staged_analysis

    staged = staged_analysis(query, _whole_or_merged, lambda q: keyed_analysis(q, reserved=False), columns)
    if staged is None or staged.reason is not None or staged.keyed is not None:
        return whole
    return staged


def _merged_analysis(query: exp.Query) -> IvmAnalysis | None:
    """The delta rules of ``query`` with its select-project-join derived tables merged
    (:mod:`sparkmv.analysis.merge`): ``merged_sql`` the merged query with its state
    columns, ``augmented_sql`` the query as written with the same state columns; None
    when nothing merges or the delta rules do not maintain the merged query."""
    from sparkmv.analysis.merge import merge_derived

    merged = merge_derived(query)
    if merged is None or not isinstance(query, exp.Select):
        return None
    analysis = _analyze_whole(merged)
    if analysis.reason is not None or analysis.keyed is not None:
        return None
    written = _augment(query, analysis.columns) if analysis.aggregate else query.sql(DIALECT)
    return dataclasses.replace(analysis, augmented_sql=written, merged_sql=analysis.augmented_sql)


def _whole_or_merged(query: exp.Query) -> IvmAnalysis:
    """The query above inner stages: as one stage, else with its derived tables merged (a
    projection and filter over a stage, joined: TPC-DS q39's CTE read twice)."""
    whole = _analyze_whole(query)
    if whole.reason is None:
        return whole
    return _merged_analysis(query) or whole


def _analyze_whole(query: exp.Query) -> IvmAnalysis:
    """:func:`analyze_incremental` of ``query`` as one stage."""
    aggregate = isinstance(query, exp.Select) and _is_aggregate_query(query)
    branches, reason = _branches(query)
    for branch in branches:
        reason = reason or _branch_problem(branch, in_union=len(branches) > 1)
    columns: tuple[OutputColumn, ...] = ()
    if reason is None and aggregate:
        columns, reason = _aggregate_columns(branches[0])
    elif reason is None:
        columns = tuple(OutputColumn(output_name(item), "plain") for item in branches[0].expressions)
    reason = reason or _reserved_problem(columns)
    if reason is not None and is_keyed_shape(query):
        return keyed_analysis(query)
    inlined = inline_ctes(query) if reason is not None else None
    distinct = distinct_union(inlined) if isinstance(inlined, exp.Query) else None
    if distinct is not None:  # a UNION: the DISTINCT of its UNION ALL (sparkmv.analysis.unions)
        keyed = keyed_analysis(distinct)
        return keyed if keyed.reason is None else IvmAnalysis(keyed.reason, False, (), (), query.sql(DIALECT))
    if reason is not None:
        return IvmAnalysis(reason, aggregate, (), (), query.sql(DIALECT))
    if not aggregate:
        return IvmAnalysis(None, False, columns, (), query.sql(DIALECT))
    state = (ROW_COUNT, *(name for column in columns for name in column.state))
    return IvmAnalysis(None, True, columns, state, _augment(branches[0], columns))


def keyed_analysis(query: exp.Query, reserved: bool = True) -> IvmAnalysis:
    """The analysis of a GROUP BY / DISTINCT query the delta rules do not maintain: by
    affected-key recomputation (:mod:`sparkmv.analysis.keyed`), or its reason. An inner
    stage (``reserved`` False) may name its columns with the reserved prefix."""
    plan = keyed_plan(query, inner=not reserved)
    if isinstance(plan, str):
        return IvmAnalysis(plan, True, (), (), query.sql(DIALECT))
    hidden = tuple(n for n in plan.names if n.startswith(HIDDEN_KEY))
    visible = tuple(n for n in plan.names if n not in hidden)
    columns = tuple(OutputColumn(n, "group" if n in plan.keys else "value") for n in visible)
    problem = _reserved_problem(columns) if reserved else None
    if problem:
        return IvmAnalysis(problem, True, (), (), query.sql(DIALECT))
    return IvmAnalysis(None, True, columns, hidden, plan.augmented_sql or query.sql(DIALECT), TECHNIQUE, plan)


def without_correlation(analysis: IvmAnalysis) -> IvmAnalysis:
    """``analysis`` of a query maintained through a correlation key
    (:mod:`sparkmv.analysis.correlated`) as the affected-key recomputation of its group keys
    over the same augmented query: its state columns are recomputed with its rows (a
    change of a table the key does not bind)."""
    return keyed_analysis(parse_query(analysis.augmented_sql), reserved=False)


def stored_query(definition: str, columns: Iterable[str]) -> exp.Query:
    """The query whose rows an MV's table with ``columns`` stores: its defining query
    (Spark SQL text), or, when the table has hidden state columns, the query augmented with
    them (:attr:`IvmAnalysis.augmented_sql`). Not to be modified: the augmented query is
    shared (analysed once per definition in a process).

    >>> stored_query("SELECT k, count(*) AS n FROM f GROUP BY k", ["k", "n", "__smv_count"]).sql(DIALECT)
    'SELECT k, COUNT(*) AS n, COUNT(*) AS __smv_count FROM f GROUP BY k'
    """
    if not any(is_hidden_column(c) for c in columns):
        return parse_query(definition)
    return augmented_query(definition)


@functools.lru_cache(maxsize=256)
def augmented_query(definition: str) -> exp.Query:
    """The parsed :attr:`IvmAnalysis.augmented_sql` of ``definition`` (cached, shared).

    A query the delta rules maintain only once its subqueries are split into stages with
    the base tables' columns (:func:`_semijoin_staged`, which the caller may not have) is
    augmented as written: the split changes its FROM and WHERE, never its select list, so
    the state columns are the same."""
    query = parse_query(definition)
    analysis = analyze_incremental(query)
    if not analysis.state_columns and isinstance(query, exp.Select) and _is_aggregate_query(query):
        columns, reason = _aggregate_columns(query)
        if reason is None and _reserved_problem(columns) is None:
            return parse_query(_augment(query, columns))
    return parse_query(analysis.augmented_sql)


def _branches(query: exp.Query) -> tuple[list[exp.Select], str | None]:
    """The SELECTs of ``query`` (several for ``UNION ALL``) and the first problem of its
    set operations: WITH, a set operation other than UNION ALL, ORDER BY / LIMIT on it."""
    if query.args.get("with_") is not None:
        return [], not_maintainable(query.args["with_"], "common table expressions (WITH) are not maintained")
    if isinstance(query, exp.Select):
        return [query], None
    if not isinstance(query, exp.Union | exp.Subquery) or query.args.get("distinct"):
        keyword = type(query).__name__.upper() + ("" if query.args.get("distinct") else " ALL")
        return [], not_maintainable(keyword, "only UNION ALL is maintained")
    modifier = modifier_problem(query)
    if modifier:
        return [], modifier
    if isinstance(query, exp.Subquery):  # a parenthesized branch
        return _branches(query.this)
    left, problem = _branches(query.left)
    if problem:
        return [], problem
    right, problem = _branches(query.right)
    return left + right, problem


def branches_reading(query: exp.Query, table: ObjectName) -> exp.Query | None:
    """The ``UNION ALL`` of the branches of maintainable ``query`` that read ``table`` (None
    when none does): the delta of a ``UNION ALL`` is the union of its branches' deltas, so
    a branch that does not read a changed table contributes nothing to that table's delta.

    >>> from sparkmv.analysis.query import parse_query
    >>> q = parse_query("SELECT a FROM t UNION ALL SELECT a FROM u UNION ALL SELECT a FROM t JOIN u ON t.a = u.a")
    >>> branches_reading(q, ObjectName("default", "u")).sql()
    'SELECT a FROM u UNION ALL SELECT a FROM t JOIN u ON t.a = u.a'
    """
    branches, problem = _branches(query)
    if problem:
        raise AnalysisError(problem)
    kept = [b.copy() for b in branches if table in referenced_tables(b)]
    if not kept:
        return None
    out: exp.Query = kept[0]
    for branch in kept[1:]:
        out = exp.union(out, branch, distinct=False)
    return out


def occurrence_terms(query: exp.Query, table: ObjectName) -> list[tuple[exp.Query, int | None]]:
    """The queries of the delta terms of a change of ``table`` in maintainable ``query``,
    each with the reference of ``table`` read as its delta: ``[(branches_reading, None)]``
    (every reference) when no branch reads ``table`` twice; else each branch reading it,
    once per reference ``r`` (its ``r``-th reference of ``table``, in the order of
    :func:`~sparkmv.analysis.query.table_occurrences`): for references ``T1, T2`` of one
    table, ``Δ(T1 ⋈ T2) = ΔT1 ⋈ T2_old ∪ T1_new ⋈ ΔT2``, the references before ``r`` read
    new and those after it old. Empty when no branch reads ``table``.

    >>> from sparkmv.analysis.query import parse_query
    >>> q = parse_query("SELECT a.x FROM t AS a JOIN t AS b ON a.k = b.p UNION ALL SELECT x FROM t")
    >>> [(t.sql()[:8], r) for t, r in occurrence_terms(q, ObjectName("default", "t"))]
    [('SELECT a', 0), ('SELECT a', 1), ('SELECT x', 0)]

    Raises:
        AnalysisError: when ``query`` is not maintainable (as :func:`branches_reading`).
    """
    branches, problem = _branches(query)
    if problem:
        raise AnalysisError(problem)
    counts = [table_occurrences(b).count(table) for b in branches]
    if max(counts, default=0) <= 1:
        term = branches_reading(query, table)
        return [] if term is None else [(term, None)]
    return [(b.copy(), r) for b, n in zip(branches, counts, strict=True) for r in range(n)]


def _branch_problem(select: exp.Select, in_union: bool) -> str | None:
    """The first problem of one SELECT: its clauses, then FROM and joins, then expressions;
    in a ``UNION ALL`` branch, an aggregate."""
    problem = _select_problem(select) or _from_problem(select) or _expression_problem(select)
    if problem is None and in_union and _is_aggregate_query(select):
        construct = next(_aggregates(select), select.args.get("group"))
        problem = not_maintainable(construct, "aggregates in a UNION ALL branch are not maintained")
    return problem


def _select_problem(select: exp.Select) -> str | None:
    """WITH, LIMIT, ORDER BY, DISTINCT, HAVING, QUALIFY, grouping sets of one SELECT."""
    if select.args.get("with_") is not None:
        return not_maintainable(select.args["with_"], "common table expressions (WITH) are not maintained")
    modifier = modifier_problem(select)
    if modifier:
        return modifier
    if select.args.get("distinct") is not None:
        return not_maintainable("SELECT DISTINCT", "removing duplicates needs every earlier row")
    if select.args.get("having") is not None:
        return not_maintainable(select.args["having"], "HAVING filters are not maintained")
    if select.args.get("qualify") is not None:
        return not_maintainable(select.args["qualify"], WHY_WINDOW)
    group = select.args.get("group")
    if grouping_sets(group):
        return not_maintainable(group, "grouping sets, ROLLUP and CUBE are not maintained")
    return None


def _from_problem(select: exp.Select) -> str | None:
    """The sources of one SELECT: base tables joined by inner joins (a table read twice
    is two inputs of the delta rule, :func:`occurrence_terms`)."""
    sources, problem = inner_join_sources(select)
    if problem:
        return problem
    for source in sources:
        problem = source_problem(source)
        if problem or not isinstance(source, exp.Table):
            return problem
        table_name(source)  # a malformed name raises AnalysisError
    return None


def _expression_problem(select: exp.Select) -> str | None:
    """The first problem among the expressions of one SELECT, in text order: select list,
    join conditions, WHERE, GROUP BY."""
    roots: list[exp.Expr | None] = list(select.expressions)
    roots += [join.args.get("on") for join in select.args.get("joins") or []]
    roots += [select.args.get("where"), select.args.get("group")]
    for root in roots:
        for node in root.dfs() if root is not None else ():
            problem = node_problem(node)
            if problem:
                return problem
    return None


def _aggregates(select: exp.Select) -> Iterator[exp.Expr]:
    """The aggregate calls of the select list of ``select`` (not those of windows or
    subqueries)."""
    for item in select.expressions:
        for node in item.dfs():
            if is_aggregate(node) and node.find_ancestor(exp.Window, exp.Query) is select:
                yield node


def _is_aggregate_query(select: exp.Select) -> bool:
    return select.args.get("group") is not None or next(_aggregates(select), None) is not None


def _aggregate_columns(select: exp.Select) -> tuple[tuple[OutputColumn, ...], str | None]:
    """Roles of the select items of an aggregate query, or the first item (or GROUP BY
    key) that is neither a key nor a plain maintained aggregate call."""
    items = [unparen(item.unalias()) for item in select.expressions]
    keys, missing = group_keys(select, items)
    columns = []
    for i, (item, expr) in enumerate(zip(select.expressions, items, strict=True)):
        name = output_name(item)
        role = "group" if i in keys else aggregate_role(expr)
        formula = formula_of(i, expr) if role is None else None
        if formula is not None:
            columns.append(OutputColumn(name, "formula", formula[0], formula[1]))
            continue
        if role is None:
            has_aggregate = any(is_aggregate(node) for node in expr.dfs())
            why = WHY_AGG_EXPR if has_aggregate else "a select item of an aggregate query must be a GROUP BY key"
            return (), not_maintainable(expr, why)
        state = {"sum": (f"{STATE_PREFIX}nn_{i}",), "avg": (f"{STATE_PREFIX}sum_{i}", f"{STATE_PREFIX}nn_{i}")}
        columns.append(OutputColumn(name, role, state.get(role, ())))
    if missing is not None:
        return (), not_maintainable(missing, "a GROUP BY key must be in the select list")
    return tuple(columns), None


def _reserved_problem(columns: tuple[OutputColumn, ...]) -> str | None:
    for column in columns:
        if column.name.startswith(STATE_PREFIX):
            return not_maintainable(column.name, f"column names starting with {STATE_PREFIX} are reserved")
    return None


def _augment(select: exp.Select, columns: tuple[OutputColumn, ...]) -> str:
    """``select`` with ``COUNT(*) AS __smv_count`` and the SUM/AVG and formula state
    columns appended."""
    extra: list[exp.Expr] = [exp.alias_(exp.Count(this=exp.Star()), ROW_COUNT)]
    for i, (item, column) in enumerate(zip(select.expressions, columns, strict=True)):
        call = unparen(item.unalias())
        if column.role == "formula":
            extra += formula_state_calls(i, call)
            continue
        arg = call.expressions[0] if isinstance(call, exp.Anonymous) else call.this
        if column.role == "avg":
            extra.append(exp.alias_(exp.Sum(this=arg.copy()), column.state[0]))
        if column.role in ("sum", "avg"):
            extra.append(exp.alias_(exp.Count(this=arg.copy()), column.state[-1]))
    return select.copy().select(*extra, copy=False).sql(DIALECT)


@functools.lru_cache(maxsize=256)
def stage_state_analysis(sql: str) -> IvmAnalysis | None:
    """The delta-rule analysis of an inner stage's query (``sql``, its own inner stages
    none) when the stage is a *decomposable* aggregate: one SELECT with GROUP BY over inner
    joins and filters whose values are SUM, COUNT or AVG calls or formulas over SUM and
    COUNT (no MIN / MAX, which a retraction may force to recompute), so its output per key
    is kept as state (its augmented columns) and the delta rules merge the change into it
    (:mod:`sparkmv.refresh.incremental.stage_state`); None for any other stage. A stage's
    reserved output names (``__smv_k0``, ``__smv_v0``) are allowed.

    >>> a = stage_state_analysis("SELECT l_partkey AS __smv_k0, AVG(l_quantity) AS __smv_v0 "
    ...                          "FROM lineitem GROUP BY l_partkey")
    >>> [(c.name, c.role) for c in a.columns], a.state_columns
    ([('__smv_k0', 'group'), ('__smv_v0', 'avg')], ('__smv_count', '__smv_sum_1', '__smv_nn_1'))
    >>> stage_state_analysis("SELECT k AS __smv_k0, max(x) AS __smv_v FROM t GROUP BY k") is None
    True
    """
    query = parse_query(sql)
    if not isinstance(query, exp.Select) or query.args.get("group") is None:
        return None
    branches, reason = _branches(query)
    if reason is not None or len(branches) != 1:
        return None
    if _branch_problem(branches[0], in_union=False) is not None:
        return None
    columns, reason = _aggregate_columns(branches[0])
    if reason is not None or any(c.role in ("min", "max") for c in columns):
        return None
    state = (ROW_COUNT, *(name for column in columns for name in column.state))
    if any(c.name in state for c in columns):
        return None
    return IvmAnalysis(None, True, columns, state, _augment(branches[0], columns))
