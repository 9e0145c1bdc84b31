"""What a pipeline run reports: one result per dataset, the run's state, and the errors
that are a user's (a dataset's FAILED line) rather than a bug."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName


@dataclass
class DatasetResult:
    """One line of the run's report."""

    name: ObjectName
    source: str  # "sql" or "python"
    state: str  # SUCCESS, SKIPPED, FAILED, NOT RUN, EXCLUDED
    technique: str | None = None  # FULL, PCT, INCREMENTAL, SKIP
    reason: str | None = None
    rows: int | None = None  # rows of the dataset after the run
    started: datetime | None = None
    finished: datetime | None = None
    run_id: int | None = None
    kind: str = "materialized view"  # or "streaming table"


@dataclass
class RunResult:
    """The run: one result per materialized view, in the order they ran."""

    pipeline: str
    results: list[DatasetResult] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "FAILED" if any(r.state == "FAILED" for r in self.results) else "COMPLETED"


class NeedsDataset(Exception):
    """A Python query function read pipeline dataset ``name``, not yet refreshed in this run."""

    def __init__(self, name: ObjectName) -> None:
        super().__init__(name.display)
        self.name = name


def is_user_error(exc: BaseException) -> bool:
    """True for sparkmv's errors and Spark's (a dataset's FAILED line); anything else is a bug."""
    from sparkmv.storage.spark_log import is_spark_error

    return isinstance(exc, SparkMvError) or is_spark_error(exc)


def one_line(exc: BaseException) -> str:
    """The one-line reason of a user's error ``exc`` (Spark's error condition and message)."""
    from sparkmv.storage.spark_log import spark_error_line

    return str(exc) if isinstance(exc, SparkMvError) else spark_error_line(exc)
