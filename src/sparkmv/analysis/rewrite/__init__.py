r"""Query rewrite: answering a query (or its subqueries) from materialized views.

Pure analysis (sqlglot, no Spark): :func:`rewrite_query` takes a SELECT, the candidate MVs
(:class:`MvCandidate`, already filtered for freshness by the caller) and the schemas of the
base tables, and returns a :class:`RewriteResult`: the rewritten Spark SQL reading the MVs
(hidden state columns included), the MVs used with the kind of rewrite, and for every
candidate not used, why. Classes, tried on each SELECT of the query from the outermost:

* exact match: the same tables, joins, predicates and (for aggregates) group keys, up to
  aliases, column order and the order of commutative predicates and joins;
* predicate compensation: the query's predicates imply the MV's; the rest is applied on the
  MV's columns;
* aggregate rollup: the query groups by expressions of a subset of the MV's keys; its
  aggregates are derived (:mod:`sparkmv.analysis.rewrite.derive`); HAVING, ORDER BY and
  LIMIT are kept on top;
* partition compensation: a candidate with :attr:`MvCandidate.stale` partitions is read as
  its fresh partitions UNION ALL the stale ones computed from the base
  (:mod:`sparkmv.analysis.rewrite.union`), under any of the classes above.

>>> from sparkmv.names import ObjectName
>>> li = ObjectName("default", "li")
>>> mv = MvCandidate(ObjectName("default", "by_mode"),
...     "SELECT mode, day, sum(qty) AS q FROM li GROUP BY mode, day",
...     (("mode", "string"), ("day", "date"), ("q", "bigint"), ("__smv_count", "bigint"), ("__smv_nn_2", "bigint")))
>>> schema = {li: {"mode": "string", "day": "date", "qty": "int"}}
>>> r = rewrite_query("SELECT mode, sum(qty) FROM li GROUP BY mode", [mv], schema)
>>> print(r.sql.replace(" FROM", "\nFROM"))
SELECT default__by_mode.mode AS mode, CAST(SUM(default__by_mode.q) AS BIGINT) AS `sum(qty)`
FROM default.by_mode AS default__by_mode GROUP BY default__by_mode.mode
>>> r.used[0].kind, r.used[0].detail
('aggregate rollup', 'grouping by mode')
>>> rewrite_query("SELECT qty FROM li", [mv], schema).reasons
['by_mode: it aggregates, the query does not']
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query, referenced_tables
from sparkmv.analysis.rewrite.derive import NoMatch, describe
from sparkmv.analysis.rewrite.match import COMPENSATION, EXACT, ROLLUP, Match, match_block
from sparkmv.analysis.rewrite.normalize import Schema, qualify_query, select_block
from sparkmv.analysis.rewrite.shape import MvCandidate, MvShape, mv_shape
from sparkmv.analysis.rewrite.union import BaseFilter, StalePartitions
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName

__all__ = [
    "COMPENSATION",
    "EXACT",
    "ROLLUP",
    "BaseFilter",
    "MvCandidate",
    "RewriteResult",
    "StalePartitions",
    "UsedMv",
    "rewrite_query",
]
_KIND_ORDER = {EXACT: 0, COMPENSATION: 1, ROLLUP: 2}


@dataclass(frozen=True)
class UsedMv:
    """An MV a rewrite reads: its name, the kind of rewrite and details (``grouping by
    l_shipmode; compensating l_shipmonth >= '1995-01'``), and its partition compensation."""

    name: ObjectName
    kind: str
    detail: str
    select: exp.Select | None = field(default=None, repr=False, compare=False)
    compensation: str = ""
    """With stale partitions computed from the base: ``3 stale partitions and consistency
    CHECKED: compensated from base``; else empty."""

    def __str__(self) -> str:
        return f"{self.name.display}: {self.kind}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class RewriteResult:
    """The outcome of query rewrite.

    Attributes:
        sql: the SQL to run: the rewritten query over the MVs, or the query as given when
            no MV is used.
        original_sql: the query as given.
        used: the MVs the rewritten query reads, in the order of the query's blocks.
        rejected: (MV, reason) of each candidate not used, in candidate order.
    """

    sql: str
    original_sql: str
    used: tuple[UsedMv, ...] = ()
    rejected: tuple[tuple[ObjectName, str], ...] = ()

    @property
    def rewritten(self) -> bool:
        """True when at least one MV is used."""
        return bool(self.used)

    @property
    def mvs(self) -> list[ObjectName]:
        """Names of the MVs used."""
        return [u.name for u in self.used]

    @property
    def compensations(self) -> list[str]:
        """``<mv>: <n> stale partitions and consistency CHECKED: compensated from base`` of
        each MV used with partition compensation."""
        return [f"{u.name.display}: {u.compensation}" for u in self.used if u.compensation]

    @property
    def reasons(self) -> list[str]:
        """``<mv>: <reason>`` of each rejected candidate."""
        return [f"{name.display}: {why}" for name, why in self.rejected]


def rewrite_query(
    sql: str,
    candidates: Sequence[MvCandidate],
    schema: Schema,
    rejected: Iterable[tuple[ObjectName, str]] = (),
) -> RewriteResult:
    """Rewrite SELECT ``sql`` over the ``candidates`` that can answer it.

    Args:
        schema: columns and Spark types of every base table of the query and candidates.
        rejected: candidates the caller already rejected (stale, inactive) with reasons;
            reported as given.

    Raises:
        ParseError: when ``sql`` is not one SELECT.
    """
    query = parse_query(sql)
    early = list(rejected)
    if not candidates:
        return RewriteResult(sql, sql, (), tuple(early))
    try:
        qualified = qualify_query(query, schema)
    except SparkMvError as exc:
        return RewriteResult(sql, sql, (), (*early, *((c.name, str(exc)) for c in candidates)))
    shapes = [_shape(c, _schema_key(c, schema)) for c in candidates]
    names = _top_names(query)
    used: list[UsedMv] = []
    reasons: dict[ObjectName, str] = {}
    root = qualified
    for select in list(root.find_all(exp.Select)):
        if select.root() is not root:
            continue  # inside a block already replaced
        chosen = _rewrite_block(select, shapes, reasons)
        if chosen is not None:
            used.append(chosen)
            if select is qualified:  # the whole query: replace() needs a parent
                assert chosen.select is not None
                qualified = chosen.select
    if not used:
        return RewriteResult(sql, sql, (), (*early, *_rejections(candidates, reasons, used)))
    _restore_names(qualified, names, {id(u.select) for u in used})
    rest = _rejections(candidates, reasons, used)
    return RewriteResult(qualified.sql(DIALECT), sql, tuple(used), (*early, *rest))


def _schema_key(candidate: MvCandidate, schema: Schema) -> tuple[tuple[ObjectName, tuple[tuple[str, str], ...]], ...]:
    try:
        tables = referenced_tables(parse_query(candidate.definition))
    except SparkMvError:
        return ()
    return tuple((t, tuple(schema[t].items())) for t in tables if t in schema)


@functools.lru_cache(maxsize=256)
def _shape(candidate: MvCandidate, schema: tuple[tuple[ObjectName, tuple[tuple[str, str], ...]], ...]) -> MvShape:
    return mv_shape(candidate, {t: dict(cols) for t, cols in schema})


def _rewrite_block(select: exp.Select, shapes: list[MvShape], reasons: dict[ObjectName, str]) -> UsedMv | None:
    """Replace ``select`` by its best rewrite over one MV; record why others do not fit."""
    block = select_block(select)
    if not block.tables:
        return None
    matches: list[tuple[MvShape, Match]] = []
    for shape in shapes:
        name = shape.candidate.name
        try:
            matches.append((shape, match_block(block, shape)))
        except NoMatch as exc:
            relevant = shape.block is None or bool(shape.block.tables & block.tables)
            if relevant or name not in reasons:
                reasons[name] = exc.reason
    if not matches:
        return None
    matches.sort(key=lambda m: (_rows(m[0]), _KIND_ORDER.get(m[1].kind, 9), m[0].candidate.name))
    best, match = matches[0]
    for shape, other in matches[1:]:
        reasons[shape.candidate.name] = f"usable ({other.kind}), but {best.candidate.name.display} has fewer rows"
    select.replace(match.select)
    stale = best.candidate.stale
    compensation = stale.describe() if stale is not None else ""
    return UsedMv(best.candidate.name, match.kind, match.detail, match.select, compensation)


def _rows(shape: MvShape) -> float:
    rows = shape.candidate.rows
    return float("inf") if rows is None else float(rows)


def _rejections(
    candidates: Sequence[MvCandidate], reasons: dict[ObjectName, str], used: list[UsedMv]
) -> list[tuple[ObjectName, str]]:
    taken = {u.name for u in used}
    out = []
    for c in candidates:
        if c.name not in taken:
            out.append((c.name, reasons.get(c.name, "the query reads none of its tables")))
    return out


def _top_selects(query: exp.Expr) -> list[exp.Select]:
    if isinstance(query, exp.Select):
        return [query]
    if isinstance(query, exp.Subquery):
        return _top_selects(query.this)
    if isinstance(query, exp.SetOperation):
        return _top_selects(query.left) + _top_selects(query.right)
    return []


def _top_names(query: exp.Query) -> list[list[str | None]]:
    """Per top-level SELECT, per item: None when it names itself (an alias or a column),
    else the name Spark would give it (best effort: ``sum(l_quantity)``, ``count(1)``)."""
    out = []
    for select in _top_selects(query):
        names: list[str | None] = []
        for item in select.expressions:
            if isinstance(item, exp.Alias | exp.Column | exp.Star):
                names.append(None)
                continue
            text = describe(item)
            names.append(text.replace("count(*)", "count(1)"))
        out.append(names)
    return out


def _restore_names(qualified: exp.Query, names: list[list[str | None]], rewritten: set[int]) -> None:
    """Give the top-level items the output names of the query as written: sqlglot aliased
    the unaliased ones ``_col_<i>``; Spark names them again where the item is unchanged."""
    for select, select_names in zip(_top_selects(qualified), names, strict=False):
        if len(select.expressions) != len(select_names):
            continue
        items = []
        for item, name in zip(select.expressions, select_names, strict=True):
            if name is not None and isinstance(item, exp.Alias):
                item = exp.alias_(item.this, name, quoted=True) if id(select) in rewritten else item.this
            items.append(item)
        select.set("expressions", items)
