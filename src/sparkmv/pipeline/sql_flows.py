"""SQL flows of a streaming table folded once their sources' schemas are known.

A streaming table with several SQL flows of which one selects ``*`` (or an unnamed
expression), or whose flows name different columns, cannot be folded from the definitions
alone (:func:`sparkmv.pipeline.flows.union_by_name` keeps its flows in
``Dataset.flow_queries``). When the run reaches the table (its inputs built), Spark analyses
each flow's query over empty inputs, and the flows' columns are merged as Spark's SDP infers a
streaming table's schema from its flows (``SchemaMergingUtils.mergeSchemas``, i.e.
``StructType.merge``): matched by name, case-insensitively; the table's columns are the first
flow's, then each later flow's new ones, in definition order; a column a flow does not give is
NULL in its rows (as Spark's SDP writes them); a column two flows give with different types is
refused (``UNABLE_TO_INFER_PIPELINE_TABLE_SCHEMA``; nullability may differ).

Each flow becomes one branch of a ``UNION ALL`` with its columns in the table's order: a plain
SELECT with one ``*`` (``t.*`` in a join) has it expanded to the columns it gives, so the
stored query reads its tables directly (incremental refreshes treat it like named columns);
any other flow is read as a derived table (``SELECT ... FROM (flow) AS __smv_flow``). A change
of a source's columns changes the stored query: the run then builds the table again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.errors import SparkMvError
from sparkmv.pipeline.flow_schema import merged_columns
from sparkmv.pipeline.model import Dataset
from sparkmv.pipeline.sql_run import ensure_paths, stored_text

if TYPE_CHECKING:
    from sparkmv.client.client import Client
    from sparkmv.pipeline.project import Project

FLOW_ALIAS = "__smv_flow"
"""The derived table a flow that cannot be expanded is read from."""
_NOT_EXPANDED = ("with", "group", "having", "order", "limit", "offset", "distinct", "qualify", "laterals", "windows")
"""SELECT clauses under which a flow is read as a derived table (ordinals, DISTINCT,
generators: reordering or expanding its select list could change it)."""

Columns = list[tuple[str, Any]]  # (name as first written, Spark DataType)


def fold_sql_flows(client: Client, project: Project, table: Dataset) -> str:
    """The query sparkmv stores for streaming table ``table`` with ``flow_queries`` (rules in
    the module docstring); its path references' tables are created first.

    Raises:
        SparkMvError: ``<file>:<line>: flow <name>: ...`` for a flow Spark cannot analyse,
            and as :func:`sparkmv.pipeline.flow_schema.merged_columns` raises.
    """
    from sparkmv.refresh.analyze import run_select

    ensure_paths(client, project, table)
    flows: list[tuple[Dataset, exp.Query, list[Any]]] = []
    for flow in table.flow_queries:
        text = stored_text(project, flow.query or "", table.name.namespace)
        try:
            fields = list(run_select(client.runtime, text, schema_only=True).schema.fields)
        except SparkMvError as exc:
            raise SparkMvError(f"{flow.where}: flow {flow.name.name}: {exc}") from exc
        flows.append((flow, parse_query(text), fields))
    given = [(f.where, f.name.name, fields) for f, _, fields in flows]
    columns = [(c.name, c.data_type) for c in merged_columns(table.name.display, given)]
    branches = [_branch(query, fields, columns) for _, query, fields in flows]
    union: exp.Query = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False, dialect=DIALECT)
    return union.sql(DIALECT)


def _branch(query: exp.Query, fields: list[Any], columns: Columns) -> exp.Select:
    """One flow's SELECT giving ``columns`` in order (a column it lacks as a typed NULL)."""
    items = _expanded(query, fields)
    if items is None:
        items = [exp.column(exp.to_identifier(f.name, quoted=True)) for f in fields]
        select = exp.select("*").from_(
            exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(FLOW_ALIAS)))
        )
    else:
        assert isinstance(query, exp.Select)
        select = query
    given = {f.name.lower(): (f.name, item) for f, item in zip(fields, items, strict=True)}
    out: list[exp.Expr] = []
    for name, kind in columns:
        if name.lower() not in given:
            null = exp.cast(exp.null(), exp.DataType.build(kind.simpleString(), dialect=DIALECT))
            out.append(exp.alias_(null, name, quoted=True))
            continue
        spark_name, item = given[name.lower()]
        out.append(item if spark_name == name and item.alias_or_name == name else _renamed(item, name))
    select.set("expressions", out)
    return select


def _renamed(item: exp.Expr, name: str) -> exp.Expr:
    return exp.alias_(item.unalias() if isinstance(item, exp.Alias) else item, name, quoted=True)


def _expanded(query: exp.Query, fields: list[Any]) -> list[exp.Expression] | None:
    """``query``'s select items, one per output field, its one ``*`` (or ``t.*``) expanded to
    the columns it gives; None when the flow is to be read as a derived table (not a plain
    SELECT, several stars, a bare ``*`` over a join, items and fields not matching)."""
    if not isinstance(query, exp.Select) or any(query.args.get(k) for k in _NOT_EXPANDED):
        return None
    items = list(query.expressions)
    stars = [i for i, item in enumerate(items) if _star_of(item) is not None]
    if not stars:
        return items if len(items) == len(fields) else None
    at, width = stars[0], len(fields) - (len(items) - 1)
    star = _star_of(items[at])
    qualifier = items[at].args.get("table") if isinstance(items[at], exp.Column) else None
    if (
        len(stars) > 1
        or width < 0
        or star is None
        or star.args.get("replace")
        or (not qualifier and query.args.get("joins"))
    ):
        return None
    names = [f.name for f in fields[at : at + width]]
    expanded = [
        exp.column(exp.to_identifier(n, quoted=True), table=qualifier.copy() if qualifier else None) for n in names
    ]
    return [*items[:at], *expanded, *items[at + 1 :]]


def _star_of(item: exp.Expression) -> exp.Star | None:
    """The ``*`` of a select item ``*`` / ``t.*`` (with ``EXCEPT`` / ``REPLACE``), else None."""
    if isinstance(item, exp.Star):
        return item
    if isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
        return item.this
    return None
