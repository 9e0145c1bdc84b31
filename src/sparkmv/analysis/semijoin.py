"""Semi-join reduction of a delta term: which columns of the other base tables an inner
equi-join ties to the changed table's columns (pure: sqlglot only).

A delta term ``T1 ⋈ .. ⋈ ΔTi ⋈ .. ⋈ Tn`` keeps only rows of ``Tj`` whose join column
``Tj.y`` equals ``Ti.x`` of some row of ``ΔTi`` when an inner join equates them (directly,
``a.x = b.y``, or through an equality class: ``a.x = c.z AND c.z = b.y``); so ``Tj`` may be
filtered by the values of ``ΔTi.x`` first (NULL keys never match an equi-join). This is the
semi-join reduction of Bernstein and Chiu (1981), as used by incremental view maintenance
engines (DBToaster, Materialize's delta joins) to make a term's cost follow the change.

Sound only where the filter cannot change the term's result, so :func:`reductions` demands:
the changed table and the target are each read by exactly one reference of the query, both
in the FROM / JOIN list of one SELECT whose joins are all inner (or cross / comma), and the
equating conjuncts are top-level ``AND`` conjuncts of that SELECT's WHERE or of its joins'
ON; both columns have the same type. Filtering such a SELECT's input by a condition every
output row meets leaves its output unchanged, whatever query surrounds it.

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT * FROM o JOIN l ON l_ok = o_ok JOIN c ON c_ck = o_ck WHERE c_ck = l_x")
>>> cols = {ObjectName("default", "o"): {"o_ok": "long", "o_ck": "long"},
...         ObjectName("default", "l"): {"l_ok": "long", "l_x": "long"},
...         ObjectName("default", "c"): {"c_ck": "long"}}
>>> [(str(r.target), r.column, r.source) for r in reductions(q, ObjectName("default", "l"), cols)]
[('c', 'c_ck', 'l_x'), ('o', 'o_ck', 'l_x'), ('o', 'o_ok', 'l_ok')]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from sparkmv.analysis.query import table_name
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName

INTEGER_TYPES = frozenset({"long", "integer", "short", "byte"})
"""Spark JSON types of a join column whose values and Iceberg bounds compare exactly as Python
ints: a reduction by one of them prunes the target's files by its range (the refresh layer's
``pruned.known_range`` and ``pruned.files_within``)."""
INNER_KINDS = ("", "INNER", "CROSS")
"""Join kinds (sqlglot's ``kind``, with no ``side``) a reduction may cross."""


@dataclass(frozen=True)
class Reduction:
    """One semi-join reduction of a delta term.

    Attributes:
        target: the base table filtered.
        column: its column (lower case) kept to the values of ``source``.
        source: the changed table's column (lower case) whose delta values are collected.
    """

    target: ObjectName
    column: str
    source: str


def reductions(
    query: exp.Query, changed: ObjectName, columns: Mapping[ObjectName, Mapping[str, object]]
) -> list[Reduction]:
    """The semi-join reductions of the delta term of ``changed`` in ``query``, sorted.

    Args:
        query: the term's query (base tables by their names, not yet bound to views).
        changed: the base table read as its delta.
        columns: base table -> its column (lower case) -> type (any comparable form, as
            Spark's JSON type); tables missing here are never targets.

    Returns an empty list when nothing qualifies (see the module's conditions).
    """
    refs = _refs(query, columns)
    mine = [t for t, n in refs if n == changed]
    if len(mine) != 1:
        return []
    select = _select_of(mine[0])
    if select is None or not _inner_only(select):
        return []
    counts: dict[ObjectName, int] = {}
    for _, name in refs:
        counts[name] = counts.get(name, 0) + 1
    aliases = {
        t.alias_or_name.lower(): n for t, n in refs if counts[n] == 1 and _select_of(t) is select and n in columns
    }
    classes = _classes(select, aliases, columns)
    me = mine[0].alias_or_name.lower()
    found: set[Reduction] = set()
    for members in classes:
        sources = sorted(c for a, c in members if a == me)
        for alias, column in members:
            if alias == me or not sources:
                continue
            target = aliases[alias]
            kind = columns[target][column]
            same = [s for s in sources if columns[changed][s] == kind]
            if same:
                found.add(Reduction(target, column, same[0]))
    return sorted(found, key=lambda r: (str(r.target), r.column, r.source))


def _refs(query: exp.Query, columns: Mapping[ObjectName, Mapping[str, object]]) -> list[tuple[exp.Table, ObjectName]]:
    """Every base table reference of ``query`` with its name (CTE names and table-valued
    functions left out; a name that does not parse is left out too)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    out = []
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Func) or not table.name:
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        try:
            out.append((table, table_name(table)))
        except AnalysisError:
            continue
    return out


def _select_of(table: exp.Table) -> exp.Select | None:
    """The SELECT whose FROM or JOIN list holds ``table`` directly; None otherwise."""
    parent = table.parent
    if isinstance(parent, (exp.From, exp.Join)) and isinstance(parent.parent, exp.Select):
        return parent.parent
    return None


def _inner_only(select: exp.Select) -> bool:
    """True when every join of ``select`` is inner, cross or comma (none outer, semi, anti,
    lateral or USING)."""
    for join in select.args.get("joins") or []:
        if join.side or (join.kind or "").upper() not in INNER_KINDS or join.args.get("using"):
            return False
        if not isinstance(join.this, (exp.Table, exp.Subquery)):
            return False
    return True


def _conjuncts(select: exp.Select) -> list[exp.Expr]:
    conditions = []
    where = select.args.get("where")
    if where is not None:
        conditions.append(where.this)
    conditions += [j.args["on"] for j in select.args.get("joins") or [] if j.args.get("on") is not None]
    out: list[exp.Expr] = []
    for cond in conditions:
        out += list(cond.flatten()) if isinstance(cond, exp.And) else [cond]
    return out


def _classes(
    select: exp.Select, aliases: Mapping[str, ObjectName], columns: Mapping[ObjectName, Mapping[str, object]]
) -> list[set[tuple[str, str]]]:
    """The equality classes of (alias, column) of the base table references ``aliases``
    that ``select``'s equi-join conjuncts form (classes of one member left out)."""
    sources = _source_names(select, columns)
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for cond in _conjuncts(select):
        if not isinstance(cond, exp.EQ):
            continue
        left = _resolve(cond.this, sources, aliases)
        right = _resolve(cond.expression, sources, aliases)
        if left is not None and right is not None and left != right:
            parent[find(left)] = find(right)
    groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for member in list(parent):
        groups.setdefault(find(member), set()).add(member)
    return [g for g in groups.values() if len(g) > 1]


def _source_names(select: exp.Select, columns: Mapping[ObjectName, Mapping[str, object]]) -> dict[str, set[str] | None]:
    """Alias (lower case) -> its column names (lower case) of every source in ``select``'s
    FROM / JOIN list; None when unknown (a subquery with ``*``, a table without columns)."""
    out: dict[str, set[str] | None] = {}
    froms = [select.args.get("from_") or select.args.get("from"), *(select.args.get("joins") or [])]
    for node in froms:
        source = node.this if node is not None else None
        if source is None:
            continue
        alias = source.alias_or_name.lower()
        known: set[str] | None = None
        if isinstance(source, exp.Table) and not isinstance(source.this, exp.Func):
            try:
                found = columns.get(table_name(source))
            except AnalysisError:
                found = None
            known = None if found is None else set(found)
        elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
            if not any(e.is_star for e in source.this.expressions):
                known = {n.lower() for n in source.this.named_selects}
        out[alias] = known
    return out


def _resolve(
    node: exp.Expr,
    sources: Mapping[str, set[str] | None],
    aliases: Mapping[str, ObjectName],
) -> tuple[str, str] | None:
    """(alias, column) of a column reference to one of ``aliases``; None for anything
    else, or a column that is ambiguous or may belong to another source."""
    if not isinstance(node, exp.Column) or not node.name:
        return None
    name = node.name.lower()
    if node.table:
        alias = node.table.lower()
        known = sources.get(alias)
        return (alias, name) if alias in aliases and known is not None and name in known else None
    holders = []
    for alias, known in sources.items():
        if known is None:
            return None  # the column may be this source's
        if name in known:
            holders.append(alias)
    return (holders[0], name) if len(holders) == 1 and holders[0] in aliases else None
