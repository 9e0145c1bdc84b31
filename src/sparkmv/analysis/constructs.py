"""The constructs of a defining query and whether incremental refresh maintains each: the
checks shared by the delta rules (:mod:`sparkmv.analysis.incremental`) and affected-key
recomputation (:mod:`sparkmv.analysis.keyed`).

Every refusal is one text, ``"<construct> is not incrementally maintainable: <why>"``
(:func:`reason`). User-defined functions are told apart from Spark built-ins by
``spark_functions.txt`` (``SHOW FUNCTIONS`` of Spark 4.1.4; ``spark_aggregates.txt`` holds
its ``agg_funcs`` group).
"""

from __future__ import annotations

import functools
import re
from importlib import resources

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from sparkmv.analysis.query import DIALECT

_ROLES: dict[type[exp.Expr], str] = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
# Spark names of functions whose value is not a function of their arguments.
_NONDETERMINISTIC = frozenset(
    "rand random randn uniform randstr uuid shuffle now current_timestamp current_date curdate current_time "
    "localtimestamp current_timezone monotonically_increasing_id spark_partition_id input_file_name "
    "input_file_block_start input_file_block_length".split()
)
ORDERING = ("order", "sort", "cluster", "distribute")
_FUNCTION_NAME = re.compile(r"[a-z_][a-z0-9_]*")

WHY_DISTINCT_AGG = "a DISTINCT aggregate needs every earlier value"
WHY_WINDOW = "window functions are not maintained"
WHY_OUTER = "outer joins are not maintained"
WHY_SUBQUERY = "subqueries are not maintained"
WHY_NONDETERMINISTIC = "non-deterministic function"
WHY_UDF = "user-defined functions are not maintained"
WHY_AGG_KIND = "only SUM, COUNT, AVG, MIN and MAX are maintained"
WHY_AGG_EXPR = "only plain aggregate calls are maintained"


def not_maintainable(construct: exp.Expr | str | None, why: str) -> str:
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


def modifier_problem(query: exp.Query) -> str | None:
    for key in ("limit", "offset"):
        if query.args.get(key) is not None:
            return not_maintainable(query.args[key], "the rows kept depend on the whole result")
    for key in ORDERING:
        if query.args.get(key) is not None:
            return not_maintainable(query.args[key], "ordering and distribution clauses are not maintained")
    return None


def source_problem(source: exp.Expr) -> str | None:
    if isinstance(source, exp.Subquery):
        return not_maintainable(source, WHY_SUBQUERY)
    if not isinstance(source, exp.Table) or isinstance(source.this, exp.Func) or not source.name:
        return not_maintainable(source, "only base tables are maintained")
    if source.args.get("sample") is not None:
        return not_maintainable(source, "sampling is non-deterministic")
    for pivot in source.args.get("pivots") or []:
        return not_maintainable(pivot, "PIVOT and UNPIVOT are not maintained")
    return None


def node_problem(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Exists | exp.Subquery | exp.Query) or (isinstance(node, exp.In) and node.args.get("query")):
        return not_maintainable(node, WHY_SUBQUERY)
    if isinstance(node, exp.Window):
        return not_maintainable(node, WHY_WINDOW)
    if isinstance(node, exp.Filter):
        return not_maintainable(node, "aggregate FILTER clauses are not maintained")
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        return not_maintainable(node, WHY_UDF)
    if not isinstance(node, exp.Func):
        return None
    name = _function_name(node)
    if isinstance(node, exp.StrToUnix) and isinstance(node.this, exp.CurrentTimestamp):
        return not_maintainable("unix_timestamp()", WHY_NONDETERMINISTIC)  # how sqlglot reads unix_timestamp()
    if name in _NONDETERMINISTIC:
        return not_maintainable(node, WHY_NONDETERMINISTIC)
    if isinstance(node, exp.Anonymous) and name not in spark_functions():
        return not_maintainable(node, WHY_UDF)
    if is_aggregate(node):
        if any(isinstance(arg, exp.Distinct) for arg in node.iter_expressions()):
            return not_maintainable(node, WHY_DISTINCT_AGG)
        if aggregate_role(node) is None:
            return not_maintainable(node, WHY_AGG_KIND)
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
    return is_aggregate(node)


def is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in _names("spark_aggregates.txt")
    return isinstance(node, exp.AggFunc)


def aggregate_role(node: exp.Expr) -> str | None:
    """The role of a maintained aggregate call (``mean`` is Spark's other name of AVG)."""
    if isinstance(node, exp.Anonymous):
        return "avg" if node.name.lower() == "mean" and len(node.expressions) == 1 else None
    return _ROLES.get(type(node))


def group_keys(select: exp.Select, items: list[exp.Expr]) -> tuple[set[int], exp.Expr | None]:
    """Positions of the select items that are GROUP BY keys (by expression, alias or
    ordinal; GROUP BY ALL: every item without an aggregate), and the first GROUP BY
    expression that is not in the select list."""
    group = select.args.get("group")
    if group is None:
        return set(), None
    if group.args.get("all"):
        return {i for i, e in enumerate(items) if not any(is_aggregate(n) for n in e.dfs())}, None
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
    """Spark SQL of ``expr`` with identifiers lower-cased, without comments (a comment
    beside a select item does not change it), and without column qualifiers when ``strip``.

    >>> _normal(exp.maybe_parse("t.K /* a note */", dialect=DIALECT), strip=True)
    'k'
    """
    copy = normalize_identifiers(expr.copy(), dialect=DIALECT)
    for column in copy.find_all(exp.Column) if strip else ():
        column.set("table", None)
    return copy.sql(dialect=DIALECT, normalize_functions="lower", comments=False)


def is_inside(node: exp.Expr, ancestor: exp.Expr) -> bool:
    """True when ``ancestor`` is above ``node`` in its tree (``node`` itself excluded)."""
    parent = node.parent
    while parent is not None:
        if parent is ancestor:
            return True
        parent = parent.parent
    return False


def under_aggregate(node: exp.Expr, top: exp.Expr | None = None) -> bool:
    """True when an ancestor of ``node`` is an aggregate call, looking up to ``top`` (itself
    included) or to the nearest SELECT (a subquery's aggregate is its own).

    >>> q = exp.select("sum(x + 1) AS s", "y").from_("t")
    >>> sorted((c.name, under_aggregate(c)) for c in q.find_all(exp.Column))
    [('x', True), ('y', False)]
    """
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if is_aggregate(parent):
            return True
        if parent is top:
            return False
        parent = parent.parent
    return False


def unparen(expr: exp.Expr) -> exp.Expr:
    while isinstance(expr, exp.Paren):
        expr = expr.this
    return expr


def output_name(item: exp.Expr) -> str:
    """The output column name of a select item, lower-cased (see :class:`OutputColumn`)."""
    if isinstance(item, exp.Alias | exp.Column) or item.alias:
        return item.alias_or_name.lower()
    item = unparen(item)
    if isinstance(item, exp.Count) and isinstance(item.this, exp.Star):
        return "count(1)"
    return item.sql(dialect=DIALECT, normalize_functions="lower").lower()


def inner_join_sources(select: exp.Select) -> tuple[list[exp.Expr], str | None]:
    """The sources of one SELECT's FROM and joins, or the reason of its first outer, semi or
    anti join or LATERAL VIEW (delta rules and affected-key recomputation alike maintain
    inner joins only)."""
    from_ = select.args.get("from_")
    sources = [from_.this] if from_ is not None else []
    for join in select.args.get("joins") or []:
        if join.side or join.kind in ("SEMI", "ANTI", "OUTER"):
            bare = join.copy()
            bare.set("on", None)
            bare.set("using", None)
            return [], not_maintainable(bare.sql(dialect=DIALECT, normalize_functions="lower").strip(), WHY_OUTER)
        sources.append(join.this)
    for lateral in select.args.get("laterals") or []:
        return [], not_maintainable(lateral, "LATERAL VIEW is not maintained")
    return sources, None


def grouping_sets(group: exp.Expr | None) -> bool:
    """True when a GROUP BY clause has grouping sets, ROLLUP, CUBE or totals (neither
    technique maintains them)."""
    sets = (exp.Rollup, exp.Cube, exp.GroupingSets)
    return group is not None and (
        any(group.args.get(k) for k in ("grouping_sets", "rollup", "cube", "totals"))
        or any(isinstance(key, sets) for key in group.expressions)
    )
