"""PipelineStore: ``smv_pipeline_datasets``, every dataset of the pipeline projects run.

Read as the system table ``sparkmv.pipeline_datasets`` and by ``sparkmv status``. A run of a
project first registers its datasets (:meth:`PipelineStore.register`: rows added or updated,
rows of that pipeline no longer defined removed), then records each dataset's outcome as it
finishes (:meth:`PipelineStore.record`). A dataset name belongs to one pipeline: registering
a name another pipeline holds moves it (the last project run defines it, as the tables
themselves are shared).

Each method owns its transaction; typed records (:class:`PipelineDataset`) go in and come
out, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select

from sparkmv.catalog.database import Database
from sparkmv.catalog.models import PipelineDatasetRow
from sparkmv.names import ObjectName

REASON_CHARS = 2000
"""Characters of a dataset's last reason kept."""


@dataclass(frozen=True)
class PipelineDataset:
    """One dataset of a pipeline.

    Attributes:
        pipeline: the spec's ``name``.
        name: the dataset.
        kind: ``materialized view``, ``streaming table``, ``view``, ``temporary view`` or ``sink``.
        source: ``sql`` or ``python``.
        file, line: where it is defined (line 1-based).
        last_state: SUCCESS, SKIPPED, FAILED, NOT RUN, EXCLUDED; None before its first run
            (and always for a temporary view, which is inlined where it is read).
        last_technique: FULL, PCT, INCREMENTAL, SKIP (or None).
        last_reason: why that technique, or the error (truncated to :data:`REASON_CHARS`).
        rows: rows of the dataset after its newest run (None when unknown).
        last_run_start, last_run_end: UTC, naive.
    """

    pipeline: str
    name: ObjectName
    kind: str
    source: str
    file: str
    line: int
    last_state: str | None = None
    last_technique: str | None = None
    last_reason: str | None = None
    rows: int | None = None
    last_run_start: datetime | None = None
    last_run_end: datetime | None = None


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _record(row: PipelineDatasetRow) -> PipelineDataset:
    return PipelineDataset(
        row.pipeline,
        ObjectName(row.namespace, row.name),
        row.kind,
        row.source,
        row.definition_file,
        row.definition_line,
        row.last_state,
        row.last_technique,
        row.last_reason,
        row.rows,
        row.last_run_start,
        row.last_run_end,
    )


class PipelineStore:
    """Registers pipeline datasets and their outcomes (each method one transaction)."""

    def __init__(self, database: Database) -> None:
        self.db = database

    def register(self, pipeline: str, datasets: Sequence[PipelineDataset]) -> None:
        """Make ``datasets`` the datasets of ``pipeline``: add the new ones, update kind,
        source and definition place of the known ones (keeping their last outcome), and
        remove the rows of ``pipeline`` not among them.

        Raises:
            CatalogError: when the catalog database fails.
        """
        wanted = {(d.name.namespace, d.name.name): d for d in datasets}
        with self.db.transaction() as s:
            rows = s.scalars(
                select(PipelineDatasetRow).where(
                    (PipelineDatasetRow.pipeline == pipeline)
                    | PipelineDatasetRow.name.in_([d.name.name for d in datasets])
                )
            ).all()
            existing = {(r.namespace, r.name): r for r in rows}
            for key, row in existing.items():
                if key not in wanted and row.pipeline == pipeline:
                    s.delete(row)
            for key, d in wanted.items():
                row = existing.get(key) or PipelineDatasetRow(namespace=key[0], name=key[1])
                row.pipeline, row.kind, row.source = pipeline, d.kind, d.source
                row.definition_file, row.definition_line, row.updated_at = d.file, d.line, _now()
                if key not in existing:
                    s.add(row)

    def record(self, pipeline: str, outcome: PipelineDataset) -> None:
        """Store the outcome of one dataset's run (state, technique, reason, rows, times);
        a dataset not registered is registered with it.

        Raises:
            CatalogError: when the catalog database fails.
        """
        name = outcome.name
        with self.db.transaction() as s:
            row = s.scalars(
                select(PipelineDatasetRow).where(
                    PipelineDatasetRow.namespace == name.namespace, PipelineDatasetRow.name == name.name
                )
            ).first()
            if row is None:
                row = PipelineDatasetRow(namespace=name.namespace, name=name.name)
                row.kind, row.source = outcome.kind, outcome.source
                row.definition_file, row.definition_line = outcome.file, outcome.line
                s.add(row)
            row.pipeline = pipeline
            row.last_state, row.last_technique = outcome.last_state, outcome.last_technique
            reason = outcome.last_reason
            row.last_reason = reason if reason is None or len(reason) <= REASON_CHARS else reason[:REASON_CHARS]
            row.rows, row.last_run_start, row.last_run_end = outcome.rows, outcome.last_run_start, outcome.last_run_end
            row.updated_at = _now()

    def list(self, pipeline: str | None = None) -> list[PipelineDataset]:
        """The datasets (of ``pipeline`` when given), by pipeline then name."""
        stmt = select(PipelineDatasetRow).order_by(
            PipelineDatasetRow.pipeline, PipelineDatasetRow.namespace, PipelineDatasetRow.name
        )
        if pipeline is not None:
            stmt = stmt.where(PipelineDatasetRow.pipeline == pipeline)
        with self.db.read() as s:
            return [_record(r) for r in s.scalars(stmt)]
