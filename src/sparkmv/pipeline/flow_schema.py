"""A streaming table's columns inferred from its flows' schemas, as Spark's SDP infers them
(``SchemaInferenceUtils.inferSchemaFromFlows``: ``SchemaMergingUtils.mergeSchemas``, i.e.
``StructType.merge``): columns matched by name, case-insensitively; the first flow's columns,
then each later flow's new ones, in order (Spark folds its flows in the order of their
names; sparkmv in definition order, the order its single-flow folding keeps); a column is
nullable when any flow's is or a flow lacks it (its rows NULL there); one column with two
types is refused. SQL flows (:mod:`sparkmv.pipeline.sql_flows`) and Python flows
(:mod:`sparkmv.pipeline.python_stream`) share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparkmv.errors import SparkMvError


@dataclass(frozen=True)
class FlowColumn:
    """One column of the table: its name as first written, Spark ``DataType``, nullability."""

    name: str
    data_type: Any
    nullable: bool


def merged_columns(table: str, flows: list[tuple[str, str, list[Any]]]) -> list[FlowColumn]:
    """The columns of streaming table ``table`` (its display name) from its ``flows``, each
    ``(file:line, flow name, Spark StructFields)``, in order (rules in the module docstring).

    Raises:
        SparkMvError: ``<file>:<line>: flow <name> gives column <c> twice: ...``, or ``...
            gives column <c> as <T>, but flow <first> gives it as <U>: ...
            (UNABLE_TO_INFER_PIPELINE_TABLE_SCHEMA: Failed to merge incompatible data types
            "<U>" and "<T>")`` (types compared without nullability, as SQL text).
    """
    merged: dict[str, tuple[str, Any, bool, str]] = {}
    for where, flow, fields in flows:
        seen: set[str] = set()
        for field in fields:
            key = field.name.lower()
            if key in seen:
                raise SparkMvError(
                    f"{where}: flow {flow} gives column {field.name} twice: streaming table {table} takes "
                    "its flows' columns by name"
                )
            seen.add(key)
            if key not in merged:
                merged[key] = (field.name, field.dataType, bool(field.nullable), flow)
                continue
            name, kind, nullable, first = merged[key]
            old, new = type_text(kind), type_text(field.dataType)
            if old != new:
                raise SparkMvError(
                    f"{where}: flow {flow} gives column {field.name} as {new}, but flow {first} gives it as "
                    f"{old}: the schema of streaming table {table} cannot be inferred from its flows "
                    f"(UNABLE_TO_INFER_PIPELINE_TABLE_SCHEMA: Failed to merge incompatible data types "
                    f'"{old}" and "{new}")'
                )
            merged[key] = (name, kind, nullable or bool(field.nullable), first)
    everywhere = {k for k in merged if all(k in {f.name.lower() for f in fs} for _, _, fs in flows)}
    return [FlowColumn(n, t, null or k not in everywhere) for k, (n, t, null, _) in merged.items()]


def type_text(kind: Any) -> str:
    """A Spark type as SQL text, upper case (``BIGINT``, ``DECIMAL(10,2)``, ``ARRAY<STRING>``)."""
    return str(kind.simpleString()).upper()
