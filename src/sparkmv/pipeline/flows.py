"""Streaming tables and their flows, folded into one query each.

In Spark Declarative Pipelines a streaming table is an append-only table that one or more
flows feed, each flow with the new rows of the tables it reads as ``STREAM(t)``, each row once.
sparkmv keeps a streaming table as a materialized view whose query is the ``UNION ALL`` of its
flows' queries (``STREAM(t)`` read as ``t``), refreshed like any MV (AUTO unless its
TBLPROPERTIES set ``refresh_mode``): after appends, AUTO's INCREMENTAL applies exactly the rows
appended to its sources since the positions it consumed (recorded with each run, as for any
MV), and appending them costs what was appended (the delta rules of a projection over appends
only append). Two deliberate differences from Spark's streaming execution, both from
sparkmv's first promise that a table equals its query:

- a delete or update in a source is applied (its rows retracted, or the table recomputed
  where the source keeps no change log), where Spark's streaming source ignores a deleted
  file or fails the flow;
- a table joined without ``STREAM`` (a stream-static join) is read as it is now: its changes
  update the joined rows, where a streaming join keeps what it joined at the time.

A streaming table fed by Python flows (``@dp.table``, ``@dp.append_flow``) keeps its flows as
they are (``Dataset.python_flows``): they run as Spark streams (:mod:`sparkmv.pipeline.python_stream`).
One table's flows are all SQL or all Python. A sink (``dp.create_sink``) is fed by Python
flows the same way (:mod:`sparkmv.pipeline.python_sinks`).

``INSERT INTO t BY NAME`` matches columns by name: when every flow of a table with several
flows is one SELECT naming the same set of columns, each flow's select list is put in the
first flow's order here; otherwise (a flow selecting ``*``, an unnamed expression, flows
naming different columns) the flows are folded when the run reaches the table, from their
sources' schemas (:mod:`sparkmv.pipeline.sql_flows`: a column missing from a flow is NULL in
its rows, as Spark's SDP merges the flows' schemas). Adding or changing a flow changes the
table's query: the run then builds the table again from its sources (``sparkmv.pipeline.run``).
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import FLOW, SINK, STREAMING_TABLE, Dataset, PipelineDefinitionError, PythonFlow


def fold_flows(datasets: list[Dataset]) -> list[Dataset]:
    """The datasets with every flow folded into its streaming table (``query`` the union of
    the flows' queries, ``flows`` their names); the flows themselves are left out.

    Raises:
        PipelineDefinitionError: ``<file>:<line>: ...`` for a flow writing to something that is
            not a streaming table of the pipeline, a flow name used twice, a streaming table
            with no flow, SQL and Python flows into one table, or a materialized view or
            temporary view reading ``STREAM(t)``.
    """
    tables = {d.name: d for d in datasets if d.kind in (STREAMING_TABLE, SINK)}
    fed: dict[ObjectName, list[Dataset]] = {name: [] for name in tables}
    seen: dict[ObjectName, Dataset] = {d.name: d for d in datasets if d.kind != FLOW}
    out: list[Dataset] = []
    for ds in datasets:
        if ds.kind != FLOW:
            if ds.streams and ds.kind != STREAMING_TABLE:
                stream = ds.streams[0].display
                raise PipelineDefinitionError(
                    f"{ds.where}: {ds.kind} {ds.name.display} reads STREAM({stream}): only a streaming "
                    f"table or a flow reads a stream (read {stream} without STREAM)"
                )
            out.append(ds)
            continue
        if ds.name in seen and not (ds.auto_cdc is not None and ds.name == ds.target):  # a default flow
            raise PipelineDefinitionError(
                f"{ds.where}: flow {ds.name.display} is already defined at {seen[ds.name].where}"
            )
        seen[ds.name] = ds
        assert ds.target is not None
        if ds.target not in tables:
            raise PipelineDefinitionError(
                f"{ds.where}: flow {ds.name.display} writes to {ds.target.display}, "
                "which is not a streaming table of the pipeline"
            )
        fed[ds.target].append(ds)
    for name, table in tables.items():
        if table.kind == SINK and not fed[name]:
            raise PipelineDefinitionError(
                f'{table.where}: sink {name.display} has no flow: give it @dp.append_flow(target="{name.name}")'
            )
        if table.auto_cdc is not None or any(f.auto_cdc is not None for f in fed[name]):
            _fold_auto_cdc(table, fed[name])
            continue
        if table.python_flows or any(f.function is not None for f in fed[name]):
            _fold_python(table, fed[name])
            continue
        flows = ([table] if table.query is not None else []) + fed[name]
        if not flows and table.file.suffix == ".py":
            raise PipelineDefinitionError(
                f"{table.where}: streaming table {name.display} has no flow: give it "
                f'@dp.append_flow(target="{name.name}")'
            )
        if not flows:
            raise PipelineDefinitionError(
                f"{table.where}: streaming table {name.display} has no flow: give it AS SELECT ..., or "
                f"CREATE FLOW ... AS INSERT INTO {name.display} BY NAME SELECT ..."
            )
        table.query = union_by_name(table, flows)
        table.flows = [f.name.name for f in flows]
        table.streams = [s for f in flows for s in f.streams]
    return out


def _fold_auto_cdc(table: Dataset, fed: list[Dataset]) -> None:
    """Give streaming table ``table`` its AUTO CDC flow (:mod:`sparkmv.pipeline.auto_cdc`).

    Raises:
        PipelineDefinitionError: another flow writes to the table too (Spark's
            AUTOCDC_MULTIPLE_FLOWS_TO_TARGET).
    """
    flows = ([table] if table.auto_cdc is not None or table.query or table.python_flows else []) + fed
    if len(flows) != 1:
        names = ", ".join(f.auto_cdc.name if f.auto_cdc is not None else f.name.name for f in flows)
        raise PipelineDefinitionError(
            f"{flows[-1].where}: Invalid AutoCDC destination {table.name.display} with multiple flows: {names}. "
            "An AutoCDC target table must have exactly one flow writing to it."
        )
    table.auto_cdc = flows[0].auto_cdc
    table.flows = [table.auto_cdc.name]
    table.streams = [table.auto_cdc.source]


def _fold_python(table: Dataset, fed: list[Dataset]) -> None:
    """Give streaming table ``table`` its Python flows: its own (``@dp.table``) first, then
    the ``@dp.append_flow`` ones, in definition order.

    Raises:
        PipelineDefinitionError: a SQL flow (or ``AS SELECT``) and a Python flow into one table.
    """
    sql = [f for f in ([table] if table.query is not None else []) + fed if f.function is None]
    if sql:
        python = next(f for f in [table, *fed] if f.function is not None)
        raise PipelineDefinitionError(
            f"{python.where}: {table.kind} {table.name.display} is fed by SQL ({sql[0].where}) and by Python "
            f"flow {python.name.display}: sparkmv runs the flows of one streaming table in one language"
        )
    table.python_flows = [
        *table.python_flows,
        *(PythonFlow(f.name.name, f.function, f.file, f.line) for f in fed if f.function),
    ]
    table.flows = [f.name for f in table.python_flows]


def union_by_name(table: Dataset, flows: list[Dataset]) -> str:
    """One query appending every flow's rows, columns matched by name (rules in the module
    docstring). When a flow of several is not one SELECT naming every column (``*``, an
    unnamed expression), or the flows name different sets of columns, the flows are kept in
    ``table.flow_queries`` and folded at run time (:mod:`sparkmv.pipeline.sql_flows`); the
    query returned then is their plain ``UNION ALL``, which reads the same tables (the graph's
    edges) but is not what is stored.
    """
    queries = [f.query or "" for f in flows]
    if len(flows) == 1:
        return queries[0]
    trees = [parse_query(q) for q in queries]
    named = [_named_select(t) for t in trees]
    order = [name for name, _ in named[0]] if named[0] is not None else []
    if any(items is None or sorted(n for n, _ in items) != sorted(order) for items in named):
        table.flow_queries = list(flows)
        return _union(trees).sql(DIALECT)
    for tree, items in zip(trees, named, strict=True):
        names = dict(items or [])
        tree.set("expressions", [names[n] for n in order])
    return _union(trees).sql(DIALECT)


def _union(queries: list[exp.Query]) -> exp.Query:
    union = queries[0]
    for query in queries[1:]:
        union = exp.union(union, query, distinct=False, dialect=DIALECT)
    return union


Named = list[tuple[str, exp.Expression]]


def _named_select(query: exp.Query) -> Named | None:
    """``query``'s (lower-case output name, item) pairs when it is one SELECT naming every
    column, else None."""
    if not isinstance(query, exp.Select):
        return None
    items: Named = []
    for item in query.expressions:
        name = item.alias_or_name
        if isinstance(item, exp.Star) or isinstance(item.unalias(), exp.Star) or not name or name == "*":
            return None
        items.append((name.lower(), item))
    return items
