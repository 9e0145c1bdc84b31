"""Outer joins under affected-key recomputation (:mod:`sparkmv.analysis.keyed`).

The keyed relation may join its sources (base tables, linear derived tables) with ``LEFT``,
``RIGHT`` and ``FULL [OUTER] JOIN ... ON``. The touched keys are still the delta rule of the
relation projected to its keys, telescoped over the table references; an outer join is not
linear in its null-supplying side, so each reference gets its own key queries.

For ``a ⟕θ b`` (left join, ``b`` null-supplying) the change of the result is:

- with the delta on ``a`` (the preserved side): ``Δa ⟕θ b``, the join kept as is (linear);
- with the delta on ``b``: the matched rows ``a ⋈θ Δb`` (the join made INNER), **plus** the
  NULL-padded rows of those same ``a`` rows, which may appear or disappear: the same inner
  join with every column of ``b`` replaced by NULL outside that join's ON condition (a key
  such as ``coalesce(b.x, 0)`` then gives the padded row's key).

``RIGHT`` is the mirror image; ``FULL`` is both: the delta side is kept preserved (``FULL``
becomes ``LEFT`` or ``RIGHT``) and the other side's padded rows are added. In a chain of
joins a padded row is itself a changed row of the next join, so a reference gets one key
query per combination of "matched" / "padded" over the outer joins above it whose other
side is preserved. Joins below the reference's source are unchanged (its input holds no delta).

A column's source must be known to replace it by NULL: qualified columns name their source,
an unqualified one is resolved when the relation has one source or one derived table
selecting that name; otherwise it is refused (analysis reads no catalog schema).

>>> from sparkmv.analysis.query import parse_query
>>> q = parse_query("SELECT c.k AS k, coalesce(o.x, 0) AS x FROM c LEFT JOIN o ON c.k = o.k AND o.x > 0")
>>> for sql, mask in outer_terms(q):
...     print(mask, sql)
(True, False) SELECT c.k AS k, COALESCE(o.x, 0) AS x FROM c LEFT JOIN o ON c.k = o.k AND o.x > 0
(False, True) SELECT c.k AS k, COALESCE(o.x, 0) AS x FROM c JOIN o ON c.k = o.k AND o.x > 0
(False, True) SELECT c.k AS k, COALESCE(NULL, 0) AS x FROM c JOIN o ON c.k = o.k AND o.x > 0
>>> outer_terms(parse_query("SELECT a FROM t LEFT JOIN u ON t.k = u.k"))
'a is not incrementally maintainable: a column beside an outer join must be qualified by its table'
"""

from __future__ import annotations

import itertools

from sqlglot import exp

from sparkmv.analysis.constructs import WHY_OUTER, is_inside, not_maintainable
from sparkmv.analysis.query import DIALECT

OUTER_SIDES = ("LEFT", "RIGHT", "FULL")
WHY_QUALIFY = "a column beside an outer join must be qualified by its table"
MAX_TERMS = 16  # key queries per table reference (2 per outer join above it)

# Per join kind, with the delta on its right ("right") or left ("left") input: the kind the
# matched rows are read with, and whether the other side's padded rows change too.
_THROUGH: dict[tuple[str, str], tuple[str, bool]] = {
    ("LEFT", "right"): ("", True),
    ("LEFT", "left"): ("LEFT", False),
    ("RIGHT", "right"): ("RIGHT", False),
    ("RIGHT", "left"): ("", True),
    ("FULL", "right"): ("RIGHT", True),
    ("FULL", "left"): ("LEFT", True),
}


def is_outer(join: exp.Join) -> bool:
    """True for a ``LEFT``, ``RIGHT`` or ``FULL [OUTER] JOIN`` (not SEMI / ANTI)."""
    return (join.side or "").upper() in OUTER_SIDES and (join.kind or "").upper() in ("", "OUTER")


def has_outer_join(select: exp.Expr) -> bool:
    """True when the SELECT's own FROM clause has an outer join."""
    return isinstance(select, exp.Select) and any(is_outer(j) for j in select.args.get("joins") or [])


def join_sources(select: exp.Select) -> tuple[list[exp.Expr], str | None]:
    """The sources of the keyed SELECT's FROM and joins (inner or outer with an ON
    condition), or the reason of its first other join (SEMI, ANTI, NATURAL, an outer join
    with USING) or LATERAL VIEW."""
    from_ = select.args.get("from_")
    sources = [from_.this] if from_ is not None else []
    for join in select.args.get("joins") or []:
        plain = not join.side and (join.kind or "").upper() not in ("SEMI", "ANTI", "OUTER")
        outer = is_outer(join) and join.args.get("on") is not None and not join.args.get("using")
        if join.args.get("method") or not (plain or outer):
            bare = join.copy()
            bare.set("on", None)
            bare.set("using", None)
            why = "an outer join is maintained with an ON condition only" if is_outer(join) else WHY_OUTER
            return [], not_maintainable(bare.sql(dialect=DIALECT, normalize_functions="lower").strip(), why)
        sources.append(join.this)
    for lateral in select.args.get("laterals") or []:
        return [], not_maintainable(lateral, "LATERAL VIEW is not maintained")
    return sources, None


def outer_terms(relation: exp.Select) -> list[tuple[str, tuple[bool, ...]]] | str:
    """The key queries of a keyed relation with outer joins (module docstring): per table
    reference ``i`` (in :func:`~sparkmv.analysis.query.table_occurrences` order), the SQL
    and a mask marking the references it is bound to the delta at (those of one source);
    the others are read new before and old after that reference (the delta rule). Empty
    when the relation has no outer join; the reason when a column cannot be resolved.

    ``relation`` is the key relation: select list the keys, no subquery predicates."""
    joins = relation.args.get("joins") or []
    if not any(is_outer(j) for j in joins):
        return []
    sources = [relation.args["from_"].this, *(j.this for j in joins)]
    aliases = [s.alias_or_name.lower() for s in sources]
    problem = _resolution_problem(relation, aliases, sources)
    if problem:
        return problem
    refs = [t for t in relation.find_all(exp.Table) if t.name]
    owner = [next(i for i, s in enumerate(sources) if t is s or is_inside(t, s)) for t in refs]
    terms = []
    for s in range(len(sources)):
        mask = tuple(o == s for o in owner)
        options = [_options(join, k, s) for k, join in enumerate(joins, 1)]
        combinations = list(itertools.product(*options))
        if len(combinations) > MAX_TERMS:
            return not_maintainable(relation.args["from_"], f"more than {MAX_TERMS} outer-join key queries")
        for choice in combinations:
            term = (_term(relation, choice, aliases, sources).sql(DIALECT), mask)
            terms += [] if term in terms else [term]  # a padded row may have the same key
    return terms


def _options(join: exp.Join, k: int, s: int) -> list[tuple[str | None, frozenset[int]]]:
    """The ways join ``k`` (1-based: its right input is source ``k``) is read for a delta
    in source ``s``: (its kind, or None to keep it; the sources made NULL above it)."""
    side = (join.side or "").upper()
    if not is_outer(join) or k < s:
        return [(None, frozenset())]
    kind, padded = _THROUGH[(side, "right" if k == s else "left")]
    nulled = frozenset({k}) if k == s else frozenset(range(k))
    return [(kind, frozenset()), *([("", nulled)] if padded else [])]


def _term(relation: exp.Select, choice: tuple, aliases: list[str], sources: list[exp.Expr]) -> exp.Select:
    """``relation`` with each join read as ``choice`` says, and the columns of the padded
    sources replaced by NULL above their join."""
    copy = relation.copy()
    joins = copy.args.get("joins") or []
    for k, (join, (kind, nulled)) in enumerate(zip(joins, choice, strict=True), 1):
        if kind is not None:
            join.set("side", kind or None)
            join.set("kind", None)
        if not nulled:
            continue
        above: list[exp.Expr | None] = [j.args.get("on") for j in joins[k:]]
        above += [copy.args.get("where"), *copy.expressions]
        for root in above:
            for column in list(root.find_all(exp.Column)) if root is not None else []:
                if _source_of(column, aliases, sources) in nulled:
                    column.replace(exp.Null())
    return copy


def _resolution_problem(relation: exp.Select, aliases: list[str], sources: list[exp.Expr]) -> str | None:
    """The reason when a column of the relation's own expressions has no known source."""
    if len(set(aliases)) < len(aliases):
        return not_maintainable(relation.args["from_"], "two sources of an outer join have the same name")
    roots: list[exp.Expr | None] = [j.args.get("on") for j in relation.args.get("joins") or []]
    roots += [relation.args.get("where"), *relation.expressions]
    for root in roots:
        for column in root.find_all(exp.Column) if root is not None else []:
            if _source_of(column, aliases, sources) is None:
                return not_maintainable(column, WHY_QUALIFY)
    return None


def _source_of(column: exp.Column, aliases: list[str], sources: list[exp.Expr]) -> int | None:
    """The position of the source ``column`` reads, or None when unknown."""
    if column.table:
        name = column.table.lower()
        return aliases.index(name) if name in aliases and not column.args.get("db") else None
    if len(sources) == 1:
        return 0
    having = [i for i, s in enumerate(sources) if column.name.lower() in _outputs(s)]
    bases = [s for s in sources if not isinstance(s, exp.Subquery)]
    return having[0] if len(having) == 1 and not bases else None


def _outputs(source: exp.Expr) -> set[str]:
    """The output column names of a derived table (empty for a base table)."""
    if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        return {e.alias_or_name.lower() for e in source.this.expressions}
    return set()
