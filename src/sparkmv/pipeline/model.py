"""The datasets of a pipeline: what SQL and Python definitions declare (plain data)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmv.analysis.expectations import Expectation
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName

MATERIALIZED_VIEW = "materialized view"
TEMPORARY_VIEW = "temporary view"
STREAMING_TABLE = "streaming table"
FLOW = "flow"
SINK = "sink"
REFRESHED_KINDS = (MATERIALIZED_VIEW, STREAMING_TABLE)
"""The kinds a run refreshes (a flow is folded into its streaming table, a temporary view
is inlined)."""


class PipelineDefinitionError(SparkMvError):
    """A definition file that cannot be loaded; the message starts with the file's path."""


@dataclass(frozen=True)
class PythonFlow:
    """One Python flow of a streaming table: ``@dp.table``'s own function (named as the
    table) or an ``@dp.append_flow(target=...)``; ``function`` returns its DataFrame."""

    name: str
    function: Callable[..., Any]
    file: Path
    line: int = 1

    @property
    def where(self) -> str:
        """``file:line`` for messages."""
        return f"{self.file}:{self.line}"


@dataclass
class Dataset:
    """One dataset of the graph.

    Attributes:
        name: the dataset (namespace from the spec's ``database``, default ``default``).
        kind: :data:`MATERIALIZED_VIEW`, :data:`TEMPORARY_VIEW`, :data:`STREAMING_TABLE` or
            :data:`FLOW`.
        file: the definition file; line: where the definition starts (1-based).
        query: the SELECT of a SQL definition, as written (temporary views not yet inlined).
        function: the query function of a Python definition (called with no argument, as SDP
            does; it reads ``SparkSession.active()``).
        partition_by: the partition column (``PARTITIONED BY`` / ``partition_cols``, one column).
        properties: ``TBLPROPERTIES`` / ``table_properties`` as written.
        comment: ``COMMENT`` / ``comment``.
        target: a flow's streaming table (``INSERT INTO target BY NAME``).
        streams: the tables the query reads as ``STREAM(t)`` (rewritten to ``t`` in ``query``).
        flows: a streaming table's flows by name, its own ``AS SELECT`` first (the flow of
            the table's name), as folded by :mod:`sparkmv.pipeline.flows`.
        python_flows: a streaming table fed by Python flows: those flows (folded by
            :mod:`sparkmv.pipeline.flows`; run by :mod:`sparkmv.pipeline.python_stream`).
        conf: the Spark settings of the ``SET`` statements before a SQL definition in its
            file (applied around its refresh; such a dataset refreshes alone).
        columns: a SQL definition's column list (:mod:`sparkmv.pipeline.sql_columns`).
        schema: a Python table's ``schema=`` (a DDL string or a ``StructType``), applied to
            its rows (:func:`sparkmv.pipeline.python_schema.apply_schema`).
        cluster_by: ``cluster_by=`` (a layout hint: the table's sort order).
        sink_format / options: a sink's (``dp.create_sink``) format and options.
        flow_queries: a SQL streaming table with several flows that cannot be folded from
            the definitions alone (a ``*``, an unnamed expression, different column names):
            its flows (the table's own ``AS SELECT`` first), folded when the run reaches it
            (:mod:`sparkmv.pipeline.sql_flows`).
        auto_cdc: an AUTO CDC flow (:class:`sparkmv.pipeline.auto_cdc.AutoCdcFlow`), on the
            flow as defined and, once folded, on its streaming table.
        expectations: its data-quality rules in the order written (SQL ``CONSTRAINT name
            EXPECT (...)`` in the column list, Python ``@dp.expect...``), checked when the
            project loads.
    """

    name: ObjectName
    kind: str
    file: Path
    line: int = 1
    query: str | None = None
    function: Callable[..., Any] | None = None
    partition_by: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    comment: str | None = None
    target: ObjectName | None = None
    streams: list[ObjectName] = field(default_factory=list)
    flows: list[str] = field(default_factory=list)
    python_flows: list[PythonFlow] = field(default_factory=list)
    conf: dict[str, str] = field(default_factory=dict)
    columns: list[Any] = field(default_factory=list)
    schema: Any = None
    cluster_by: list[str] = field(default_factory=list)
    sink_format: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    flow_queries: list[Dataset] = field(default_factory=list)
    auto_cdc: Any = None
    expectations: list[Expectation] = field(default_factory=list)

    @property
    def is_python(self) -> bool:
        """Defined in Python, or run like a Python dataset (alone, reading its source by name): a
        query function, a streaming table fed by Python flows or by an AUTO CDC flow."""
        return self.function is not None or bool(self.python_flows) or self.auto_cdc is not None

    @property
    def where(self) -> str:
        """``file:line`` for messages."""
        return f"{self.file}:{self.line}"
