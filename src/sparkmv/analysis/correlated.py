"""Affected-key recomputation by a correlation key: the rows of a query's relation that a
change touches, found through the key its correlated subqueries share (TPC-H Q21).

A query whose aggregate layer the delta rules maintain (SUM, COUNT, AVG and formulas over
them) but whose relation holds subquery predicates (``EXISTS``, ``NOT EXISTS``, ``IN``,
``NOT IN``, scalar subqueries) is otherwise maintained by recomputing its touched groups
whole: TPC-H Q21's groups are suppliers, and any change of ``lineitem`` touches nearly all.
Yet its relation is *partitioned* by a key: every row with ``l1.l_orderkey = k`` is made of
the outer rows joined on that key (``l1``, ``orders``) and decided by the subqueries' rows
holding it (``l2``, ``l3``, correlated on ``l_orderkey = l1.l_orderkey``), plus rows of
tables bound to no key (``supplier``, ``nation``). So when only tables *bound* to the key
changed, the relation's rows of other keys are the same before and after, and

    ΔR = R_new[K ∈ T] − R_old[K ∈ T]

for ``T`` the key values of the changed rows. Both sides are the query over its inputs
filtered to ``T`` (each bound reference by its own column, which Spark pushes into the scan
as a min/max range: the keys of TPC-H's RF1 are new, above every file's range), and the
aggregate layer's partial rows of the old side are negated and merged into the MV as the
delta rules merge theirs. This is affected-key recomputation (DESIGN.md) with the
correlation key as the key, as DBSP indexes a correlated subquery's inputs by the
correlation key (Budiu et al., VLDB 2023).

Which references a key binds: the key is a class of columns of the outer SELECT equated by
top-level conjuncts of its WHERE (and inner joins' ON); a reference inside a subquery is
bound when a top-level conjunct of its own SELECT's WHERE equates one of its columns with a
column already bound in an enclosing SELECT (or in its own, transitively). Such a conjunct
never adds an outer column (under ``NOT EXISTS`` an outer row passes whatever it says).
Among the classes, the one binding the most references, at least one inside a subquery.

>>> from sparkmv.analysis.query import parse_query
>>> plan = correlated_plan(parse_query(
...     "SELECT s.n, count(*) AS c FROM s, l AS l1, o WHERE s.k = l1.sk AND o.ok = l1.ok "
...     "AND EXISTS (SELECT * FROM l AS l2 WHERE l2.ok = l1.ok AND l2.sk <> l1.sk) GROUP BY s.n"))
>>> plan.key, plan.bound
('o.ok', (None, 'ok', 'ok', 'ok'))
>>> correlated_plan(parse_query("SELECT a.x, count(*) AS c FROM a WHERE NOT EXISTS "
...     "(SELECT * FROM b WHERE b.y = a.x AND b.z = a.w) GROUP BY a.x")).bound
('x', 'y')
>>> correlated_plan(parse_query(
...     "SELECT a.x FROM a LEFT JOIN b ON a.x = b.x WHERE EXISTS (SELECT 1 FROM c WHERE c.x = a.x)")).bound
('x', 'x', 'x')
>>> correlated_plan(parse_query("SELECT n, count(*) AS c FROM (SELECT a.x, count(b.y) AS n "
...     "FROM a LEFT JOIN b ON a.x = b.x GROUP BY a.x) AS d GROUP BY n")).bound
('x', 'x')
>>> correlated_plan(parse_query("SELECT n, count(*) AS c FROM (SELECT a.w, count(b.y) AS n "
...     "FROM a LEFT JOIN b ON a.x = b.x GROUP BY a.w) AS d GROUP BY n"))
'a derived table grouped by no column of its correlation key'
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate
from sparkmv.analysis.ivm import IvmAnalysis, OutputColumn
from sparkmv.analysis.query import DIALECT, table_name
from sparkmv.analysis.subqueries import conjunct_of, predicates, subquery_body
from sparkmv.errors import SparkMvError

TECHNIQUE = "affected-key recomputation of a correlation key"
DERIVED = "__smv_derived"
"""The name a derived table is read by when its outer query's delta rules are checked."""

Known = Mapping[str, Collection[str]]
"""Qualified base table (lower case) -> its column names: tells an unqualified column's table."""


@dataclass(frozen=True)
class CorrelatedPlan:
    """How a query's relation is partitioned by a correlation key.

    Attributes:
        key: the key as its first outer column, ``<alias>.<column>`` (for EXPLAIN).
        bound: per table reference of the query (in
            :func:`~sparkmv.analysis.query.table_occurrences` order), the column of that
            reference bound to the key, or None for a reference bound to none (a table that
            must not change for the technique to apply).
        tables: the references' qualified table names, in the same order.
        filters: per reference (same order), the conjunction of the outer SELECT's WHERE
            conjuncts that read only that reference's columns, as Spark SQL over its
            unqualified column names, for a reference bound to the key whose rows every
            row of the relation needs (joined inner: no outer join in that SELECT); else
            None. Every row of the key ``k`` holds a row of such a reference with its bound
            column ``= k`` passing its filter, so the touched keys without one touch
            nothing: a semi-join reduction of the keys (TPC-H Q17's 0.1 % of parts by
            brand and container). Empty when not computed.
    """

    key: str
    bound: tuple[str | None, ...]
    tables: tuple[str, ...]
    filters: tuple[str | None, ...] = ()

    def problem(self, changed: Collection[str]) -> str | None:
        """Why a change of the tables ``changed`` (qualified names) is not maintained
        through the key: a changed table with a reference the key does not bind (its rows
        reach every key); else None.

        >>> CorrelatedPlan("o.k", ("k", None), ("d.o", "d.s")).problem({"d.s"})
        "base table 'd.s' changed, and a reference to it is bound to no correlation key (o.k)"
        """
        for table in sorted(self.unbound_tables() & {t.lower() for t in changed}):
            return f"base table '{table}' changed, and a reference to it is bound to no correlation key ({self.key})"
        return None

    def unbound_tables(self) -> set[str]:
        """The tables (qualified, lower case) with a reference bound to no key."""
        return {t for t, c in zip(self.tables, self.bound, strict=True) if c is None}

    def shared_tables(self) -> set[str]:
        """The tables (qualified, lower case) with a reference bound to the key and another
        bound to none: any change of them recomputes the touched groups.

        >>> CorrelatedPlan("c.k", ("k", None, "k"), ("d.c", "d.c", "d.o")).shared_tables()
        {'d.c'}
        """
        return self.unbound_tables() & {t for t, c in zip(self.tables, self.bound, strict=True) if c is not None}

    def bound_columns(self, table: str) -> set[str]:
        """The columns of ``table`` (qualified, lower case) its references are bound by."""
        return {c for t, c in zip(self.tables, self.bound, strict=True) if t == table and c is not None}


Ref = tuple[int, str]
"""A column of one table reference: (the reference's index in occurrence order, the column
name in lower case)."""


@dataclass
class _Scope:
    """One SELECT of the query: its table references (alias -> reference index), its
    equality conjuncts and its subquery SELECTs."""

    select: exp.Select
    parent: _Scope | None
    aliases: dict[str, int] = field(default_factory=dict)
    tables: dict[int, str] = field(default_factory=dict)
    equalities: list[tuple[exp.Column, exp.Column]] = field(default_factory=list)
    children: list[_Scope] = field(default_factory=list)

    def walk(self) -> Iterator[_Scope]:
        yield self
        for child in self.children:
            yield from child.walk()


def correlated_plan(query: exp.Expr, known: Known | None = None) -> CorrelatedPlan | str:
    """The correlation key partitioning ``query``'s relation (module docstring), or why
    there is none: a shape other than one SELECT over base tables with inner or outer joins
    and subquery predicates in WHERE conjuncts, or no key binding a subquery's reference.
    A SELECT over one derived table is partitioned by the derived table's key
    (:func:`_plan` of its SELECT, its rows kept apart as :func:`_partition_problem`
    checks). ``known`` tells an unqualified column's table (else such a column binds
    nothing)."""
    if not isinstance(query, exp.Select) or query.args.get("with") is not None:
        return "not one SELECT"
    refs = {id(t): i for i, t in enumerate(_table_refs(query))}
    lookup = {k.lower(): {c.lower() for c in v} for k, v in (known or {}).items()}
    derived = single_derived(query)
    if derived is not None:
        if sum(1 for _ in query.find_all(exp.Select)) != 1 + sum(1 for _ in derived.find_all(exp.Select)):
            return "a subquery beside a derived table"
        return _plan(derived, refs, lookup, derived=True)
    return _plan(query, refs, lookup, derived=False)


def single_derived(query: exp.Select) -> exp.Select | None:
    """The SELECT of the one derived table ``query`` reads (its FROM, no join), else None.

    >>> from sparkmv.analysis.query import parse_query
    >>> q = parse_query("SELECT n, count(*) AS c FROM (SELECT k, count(*) AS n FROM t GROUP BY k) s GROUP BY n")
    >>> single_derived(q).sql()
    'SELECT k, COUNT(*) AS n FROM t GROUP BY k'
    """
    source = query.args.get("from_") or query.args.get("from")
    if source is None or query.args.get("joins") or not isinstance(source.this, exp.Subquery):
        return None
    body = source.this.this
    return body if isinstance(body, exp.Select) and body.args.get("with") is None else None


def _plan(select: exp.Select, refs: dict[int, int], lookup: dict[str, set[str]], derived: bool) -> CorrelatedPlan | str:
    """The key of ``select``'s relation binding the most references: at least one inside a
    subquery, or for a ``derived`` table's SELECT any key its rows keep apart
    (:func:`_partition_problem`)."""
    try:
        root = _scope(select, None, refs)
    except _Refused as exc:
        return str(exc)
    if sum(1 for _ in root.walk()) != sum(1 for _ in select.find_all(exp.Select)):
        return "a subquery outside a WHERE conjunct"
    resolved = {s_id: _resolved(s, lookup) for s_id, s in ((id(s), s) for s in root.walk())}
    best: tuple[int, Ref, dict[int, str]] | None = None
    problem = "no correlation key binds a subquery's table"
    for start in _outer_columns(root, resolved):
        members = _outer_class(root, resolved[id(root)], start)
        bound = {i: c for i, c in sorted(members, reverse=True)}  # the first column of each reference
        inner = _bind_children(root, set(members), bound, resolved)
        if derived:
            why = _partition_problem(root, members, lookup)
            problem, inner = (why, False) if why else (problem, True)
        if inner and (best is None or len(bound) > best[0]):
            best = (len(bound), start, bound)
    if best is None:
        return problem
    _, start, bound = best
    order = sorted(refs.values())
    tables = {i: t for s in root.walk() for i, t in s.tables.items()}
    alias = next(a for s in root.walk() for a, i in s.aliases.items() if i == start[0])
    local = _local_filters(root, lookup, set(bound))
    return CorrelatedPlan(
        f"{alias}.{start[1]}",
        tuple(bound.get(i) for i in order),
        tuple(tables[i] for i in order),
        tuple(local.get(i) for i in order),
    )


def _local_filters(root: _Scope, lookup: dict[str, set[str]], bound: set[int]) -> dict[int, str]:
    """Per reference of ``root`` in ``bound``, its filter (:attr:`CorrelatedPlan.filters`):
    the WHERE conjuncts without a subquery or aggregate whose columns all resolve to it,
    their qualifiers dropped; none when ``root`` has an outer join (a NULL-extended row
    passes without a row of the other side)."""
    select = root.select
    where = select.args.get("where")
    if where is None or any(j.side for j in select.args.get("joins") or []):
        return {}
    found: dict[int, list[exp.Expr]] = {}
    for conjunct in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if any(conjunct.find_all(exp.Select, exp.Subquery, exp.Exists)) or any(
            is_aggregate(n) for n in conjunct.walk()
        ):
            continue
        owners = {_resolve(root, c, lookup) for c in conjunct.find_all(exp.Column)}
        indexes = {o[0] if o is not None else None for o in owners}
        if len(indexes) == 1 and (index := indexes.pop()) is not None and index in bound and index in root.tables:
            found.setdefault(index, []).append(conjunct.unnest())
    out = {}
    for index, conjuncts in found.items():
        condition = exp.and_(*(c.copy() for c in conjuncts))
        for column in condition.find_all(exp.Column):
            column.set("table", None)
        out[index] = condition.sql(dialect=DIALECT)
    return out


def _partition_problem(root: _Scope, members: set[Ref], lookup: dict[str, set[str]]) -> str | None:
    """Why the rows of a derived table's SELECT (``root``) are not each made of one key's
    rows of the class ``members``: a DISTINCT, window, LIMIT, or grouping without a column
    of the class (a group would gather several keys' rows); else None."""
    select = root.select
    if select.args.get("distinct") or any(select.find_all(exp.Window)):
        return "a derived table with DISTINCT or a window function"
    if select.args.get("limit") or select.args.get("offset"):
        return "a derived table with LIMIT"
    group = select.args.get("group")
    if group is None:
        if any(is_aggregate(node) for item in select.expressions for node in item.walk()):
            return "a derived table aggregating all its rows"
        return None
    for item in group.expressions:
        if isinstance(item, exp.Column) and _resolve(root, item, lookup) in members:
            return None
    return "a derived table grouped by no column of its correlation key"


class _Refused(Exception):
    """A shape the technique does not take (its message says which)."""


def _table_refs(query: exp.Expr) -> list[exp.Table]:
    """The base table references of ``query`` in the order of
    :func:`~sparkmv.analysis.query.table_occurrences` (no CTEs: refused before)."""
    return [t for t in query.find_all(exp.Table) if not isinstance(t.this, exp.Func) and t.name]


def _scope(select: exp.Select, parent: _Scope | None, refs: dict[int, int]) -> _Scope:
    """The scope of ``select``: its sources must be base tables joined inner, its subqueries
    WHERE conjuncts."""
    scope = _Scope(select, parent)
    sources = [select.args.get("from_") or select.args.get("from"), *(select.args.get("joins") or [])]
    for source in sources:
        if source is None:
            continue
        table = source.this
        if not isinstance(table, exp.Table) or isinstance(table.this, exp.Func):
            raise _Refused("a derived table")
        if isinstance(source, exp.Join):
            # An outer join keeps a key's rows apart too: a row matches or is NULL-extended
            # by rows of its own key only (the ON equality), so its ON binds as an inner one.
            if (
                source.kind.upper() not in ("", "INNER", "CROSS", "OUTER")
                or source.args.get("using")
                or source.args.get("method")
            ):
                raise _Refused("a semi-, anti-, NATURAL or USING join")
            on = source.args.get("on")
            scope.equalities += _equalities(on) if on is not None else []
        try:
            scope.tables[refs[id(table)]] = table_name(table).qualified.lower()
        except SparkMvError as exc:
            raise _Refused(str(exc)) from exc
        scope.aliases[(table.alias or table.name).lower()] = refs[id(table)]
    where = select.args.get("where")
    scope.equalities += _equalities(where.this) if where is not None else []
    for predicate in predicates(select):
        body = subquery_body(predicate)
        conjunct = conjunct_of(predicate)
        holder = conjunct.find_ancestor(exp.Where, exp.Having) if conjunct is not None else None
        if not isinstance(holder, exp.Where) or holder.parent is not select or not isinstance(body, exp.Select):
            raise _Refused("a subquery outside a WHERE conjunct")
        scope.children.append(_scope(body, scope, refs))
    return scope


def _equalities(condition: exp.Expr) -> list[tuple[exp.Column, exp.Column]]:
    """The ``a = b`` conjuncts of ``condition`` (top-level AND only) between two columns."""
    out = []
    for conjunct in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        node = conjunct.unnest()
        if isinstance(node, exp.EQ) and isinstance(node.this, exp.Column) and isinstance(node.expression, exp.Column):
            out.append((node.this, node.expression))
    return out


def _resolved(scope: _Scope, known: dict[str, set[str]]) -> list[tuple[Ref, Ref]]:
    """``scope``'s equalities with both columns resolved to a reference (of this scope or
    an enclosing one); a column not resolved drops its equality."""
    out = []
    for left, right in scope.equalities:
        a, b = _resolve(scope, left, known), _resolve(scope, right, known)
        if a is not None and b is not None:
            out.append((a, b))
    return out


def _resolve(scope: _Scope | None, column: exp.Column, known: dict[str, set[str]]) -> Ref | None:
    """The reference ``column`` reads: by its qualifier, innermost scope first; unqualified,
    the one source of the innermost scope that has a column of its name (by ``known``)."""
    name = column.name.lower()
    while scope is not None:
        if column.table:
            index = scope.aliases.get(column.table.lower())
            if index is not None:
                return (index, name)
        else:
            owners = [i for i, t in scope.tables.items() if name in known.get(t, set())]
            if len(owners) == 1:
                return (owners[0], name)
            if owners:
                return None
        scope = scope.parent
    return None


def _outer_columns(root: _Scope, resolved: dict[int, list[tuple[Ref, Ref]]]) -> list[Ref]:
    """The outer SELECT's columns in any resolved equality (candidates for the key), in
    order of first appearance."""
    seen: list[Ref] = []
    for scope in root.walk():
        for pair in resolved[id(scope)]:
            for ref in pair:
                if ref[0] in root.tables and ref not in seen:
                    seen.append(ref)
    return seen


def _outer_class(root: _Scope, equalities: list[tuple[Ref, Ref]], start: Ref) -> set[Ref]:
    """The columns of the outer SELECT equated with ``start`` by its own conjuncts."""
    members, changed = {start}, True
    while changed:
        changed = False
        for a, b in equalities:
            if (a in members) != (b in members):
                members |= {a, b}
                changed = True
    return members


def _bind_children(
    scope: _Scope, visible: set[Ref], bound: dict[int, str], resolved: dict[int, list[tuple[Ref, Ref]]]
) -> bool:
    """Bind the references of ``scope``'s subqueries (recursively) equated with a column
    in ``visible``; True when one was bound."""
    found = False
    for child in scope.children:
        own, changed = set(visible), True
        while changed:
            changed = False
            for a, b in resolved[id(child)]:
                for x, y in ((a, b), (b, a)):
                    if x in own and y[0] in child.tables and y[0] not in bound:
                        bound[y[0]] = y[1]
                        own.add(y)
                        changed = found = True
        found = _bind_children(child, own, bound, resolved) or found
    return found


def correlated_analysis(
    query: exp.Query,
    known: Known | None,
    analyze_whole: Callable[[exp.Query], IvmAnalysis],
    augment: Callable[[exp.Select, tuple[OutputColumn, ...]], str],
) -> IvmAnalysis | None:
    """The analysis of ``query`` (its columns qualified by ``known``) maintained through a
    correlation key: the delta rules' aggregate columns and state columns of the query with
    its subquery conjuncts left out (``analyze_whole`` of it must maintain it as a linear
    aggregate, no MIN / MAX: their retractions need their groups recomputed), the query's
    own SQL with those state columns appended (``augment``), and its :class:`CorrelatedPlan`;
    None when either does not hold (or without ``known``, which tells a correlation's sides).
    """
    from sparkmv.analysis.qualify import qualify_unqualified

    if not known or not isinstance(query, exp.Select):
        return None
    if not predicates(query) and single_derived(query) is None:
        return None
    qualified = qualify_unqualified(query, known)
    if not isinstance(qualified, exp.Select):
        return None
    linear = analyze_whole(_linear_layer(qualified))
    if linear.reason is not None or linear.keyed is not None or linear.stages or not linear.aggregate:
        return None
    if any(c.role in ("min", "max") for c in linear.columns):
        return None
    plan = correlated_plan(qualified, known)
    if isinstance(plan, str):
        return None
    augmented = augment(qualified, linear.columns)
    return IvmAnalysis(None, True, linear.columns, linear.state_columns, augmented, TECHNIQUE, correlated=plan)


def _linear_layer(select: exp.Select) -> exp.Select:
    """``select`` as the delta rules see the layer above the key's rows: its subquery
    conjuncts left out, or its one derived table read as a base table (:data:`DERIVED`)."""
    from sparkmv.analysis.subqueries import without_subqueries

    derived = single_derived(select)
    if derived is None:
        stripped = without_subqueries(select)
        assert isinstance(stripped, exp.Select)
        return stripped
    copy = select.copy()
    source = copy.args.get("from_") or copy.args.get("from")
    assert source is not None  # a derived table was found in it
    alias = source.this.alias or DERIVED
    source.this.replace(exp.alias_(exp.to_table(DERIVED), alias, table=True))
    return copy


def used_columns(query: exp.Expr) -> set[str] | None:
    """The names (lower case) of every column ``query`` reads, a superset of each base
    table's columns it needs; None when a SELECT other than an ``EXISTS`` body projects
    ``*`` (every column is then needed).

    >>> from sparkmv.analysis.query import parse_query
    >>> sorted(used_columns(parse_query(
    ...     "SELECT a.x, count(*) AS n FROM a WHERE EXISTS (SELECT * FROM b WHERE b.y = a.x) GROUP BY a.x")))
    ['x', 'y']
    >>> used_columns(parse_query("SELECT n FROM (SELECT t.* FROM t) AS d")) is None
    True
    """
    for select in query.find_all(exp.Select):
        if isinstance(select.parent, exp.Exists):
            continue
        for item in select.expressions:
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                return None
    return {c.name.lower() for c in query.find_all(exp.Column) if not isinstance(c.this, exp.Star)}


def correlation_lines(plan: CorrelatedPlan) -> list[str]:
    """EXPLAIN REFRESH's lines of a correlation key: the references it binds, and those
    whose table must not change for it to apply.

    >>> print("\\n".join(correlation_lines(CorrelatedPlan("o.k", ("k", None), ("d.o", "d.s")))))
      recomputes the rows of the correlation key (o.k) touched by the change, new minus old:
        d.o bound by k
        d.s bound by no key (a change of it recomputes the touched groups)
    """
    lines = [f"  recomputes the rows of the correlation key ({plan.key}) touched by the change, new minus old:"]
    filters = plan.filters or (None,) * len(plan.tables)
    for table, column, condition in zip(plan.tables, plan.bound, filters, strict=True):
        if column is None:
            lines.append(f"    {table} bound by no key (a change of it recomputes the touched groups)")
        elif condition is not None:
            lines.append(
                f"    {table} bound by {column}; when it is unchanged, only the touched keys its rows "
                f"passing {condition} hold are recomputed"
            )
        else:
            lines.append(f"    {table} bound by {column}")
    return lines
