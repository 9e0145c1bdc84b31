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
>>> analyze_incremental(parse_query("SELECT count(DISTINCT p) FROM f")).reason
'count(DISTINCT p) is not incrementally maintainable: a DISTINCT aggregate needs every earlier value'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from sparkmv.analysis.query import DIALECT, parse_query, referenced_tables, table_name
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName, is_hidden_column

STATE_PREFIX = "__smv_"
ROW_COUNT = "__smv_count"

_ROLES: dict[type[exp.Expr], str] = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
# Spark names of functions whose value is not a function of their arguments.
_NONDETERMINISTIC = frozenset(
    "rand random randn uniform randstr uuid shuffle now current_timestamp current_date curdate current_time "
    "localtimestamp current_timezone monotonically_increasing_id spark_partition_id input_file_name "
    "input_file_block_start input_file_block_length".split()
)
_ORDERING = ("order", "sort", "cluster", "distribute")
_FUNCTION_NAME = re.compile(r"[a-z_][a-z0-9_]*")

WHY_DISTINCT_AGG = "a DISTINCT aggregate needs every earlier value"
WHY_WINDOW = "window functions are not maintained"
WHY_OUTER = "outer joins are not maintained"
WHY_SUBQUERY = "subqueries are not maintained"
WHY_NONDETERMINISTIC = "non-deterministic function"
WHY_UDF = "user-defined functions are not maintained"
WHY_AGG_KIND = "only SUM, COUNT, AVG, MIN and MAX are maintained"
WHY_AGG_EXPR = "only plain aggregate calls are maintained"


@dataclass(frozen=True)
class OutputColumn:
    """One output column of the defining query.

    Attributes:
        name: the output name, lower-cased: the alias, the column name, or for other
            unaliased expressions a best-effort copy of Spark's generated name
            (``sum(x)``, ``count(1)`` for ``COUNT(*)``).
        role: ``group`` (a GROUP BY key), ``sum``, ``count``, ``avg``, ``min``, ``max``, or
            ``plain`` (a column of a non-aggregate query).
        state: the hidden state columns it needs: SUM ``("__smv_nn_<i>",)`` (its non-NULL
            count, to tell a NULL sum from 0), AVG ``("__smv_sum_<i>", "__smv_nn_<i>")``,
            others ``()``; ``<i>`` is the 0-based position in the select list.
    """

    name: str
    role: str
    state: tuple[str, ...] = ()


@dataclass(frozen=True)
class IvmAnalysis:
    """Whether a defining query is maintainable by incremental refresh, and how.

    Attributes:
        reason: None when maintainable, else ``"<construct> is not incrementally
            maintainable: <why>"``.
        aggregate: True for GROUP BY queries and global aggregates.
        columns: the output columns in select-list order (of the first branch of a
            ``UNION ALL``); empty when not maintainable.
        state_columns: the hidden columns :attr:`augmented_sql` appends, in order:
            ``ROW_COUNT`` then each column's ``state``; empty for non-aggregates and when
            not maintainable.
        augmented_sql: Spark SQL of the query with the state columns appended to the select
            list, table names as written (the query's own SQL when there are none).
    """

    reason: str | None
    aggregate: bool
    columns: tuple[OutputColumn, ...]
    state_columns: tuple[str, ...]
    augmented_sql: str

    @property
    def maintainable(self) -> bool:
        """True when incremental refresh can maintain the materialized view."""
        return self.reason is None


def analyze_incremental(query: exp.Query) -> IvmAnalysis:
    """Decide whether ``query`` (a parsed defining query, tables unbound) is maintainable
    by incremental refresh; for aggregates, build the query with its state columns.

    Raises:
        AnalysisError: for malformed table names (as :func:`~sparkmv.analysis.query.table_name`).
    """
    aggregate = isinstance(query, exp.Select) and _is_aggregate_query(query)
    branches, reason = _branches(query)
    for branch in branches:
        reason = reason or _branch_problem(branch, in_union=len(branches) > 1)
    columns: tuple[OutputColumn, ...] = ()
    if reason is None and aggregate:
        columns, reason = _aggregate_columns(branches[0])
    elif reason is None:
        columns = tuple(OutputColumn(_output_name(item), "plain") for item in branches[0].expressions)
    reason = reason or _reserved_problem(columns)
    if reason is not None:
        return IvmAnalysis(reason, aggregate, (), (), query.sql(DIALECT))
    if not aggregate:
        return IvmAnalysis(None, False, columns, (), query.sql(DIALECT))
    state = (ROW_COUNT, *(name for column in columns for name in column.state))
    return IvmAnalysis(None, True, columns, state, _augment(branches[0], columns))


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
    """The parsed :attr:`IvmAnalysis.augmented_sql` of ``definition`` (cached, shared)."""
    return parse_query(analyze_incremental(parse_query(definition)).augmented_sql)


def _reason(construct: exp.Expr | str | None, why: str) -> str:
    if isinstance(construct, exp.Expr):
        construct = construct.sql(dialect=DIALECT, normalize_functions="lower")
    return f"{construct} is not incrementally maintainable: {why}"


@functools.cache
def _names(resource: str) -> frozenset[str]:
    text = resources.files("sparkmv.analysis").joinpath(resource).read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def spark_functions() -> frozenset[str]:
    """Names of Spark's built-in functions (lower case), from ``spark_functions.txt``.

    >>> {"date_format", "count_if", "now"} <= spark_functions(), "my_udf" in spark_functions()
    (True, False)
    """
    return _names("spark_functions.txt")


def _branches(query: exp.Query) -> tuple[list[exp.Select], str | None]:
    """The SELECTs of ``query`` (several for ``UNION ALL``) and the first problem of its
    set operations: WITH, a set operation other than UNION ALL, ORDER BY / LIMIT on it."""
    if query.args.get("with_") is not None:
        return [], _reason(query.args["with_"], "common table expressions (WITH) are not maintained")
    if isinstance(query, exp.Select):
        return [query], None
    if not isinstance(query, exp.Union | exp.Subquery) or query.args.get("distinct"):
        keyword = type(query).__name__.upper() + ("" if query.args.get("distinct") else " ALL")
        return [], _reason(keyword, "only UNION ALL is maintained")
    modifier = _modifier_problem(query)
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


def _modifier_problem(query: exp.Query) -> str | None:
    for key in ("limit", "offset"):
        if query.args.get(key) is not None:
            return _reason(query.args[key], "the rows kept depend on the whole result")
    for key in _ORDERING:
        if query.args.get(key) is not None:
            return _reason(query.args[key], "ordering and distribution clauses are not maintained")
    return None


def _branch_problem(select: exp.Select, in_union: bool) -> str | None:
    """The first problem of one SELECT: its clauses, then FROM and joins, then expressions;
    in a ``UNION ALL`` branch, an aggregate."""
    problem = _select_problem(select) or _from_problem(select) or _expression_problem(select)
    if problem is None and in_union and _is_aggregate_query(select):
        construct = next(_aggregates(select), select.args.get("group"))
        problem = _reason(construct, "aggregates in a UNION ALL branch are not maintained")
    return problem


def _select_problem(select: exp.Select) -> str | None:
    """WITH, LIMIT, ORDER BY, DISTINCT, HAVING, QUALIFY, grouping sets of one SELECT."""
    if select.args.get("with_") is not None:
        return _reason(select.args["with_"], "common table expressions (WITH) are not maintained")
    modifier = _modifier_problem(select)
    if modifier:
        return modifier
    if select.args.get("distinct") is not None:
        return _reason("SELECT DISTINCT", "removing duplicates needs every earlier row")
    if select.args.get("having") is not None:
        return _reason(select.args["having"], "HAVING filters are not maintained")
    if select.args.get("qualify") is not None:
        return _reason(select.args["qualify"], WHY_WINDOW)
    group = select.args.get("group")
    sets = (exp.Rollup, exp.Cube, exp.GroupingSets)
    if group is not None and (
        any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube", "totals"))
        or any(isinstance(key, sets) for key in group.expressions)
    ):
        return _reason(group, "grouping sets, ROLLUP and CUBE are not maintained")
    return None


def _from_problem(select: exp.Select) -> str | None:
    """The sources of one SELECT: base tables read once each, joined by inner joins."""
    from_ = select.args.get("from_")
    sources = [from_.this] if from_ is not None else []
    for join in select.args.get("joins") or []:
        if join.side or join.kind in ("SEMI", "ANTI", "OUTER"):
            bare = join.copy()
            bare.set("on", None)
            bare.set("using", None)
            return _reason(bare.sql(dialect=DIALECT, normalize_functions="lower").strip(), WHY_OUTER)
        sources.append(join.this)
    seen = set()
    for source in sources:
        problem = _source_problem(source)
        if problem or not isinstance(source, exp.Table):
            return problem
        name = table_name(source)
        if name in seen:
            bare = source.copy()
            bare.set("alias", None)
            return _reason(bare, "a base table read twice is not maintained")
        seen.add(name)
    for lateral in select.args.get("laterals") or []:
        return _reason(lateral, "LATERAL VIEW is not maintained")
    return None


def _source_problem(source: exp.Expr) -> str | None:
    if isinstance(source, exp.Subquery):
        return _reason(source, WHY_SUBQUERY)
    if not isinstance(source, exp.Table) or isinstance(source.this, exp.Func) or not source.name:
        return _reason(source, "only base tables are maintained")
    if source.args.get("sample") is not None:
        return _reason(source, "sampling is non-deterministic")
    for pivot in source.args.get("pivots") or []:
        return _reason(pivot, "PIVOT and UNPIVOT are not maintained")
    return None


def _expression_problem(select: exp.Select) -> str | None:
    """The first problem among the expressions of one SELECT, in text order: select list,
    join conditions, WHERE, GROUP BY."""
    roots: list[exp.Expr | None] = list(select.expressions)
    roots += [join.args.get("on") for join in select.args.get("joins") or []]
    roots += [select.args.get("where"), select.args.get("group")]
    for root in roots:
        for node in root.dfs() if root is not None else ():
            problem = _node_problem(node)
            if problem:
                return problem
    return None


def _node_problem(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Exists | exp.Subquery | exp.Query) or (isinstance(node, exp.In) and node.args.get("query")):
        return _reason(node, WHY_SUBQUERY)
    if isinstance(node, exp.Window):
        return _reason(node, WHY_WINDOW)
    if isinstance(node, exp.Filter):
        return _reason(node, "aggregate FILTER clauses are not maintained")
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return _reason(node, WHY_UDF)
    if not isinstance(node, exp.Func):
        return None
    name = _function_name(node)
    if isinstance(node, exp.StrToUnix) and isinstance(node.this, exp.CurrentTimestamp):
        return _reason("unix_timestamp()", WHY_NONDETERMINISTIC)  # how sqlglot reads unix_timestamp()
    if name in _NONDETERMINISTIC:
        return _reason(node, WHY_NONDETERMINISTIC)
    if isinstance(node, exp.Anonymous) and name not in spark_functions():
        return _reason(node, WHY_UDF)
    if _is_aggregate(node):
        if any(isinstance(arg, exp.Distinct) for arg in node.iter_expressions()):
            return _reason(node, WHY_DISTINCT_AGG)
        if _role(node) is None:
            return _reason(node, WHY_AGG_KIND)
    return None


def _function_name(node: exp.Func) -> str:
    """The Spark name of a function call (``now``, ``current_timestamp``, ...)."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    match = _FUNCTION_NAME.match(node.sql(dialect=DIALECT).lower())
    return match.group(0) if match else ""


def is_aggregate_call(node: exp.Expr) -> bool:
    """True for a call of a Spark aggregate function (``sum``, ``count``, ``max_by``, ...),
    whether sqlglot knows it (:class:`sqlglot.exp.AggFunc`) or not (``spark_aggregates.txt``).

    >>> is_aggregate_call(exp.Sum(this=exp.column("x"))), is_aggregate_call(exp.column("x"))
    (True, False)
    """
    return _is_aggregate(node)


def _is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in _names("spark_aggregates.txt")
    return isinstance(node, exp.AggFunc)


def _role(node: exp.Expr) -> str | None:
    """The role of a maintained aggregate call (``mean`` is Spark's other name of AVG)."""
    if isinstance(node, exp.Anonymous):
        return "avg" if node.name.lower() == "mean" and len(node.expressions) == 1 else None
    return _ROLES.get(type(node))


def _aggregates(select: exp.Select) -> Iterator[exp.Expr]:
    """The aggregate calls of the select list of ``select`` (not those of windows or
    subqueries)."""
    for item in select.expressions:
        for node in item.dfs():
            if _is_aggregate(node) and node.find_ancestor(exp.Window, exp.Query) is select:
                yield node


def _is_aggregate_query(select: exp.Select) -> bool:
    return select.args.get("group") is not None or next(_aggregates(select), None) is not None


def _aggregate_columns(select: exp.Select) -> tuple[tuple[OutputColumn, ...], str | None]:
    """Roles of the select items of an aggregate query, or the first item (or GROUP BY
    key) that is neither a key nor a plain maintained aggregate call."""
    items = [_unparen(item.unalias()) for item in select.expressions]
    keys, missing = _group_keys(select, items)
    columns = []
    for i, (item, expr) in enumerate(zip(select.expressions, items, strict=True)):
        name = _output_name(item)
        role = "group" if i in keys else _role(expr)
        if role is None:
            has_aggregate = any(_is_aggregate(node) for node in expr.dfs())
            why = WHY_AGG_EXPR if has_aggregate else "a select item of an aggregate query must be a GROUP BY key"
            return (), _reason(expr, why)
        state = {"sum": (f"{STATE_PREFIX}nn_{i}",), "avg": (f"{STATE_PREFIX}sum_{i}", f"{STATE_PREFIX}nn_{i}")}
        columns.append(OutputColumn(name, role, state.get(role, ())))
    if missing is not None:
        return (), _reason(missing, "a GROUP BY key must be in the select list")
    return tuple(columns), None


def _group_keys(select: exp.Select, items: list[exp.Expr]) -> tuple[set[int], exp.Expr | None]:
    """Positions of the select items that are GROUP BY keys (by expression, alias or
    ordinal; GROUP BY ALL: every item without an aggregate), and the first GROUP BY
    expression that is not in the select list."""
    group = select.args.get("group")
    if group is None:
        return set(), None
    if group.args.get("all"):
        return {i for i, e in enumerate(items) if not any(_is_aggregate(n) for n in e.dfs())}, None
    aliases = [item.alias.lower() if isinstance(item, exp.Alias) else None for item in select.expressions]
    keys: set[int] = set()
    missing = None
    for key in group.expressions:
        if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.this) <= len(items):
            found = {int(key.this) - 1}
        else:
            found = {i for i, item in enumerate(items) if _same(item, key)}
            if not found and isinstance(key, exp.Column) and not key.table:
                found = {i for i, alias in enumerate(aliases) if alias == key.name.lower()}
        keys |= found
        if not found and missing is None:
            missing = key
    return keys, missing


def _same(item: exp.Expr, key: exp.Expr) -> bool:
    """Whether a select item and a GROUP BY expression are the same expression.

    Spark resolves identifiers case-insensitively, and an unqualified column of a valid
    query names the one table having it, so ``t.k`` and ``k`` match; ``t.k`` and ``u.k``
    do not.

    >>> _same(exp.column("K", "t"), exp.column("k")), _same(exp.column("k", "t"), exp.column("k", "u"))
    (True, False)
    """
    if _normal(item, strip=False) == _normal(key, strip=False):
        return True
    qualified = [any(c.table for c in e.find_all(exp.Column)) for e in (item, key)]
    return not all(qualified) and _normal(item, strip=True) == _normal(key, strip=True)


def _normal(expr: exp.Expr, strip: bool) -> str:
    """Spark SQL of ``expr`` with identifiers lower-cased, and without column qualifiers
    when ``strip``."""
    copy = normalize_identifiers(expr.copy(), dialect=DIALECT)
    for column in copy.find_all(exp.Column) if strip else ():
        column.set("table", None)
    return copy.sql(dialect=DIALECT, normalize_functions="lower")


def _unparen(expr: exp.Expr) -> exp.Expr:
    while isinstance(expr, exp.Paren):
        expr = expr.this
    return expr


def _output_name(item: exp.Expr) -> str:
    """The output column name of a select item, lower-cased (see :class:`OutputColumn`)."""
    if isinstance(item, exp.Alias | exp.Column) or item.alias:
        return item.alias_or_name.lower()
    item = _unparen(item)
    if isinstance(item, exp.Count) and isinstance(item.this, exp.Star):
        return "count(1)"
    return item.sql(dialect=DIALECT, normalize_functions="lower").lower()


def _reserved_problem(columns: tuple[OutputColumn, ...]) -> str | None:
    for column in columns:
        if column.name.startswith(STATE_PREFIX):
            return _reason(column.name, f"column names starting with {STATE_PREFIX} are reserved")
    return None


def _augment(select: exp.Select, columns: tuple[OutputColumn, ...]) -> str:
    """``select`` with ``COUNT(*) AS __smv_count`` and the SUM/AVG state columns appended."""
    extra: list[exp.Expr] = [exp.alias_(exp.Count(this=exp.Star()), ROW_COUNT)]
    for item, column in zip(select.expressions, columns, strict=True):
        call = _unparen(item.unalias())
        arg = call.expressions[0] if isinstance(call, exp.Anonymous) else call.this
        if column.role == "avg":
            extra.append(exp.alias_(exp.Sum(this=arg.copy()), column.state[0]))
        if column.role in ("sum", "avg"):
            extra.append(exp.alias_(exp.Count(this=arg.copy()), column.state[-1]))
    return select.copy().select(*extra, copy=False).sql(DIALECT)
