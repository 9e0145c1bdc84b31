"""The dataset graph: which dataset reads which, cycles, dependency order, and each
materialized view's query with the temporary views it reads inlined.

Edges come from the tables a SQL query names (sqlglot, Spark dialect; CTE names excluded) and,
for a Python dataset, from the tables its DataFrame's analyzed plan reads (given by the
caller). A name without a database is read in the spec's database, as SDP resolves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import REFRESHED_KINDS, TEMPORARY_VIEW, Dataset, PipelineDefinitionError


@dataclass
class Graph:
    """Datasets by name, and per dataset the project datasets it reads (``inputs``) and
    every table it reads (``reads``: project datasets and outside tables)."""

    datasets: dict[ObjectName, Dataset]
    inputs: dict[ObjectName, list[ObjectName]] = field(default_factory=dict)
    reads: dict[ObjectName, list[ObjectName]] = field(default_factory=dict)

    def order(self) -> list[ObjectName]:
        """Every dataset after the ones it reads (stable: definition order otherwise).

        Raises:
            PipelineDefinitionError: ``<file>: cycle in the dataset graph: a -> b -> a``.
        """
        done: list[ObjectName] = []
        state: dict[ObjectName, int] = {}  # 1 visiting, 2 done

        def visit(name: ObjectName, path: list[ObjectName]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = [*path[path.index(name) :], name]
                text = " -> ".join(n.display for n in cycle)
                raise PipelineDefinitionError(f"{self.datasets[name].file}: cycle in the dataset graph: {text}")
            state[name] = 1
            for dep in self.inputs.get(name, []):
                visit(dep, [*path, name])
            state[name] = 2
            done.append(name)

        for name in self.datasets:
            visit(name, [])
        return done

    def downstream(self, name: ObjectName) -> set[ObjectName]:
        """The datasets that read ``name``, directly or through others."""
        out: set[ObjectName] = set()
        frontier = [name]
        while frontier:
            current = frontier.pop()
            for other, deps in self.inputs.items():
                if current in deps and other not in out:
                    out.add(other)
                    frontier.append(other)
        return out


def build_graph(datasets: list[Dataset], namespace: str) -> Graph:
    """The graph of ``datasets`` (SQL ones' edges from their queries).

    Raises:
        PipelineDefinitionError: a name defined twice (naming both places).
    """
    by_name: dict[ObjectName, Dataset] = {}
    for ds in datasets:
        if ds.name in by_name:
            raise PipelineDefinitionError(
                f"{ds.where}: dataset {ds.name.display} is already defined at {by_name[ds.name].where}"
            )
        by_name[ds.name] = ds
    graph = Graph(by_name)
    for ds in datasets:
        if ds.query is not None:
            reads = tables_read(ds.query, namespace)
            graph.reads[ds.name] = reads
            graph.inputs[ds.name] = [n for n in reads if n in by_name]
        elif ds.auto_cdc is not None:  # an AUTO CDC flow reads its source
            graph.inputs[ds.name] = [n for n in [ds.auto_cdc.source] if n in by_name]
    return graph


def tables_read(query: str, namespace: str) -> list[ObjectName]:
    """The tables ``query`` names (without CTE names), each once, in order."""
    tree = parse_query(query)
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: list[ObjectName] = []
    for table in tree.find_all(exp.Table):
        name = _table_name(table, namespace)
        if name is None or (not table.db and table.name.lower() in ctes):
            continue
        if name not in out:
            out.append(name)
    return out


def _table_name(table: exp.Table, namespace: str) -> ObjectName | None:
    if not table.name:
        return None
    return ObjectName(
        (table.db or namespace).lower(), table.name.lower(), table.catalog.lower() if table.catalog else ""
    )


def resolved_query(graph: Graph, name: ObjectName, namespace: str) -> str:
    """The query of materialized view (or streaming table) ``name`` as sparkmv stores it: every temporary view it
    reads (directly or through other temporary views) inlined as a derived table under the
    name it was read by, and every table name qualified with the spec's database when that
    is not ``default``.

    Raises:
        PipelineDefinitionError: a temporary view defined in Python (its DataFrame has no SQL
            text to inline).
    """
    ds = graph.datasets[name]
    assert ds.query is not None and ds.kind in REFRESHED_KINDS
    return inlined(graph, ds.query, namespace)


def inlined(graph: Graph, query: str, namespace: str) -> str:
    """``query`` with the temporary views of ``graph`` it reads inlined and its table names
    qualified, as :func:`resolved_query` does for a dataset's own query (a flow's, say).

    Raises:
        PipelineDefinitionError: a temporary view defined in Python.
    """
    return _inline(graph, parse_query(query), namespace).sql(dialect=DIALECT)


def _inline(graph: Graph, tree: exp.Query, namespace: str) -> exp.Query:
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        if not table.db and table.name.lower() in ctes:
            continue
        name = _table_name(table, namespace)
        view = graph.datasets.get(name) if name is not None else None
        if view is not None and view.kind == TEMPORARY_VIEW:
            if view.query is None:
                raise PipelineDefinitionError(
                    f"{view.where}: temporary view {view.name.display} is defined in Python: "
                    "a SQL materialized view cannot inline it"
                )
            inner = _inline(graph, parse_query(view.query), namespace)
            alias = table.alias or table.name
            table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(alias))))
        elif name is not None and not table.db and namespace != "default":
            table.set("db", exp.to_identifier(namespace))
    return tree
