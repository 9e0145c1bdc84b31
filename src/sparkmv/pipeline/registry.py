"""The catalog's record of a pipeline's datasets (``sparkmv.pipeline_datasets``,
``sparkmv status``): every dataset of the project registered when a run starts, each one's
outcome stored as it finishes. Python datasets and views are not sparkmv objects; this is
where a user sees them beside the SQL ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkmv.catalog.pipelines import PipelineDataset
from sparkmv.pipeline.model import Dataset

if TYPE_CHECKING:
    from sparkmv.client.client import Client
    from sparkmv.pipeline.project import Project
    from sparkmv.pipeline.results import DatasetResult


def _entry(pipeline: str, ds: Dataset) -> PipelineDataset:
    return PipelineDataset(pipeline, ds.name, ds.kind, "python" if ds.is_python else "sql", str(ds.file), ds.line)


def register_project(client: Client, project: Project) -> None:
    """Register every dataset of ``project`` under its spec's name (see
    :meth:`sparkmv.catalog.pipelines.PipelineStore.register`)."""
    name = project.spec.name
    client.runtime.catalog.pipelines.register(name, [_entry(name, d) for d in project.graph.datasets.values()])


def record_result(client: Client, project: Project, result: DatasetResult) -> None:
    """Store one dataset's outcome (state, technique, reason, rows, start and end)."""
    ds = project.graph.datasets.get(result.name)
    base = _entry(project.spec.name, ds) if ds is not None else None
    outcome = PipelineDataset(
        project.spec.name,
        result.name,
        base.kind if base else result.kind,
        base.source if base else result.source,
        base.file if base else "",
        base.line if base else 1,
        result.state,
        result.technique,
        result.reason,
        result.rows,
        result.started,
        result.finished,
    )
    client.runtime.catalog.pipelines.record(project.spec.name, outcome, result.run_id)
