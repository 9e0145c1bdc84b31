"""What a statement returns to the caller (:class:`StatementResult`), and rows read from
the catalog alone (:class:`Rows`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkmv.refresh.result import RefreshRun

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class Rows:
    """A result read from the catalog alone (``SHOW ...``, system tables): printed without Spark.

    Attributes:
        columns: column names; rows: the rows, in column order.
        schema: Spark DDL of the columns, when known (for a DataFrame).
    """

    columns: list[str]
    rows: list[tuple[Any, ...]]
    schema: str | None = None


@dataclass(frozen=True)
class StatementResult:
    """What a statement produced: a DataFrame (queries), rows read from the catalog alone
    (``SHOW``), or a message (everything else)."""

    dataframe: DataFrame | None = None
    message: str | None = None
    run: RefreshRun | None = None
    rows: Rows | None = None
    failure: str | None = None
    """A refresh pass where some MV did not refresh: what did not (raised as
    ``RefreshFailedError`` with ``raise_on_failure``)."""
