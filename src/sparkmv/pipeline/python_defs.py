"""Python definition files: pyspark's decorators captured by a sparkmv registry.

Each file is executed as ``spark-pipelines`` does (a module from its path, the working
directory at the spec's folder) with pyspark's active graph element registry
(``pyspark.pipelines.graph_element_registry``) set to :class:`CapturingRegistry`. What the
decorators declare becomes datasets:

- ``@dp.materialized_view``: a materialized view (its query function returns a batch
  DataFrame);
- ``@dp.table``: a streaming table whose own flow is the query function. When the function
  returns a streaming DataFrame (``spark.readStream...``) the table is appended the new rows
  of its source on each run (:mod:`sparkmv.pipeline.python_stream`); when it returns a batch
  DataFrame, which ``spark-pipelines`` refuses (``INVALID_FLOW_QUERY_TYPE``), sparkmv keeps it
  as a Python materialized view (:mod:`sparkmv.pipeline.python_mv`), as before;
- ``dp.create_streaming_table(name)``: a streaming table fed by flows;
- ``@dp.append_flow(target=name)``: a flow (a dataset of kind ``flow``), folded into its
  streaming table by :mod:`sparkmv.pipeline.flows` (also one declared in another file or in
  SQL with ``CREATE STREAMING TABLE name``); its function must return a streaming DataFrame;
- ``@dp.temporary_view``: a temporary view;
- ``dp.create_sink(name, format, options)``: a sink fed by ``@dp.append_flow(target=name)``
  (:mod:`sparkmv.pipeline.python_sinks`);
- ``@dp.expect``, ``@dp.expect_or_drop``, ``@dp.expect_or_fail``, ``@dp.expect_all``,
  ``@dp.expect_all_or_drop``, ``@dp.expect_all_or_fail`` (Databricks' expectations, which
  sparkmv adds to ``pyspark.pipelines`` while the file runs: :mod:`sparkmv.pipeline.python_expect`)
  on a materialized view's or table's query function: its ``Dataset.expectations`` (refused on
  a temporary view or an append flow).

``partition_cols`` (the first column), ``cluster_by`` (the table's sort order: a layout hint) and
``schema`` (a DDL string or ``StructType``: :mod:`sparkmv.pipeline.python_schema`) are kept;
``format`` other than ``iceberg`` is refused (sparkmv keeps every dataset as an Iceberg table).
pyspark 4.3's ``append_flow`` has no ``once`` parameter (SDP's one-time flows are not in its
Python API): a ``once=`` there is refused with the decorator's file:line.

The query functions are not called here (SDP calls them at run time, with the session active).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sparkmv.analysis.expectations import Expectation, check_expectations
from sparkmv.errors import AnalysisError
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import (
    FLOW,
    MATERIALIZED_VIEW,
    SINK,
    STREAMING_TABLE,
    TEMPORARY_VIEW,
    Dataset,
    PipelineDefinitionError,
    PythonFlow,
)
from sparkmv.pipeline.python_expect import expectations_of_function, installed


def load_python_file(path: Path, namespace: str, root: Path) -> list[Dataset]:
    """The datasets the decorators in Python file ``path`` declare (executed in folder ``root``).

    Raises:
        PipelineDefinitionError: ``<path>: <ExceptionType>: <message>`` when executing the
            file raises; ``<path>:<line>: ...`` for a declaration sparkmv does not support.
    """
    from pyspark.pipelines.graph_element_registry import graph_element_registration_context

    registry = _registry_class()()
    module_spec = importlib.util.spec_from_file_location(path.stem, str(path))
    if module_spec is None or module_spec.loader is None:
        raise PipelineDefinitionError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    with _cwd(root), graph_element_registration_context(registry), installed():
        try:
            module_spec.loader.exec_module(module)
        except TypeError as exc:
            raise _bad_argument(path, exc) from exc
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise PipelineDefinitionError(f"{path}: {type(exc).__name__}: {first}") from exc
    return _datasets(path, registry, namespace)


def _bad_argument(path: Path, exc: TypeError) -> PipelineDefinitionError:
    """``<path>:<line>: ...`` for a decorator given an argument pyspark does not have (the
    line of the call in ``path``), as ``append_flow(once=True)``."""
    import traceback

    line = next((f.lineno for f in reversed(traceback.extract_tb(exc.__traceback__)) if f.filename == str(path)), None)
    where = f"{path}:{line}" if line else str(path)
    text = (str(exc).strip().splitlines() or [""])[0]
    if "'once'" in text:
        text += " (pyspark 4.3's SDP Python API has no one-time flows; sparkmv runs what it declares)"
    return PipelineDefinitionError(f"{where}: TypeError: {text}")


def _registry_class() -> type:
    """The registry class (made on first use: pyspark is imported only when a Python file is loaded)."""
    from pyspark.pipelines.graph_element_registry import GraphElementRegistry

    class CapturingRegistry(GraphElementRegistry):
        """Records the outputs and flows the decorators register; SQL is not registered here."""

        def __init__(self) -> None:
            self.outputs: list[Any] = []
            self.flows: list[Any] = []
            self.cdc_flows: list[Any] = []

        def register_output(self, output: Any) -> None:
            self.outputs.append(output)

        def register_flow(self, flow: Any) -> None:
            self.flows.append(flow)

        def register_auto_cdc_flow(self, flow: Any) -> None:  # dp.create_auto_cdc_flow (pyspark 4.3)
            self.cdc_flows.append(flow)

        def register_sql(self, sql_text: str, file_path: Path) -> None:  # pragma: no cover - SDP's CLI only
            raise PipelineDefinitionError(f"{file_path}: SQL registered from Python is not supported")

    return CapturingRegistry


def _datasets(path: Path, registry: Any, namespace: str) -> list[Dataset]:
    from pyspark.pipelines.output import MaterializedView, Sink, StreamingTable, TemporaryView

    flows = {f.name: f for f in registry.flows}
    out: list[Dataset] = []
    for output in registry.outputs:
        line = output.source_code_location.line_number or 1
        where = f"{path}:{line}"
        flow = flows.pop(output.name, None)
        if flow is not None and flow.target != output.name:
            flows[flow.name] = flow  # an append flow named as the output: a flow like any other
            flow = None
        if isinstance(output, TemporaryView) and flow is not None:
            kind = TEMPORARY_VIEW
        elif isinstance(output, MaterializedView) and flow is not None:
            kind = MATERIALIZED_VIEW
        elif isinstance(output, StreamingTable):
            kind = STREAMING_TABLE
        elif isinstance(output, Sink):
            if flow is not None:  # an append flow named as its sink
                flows[flow.name] = flow
            out.append(_sink(output, namespace, path, line))
            continue
        else:
            raise PipelineDefinitionError(f"{where}: {type(output).__name__} {output.name}: not supported")
        name = _name(output.name, namespace, where)
        ds = Dataset(name, kind, path, line, function=flow.func if flow else None, comment=output.comment)
        ds.expectations = _expectations(ds, flow.func if flow else None, where)
        if kind != TEMPORARY_VIEW:
            _table_options(ds, output, where)
        if kind == STREAMING_TABLE:
            if flow is not None:  # @dp.table: its function is the table's own flow
                ds.python_flows = [PythonFlow(flow.name, flow.func, path, line)]
        out.append(ds)
    for flow in flows.values():  # @dp.append_flow: folded into its target by sparkmv.pipeline.flows
        line = flow.source_code_location.line_number or 1
        where = f"{path}:{line}"
        target = _name(flow.target, namespace, where)
        ds = Dataset(_name(flow.name, namespace, where), FLOW, path, line, function=flow.func, target=target)
        _expectations(ds, flow.func, where)
        out.append(ds)
    for cdc in registry.cdc_flows:  # dp.create_auto_cdc_flow: sparkmv.pipeline.auto_cdc
        from sparkmv.pipeline.auto_cdc import from_pyspark

        line = cdc.source_code_location.line_number or 1
        flow = from_pyspark(cdc, path, line, lambda text, at=f"{path}:{line}": _name(text, namespace, at))
        out.append(
            Dataset(_name(flow.name, namespace, flow.where), FLOW, path, line, target=flow.target, auto_cdc=flow)
        )
    return out


def _expectations(ds: Dataset, function: Any, where: str) -> list[Expectation]:
    """The expectations the ``@dp.expect...`` decorators put on ``ds``'s query ``function``
    (:mod:`.python_expect`), checked.

    Raises:
        PipelineDefinitionError: ``<where>: ...``: expectations on a temporary view or on an
            ``@dp.append_flow``, or one :func:`check_expectations` refuses.
    """
    expectations = expectations_of_function(function)
    if expectations and ds.kind in (TEMPORARY_VIEW, FLOW):
        put = "a temporary view" if ds.kind == TEMPORARY_VIEW else "an @dp.append_flow"
        raise PipelineDefinitionError(
            f"{where}: {ds.kind} {ds.name.display}: expectations on {put} are not supported by sparkmv pipeline "
            "(put them on the dataset: @dp.materialized_view or @dp.table)"
        )
    try:
        check_expectations(ds.name.display, expectations)
    except AnalysisError as exc:
        raise PipelineDefinitionError(f"{where}: {exc}") from None
    return expectations


def _sink(output: Any, namespace: str, path: Path, line: int) -> Dataset:
    """A ``dp.create_sink``: its format must be one :mod:`.python_sinks` writes, with a
    ``path`` option."""
    from sparkmv.pipeline.python_sinks import SINK_FORMATS

    where = f"{path}:{line}"
    fmt = str(output.format).lower()
    options = {str(k): str(v) for k, v in (output.options or {}).items()}
    if fmt not in SINK_FORMATS:
        raise PipelineDefinitionError(
            f"{where}: sink {output.name}: format {output.format!r} is not supported by sparkmv pipeline "
            f"(sinks write {', '.join(SINK_FORMATS)} files)"
        )
    if not options.get("path"):
        raise PipelineDefinitionError(f"{where}: sink {output.name}: give its directory as option 'path'")
    name = _name(output.name, namespace, where)
    return Dataset(name, SINK, path, line, sink_format=fmt, options=options)


def _table_options(ds: Dataset, output: Any, where: str) -> None:
    """``partition_cols`` (partitioned by the first, as a SQL ``PARTITIONED BY (a, b)``: the
    rows are the same), ``table_properties``, ``cluster_by``,
    ``schema`` (checked: a DDL string that parses, or a ``StructType``); a ``format`` other
    than ``iceberg`` is refused."""
    from sparkmv.pipeline.python_schema import parse_schema

    cols = list(output.partition_cols or [])
    ds.partition_by = cols[0].lower() if cols else None
    ds.properties = dict(output.table_properties or {})
    ds.cluster_by = [c.lower() for c in (output.cluster_by or [])]
    if cols and ds.cluster_by:  # as Spark refuses it
        raise PipelineDefinitionError(
            f"{where}: SPECIFY_CLUSTER_BY_WITH_PARTITIONED_BY_IS_NOT_ALLOWED: cluster_by or partition_cols, not both"
        )
    if output.schema is not None:
        ds.schema = parse_schema(output.schema, where)
    fmt = getattr(output, "format", None)
    if fmt and str(fmt).lower() != "iceberg":
        raise PipelineDefinitionError(
            f"{where}: format {fmt!r} is not supported by sparkmv pipeline: it keeps every table as an "
            "Iceberg table (leave format out)"
        )


def _name(text: str, namespace: str, where: str) -> ObjectName:
    try:
        name = ObjectName.parse(text)
    except Exception as exc:
        raise PipelineDefinitionError(f"{where}: {exc}") from None
    return name if "." in text else ObjectName(namespace, name.name)


@contextmanager
def _cwd(path: Path) -> Iterator[None]:
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)
