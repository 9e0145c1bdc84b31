"""A pipeline project loaded: the spec, every definition, the graph, in dependency order.

Loading reads and checks everything before anything is written: the spec (no Spark), the SQL
files (no Spark), then the Python files (they run with the SparkSession active, as SDP's
``SparkSession.active()`` expects), the graph (names defined twice, cycles) and every SQL
materialized view's query with its temporary views inlined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmv.names import DEFAULT_NAMESPACE, ObjectName
from sparkmv.pipeline.flows import fold_flows
from sparkmv.pipeline.graph import Graph, build_graph
from sparkmv.pipeline.model import MATERIALIZED_VIEW, REFRESHED_KINDS, Dataset
from sparkmv.pipeline.spec import PipelineSpec, PipelineSpecError, load_spec
from sparkmv.pipeline.sql_defs import load_sql_file
from sparkmv.pipeline.sql_run import stored_query

SPARK_CATALOGS = (None, "spark_catalog")
"""Spec ``catalog`` values sparkmv accepts: its objects live in its own catalog."""


@dataclass
class Project:
    """A loaded project: ``queries`` holds each SQL MV's (and streaming table's) query as
    sparkmv stores it."""

    spec: PipelineSpec
    graph: Graph
    namespace: str
    queries: dict[ObjectName, str] = field(default_factory=dict)
    refresh_scheme: str | None = None  # the spec's sparkmv.refresh, normalised

    @property
    def materialized_views(self) -> list[Dataset]:
        return [self.graph.datasets[n] for n in self.graph.order() if self.graph.datasets[n].kind == MATERIALIZED_VIEW]


def load_project(spec_path: Path, start_spark: Callable[[], Any] | None = None) -> Project:
    """Load and check the project of ``spec_path``; ``start_spark`` is called before the
    first Python file runs (it makes the SparkSession active).

    Raises:
        PipelineSpecError / PipelineDefinitionError: one message naming the file.
    """
    spec = load_spec(spec_path)
    if spec.catalog not in SPARK_CATALOGS:
        raise PipelineSpecError(
            f"{spec.path}: catalog `{spec.catalog}` is not supported: sparkmv keeps the pipeline's "
            "datasets in its own catalog (leave `catalog` out, or spark_catalog)"
        )
    namespace = (spec.database or DEFAULT_NAMESPACE).lower()
    scheme = spec.refresh_scheme()  # checked before any definition is loaded
    files = spec.files()
    datasets: list[Dataset] = []
    for path in files:
        if path.suffix == ".sql":
            datasets.extend(load_sql_file(path, namespace, spec.configuration, spec.root))
    python = [p for p in files if p.suffix == ".py"]
    if python:
        from sparkmv.pipeline.python_defs import load_python_file

        if start_spark is not None:
            start_spark()
        for path in python:
            datasets.extend(load_python_file(path, namespace, spec.root))
    graph = build_graph(fold_flows(datasets), namespace)
    order = graph.order()  # cycles are refused here, before any query is resolved
    project = Project(spec, graph, namespace, refresh_scheme=scheme)
    for name in order:
        ds = graph.datasets[name]
        if ds.kind in REFRESHED_KINDS and ds.query is not None:
            project.queries[name] = stored_query(project, name)  # path references bound
    return project


def selection(project: Project, names: list[str]) -> set[ObjectName]:
    """The datasets ``names`` (``--refresh`` / ``--full-refresh``) denote.

    Raises:
        PipelineSpecError: a name that is not a dataset of the pipeline.
    """
    out: set[ObjectName] = set()
    for text in names:
        try:
            name = ObjectName.parse(text)
        except Exception as exc:
            raise PipelineSpecError(str(exc)) from None
        if "." not in text:
            name = ObjectName(project.namespace, name.name)
        if name not in project.graph.datasets:
            raise PipelineSpecError(f"{text}: no dataset of that name in pipeline {project.spec.name}")
        out.add(name)
    return out
