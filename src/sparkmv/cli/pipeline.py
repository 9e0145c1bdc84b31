"""``sparkmv pipeline run | dry-run | init``: Spark Declarative Pipelines projects.

Options as ``spark-pipelines``: ``--spec PATH`` (default: the spec found from the current
directory upward), ``--full-refresh NAMES``, ``--full-refresh-all``, ``--refresh NAMES``
(comma-separated, repeatable). A bad spec or definition is one ``error:`` line naming the
file (exit 1) before anything is written; conflicting options are a usage error (exit 2); a
run in which a dataset failed exits 1 after its report. Under each dataset's report line,
``pipeline run`` prints that dataset's lines of the event log (``sparkmv.pipeline_events``):
its expectations' results and its errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sparkmv.errors import SparkMvError

if TYPE_CHECKING:
    from sparkmv.catalog.events import Event
    from sparkmv.client.client import Client
    from sparkmv.pipeline.project import Project
    from sparkmv.pipeline.results import DatasetResult

pipeline_app = typer.Typer(
    no_args_is_help=True,
    help="Run Spark Declarative Pipelines projects (spark-pipeline.yml) with sparkmv.",
)

SpecOption = Annotated[Path | None, typer.Option("--spec", help="Path to the pipeline spec.")]


def _names(values: list[str] | None) -> list[str]:
    """SDP's ``parse_table_list`` over every occurrence of the option."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


def _load(spec: Path | None, start_spark: bool) -> Project:
    from sparkmv.cli.session import state
    from sparkmv.pipeline.project import load_project
    from sparkmv.pipeline.spec import find_spec, load_spec

    path = find_spec(Path.cwd(), spec)
    state.conf = {**load_spec(path).spark_conf, **state.conf}  # --conf wins over the spec
    return load_project(path, (lambda: state.client().spark) if start_spark else None)


@pipeline_app.command("run")
def run_command(
    spec: SpecOption = None,
    full_refresh: Annotated[
        list[str] | None, typer.Option("--full-refresh", help="Datasets to recompute in full (comma-separated).")
    ] = None,
    full_refresh_all: Annotated[bool, typer.Option("--full-refresh-all", help="Recompute every dataset.")] = False,
    refresh: Annotated[
        list[str] | None, typer.Option("--refresh", help="Datasets to refresh (comma-separated); others excluded.")
    ] = None,
) -> None:
    """Refresh the pipeline's materialized views in dependency order: each atomically, SKIPPED
    when nothing it reads changed, PCT or INCREMENTAL when AUTO picks them."""
    from sparkmv.cli.session import console, state
    from sparkmv.pipeline.pending import pending_work
    from sparkmv.pipeline.project import selection
    from sparkmv.pipeline.run import run_pipeline

    full, only = _names(full_refresh), _names(refresh)
    if full_refresh_all and (full or only):
        option = "--full-refresh" if full else "--refresh"
        raise typer.BadParameter(
            f"--full-refresh-all option conflicts with {option}", param_hint="'--full-refresh-all'"
        )
    project = _load(spec, start_spark=True)
    full_set, only_set = selection(project, full), selection(project, only)
    console.print(f"pipeline {project.spec.name}: {project.spec.path}", highlight=False, soft_wrap=True)
    client = state.client()
    # Table metadata through fsspec's FileIO, not pyiceberg's PyArrow one (pyarrow, pandas: about
    # 0.5 s to import): a run in which every dataset is up to date imports neither, nor pyspark.
    client.runtime.iceberg.read_through_fsspec()
    pending = pending_work(client, project, full_set, full_refresh_all, only_set)
    if pending.needs_spark:  # the JVM starts while the first dataset plans
        client.runtime.start_spark_in_background(quick_start=pending.quick_start)

    log = EventFollower(client, project.spec.name)

    def report(r: DatasetResult) -> None:
        client.runtime.wait_for_spark()  # Spark's start sends this process's output to its log
        _print_result(r)
        for line in log.lines_of(r.name.display):
            console.print(f"    {line}", highlight=False, markup=False, soft_wrap=True)

    try:
        result = run_pipeline(client, project, full_set, full_refresh_all, only_set, on_result=report)
    finally:
        client.runtime.wait_for_spark()  # before an error is printed, too
    counts = ", ".join(
        f"{n} {s}"
        for s in ("SUCCESS", "SKIPPED", "FAILED", "NOT RUN", "EXCLUDED")
        if (n := sum(r.state == s for r in result.results))
    )
    console.print(f"run is {result.state}: {counts or 'no materialized view'}", highlight=False, soft_wrap=True)
    if result.state == "FAILED":
        failed = next(r for r in result.results if r.state == "FAILED")
        where = project.graph.datasets[failed.name].where
        raise SparkMvError(f"pipeline {project.spec.name} FAILED: {failed.name.display} ({where}): {failed.reason}")


class EventFollower:
    """The event log's lines of one pipeline run that ``sparkmv pipeline run`` prints under
    each dataset's report line: its expectation results and its warnings and errors (events
    with an id above the log's newest when the run started, each printed once)."""

    SHOWN = frozenset({"expectation", "run_failed", "run_cancelled", "run_recovered", "run_abandoned"})

    def __init__(self, client: Client, pipeline: str) -> None:
        self.client, self.pipeline = client, pipeline
        self.after = max((e.id or 0 for e in client.events(limit=1)), default=0)
        self.pending: list[Event] = []

    def lines_of(self, dataset: str) -> list[str]:
        """The new lines of ``dataset``: ``<type>: <message>``, in the order logged."""
        new = self.client.events(self.pipeline, after_id=self.after)
        if new:
            self.after = max(e.id or 0 for e in new)
        self.pending += [e for e in new if e.event_type in self.SHOWN]
        mine = [e for e in self.pending if e.dataset == dataset]
        self.pending = [e for e in self.pending if e.dataset != dataset]
        return [f"{e.event_type}: {e.message}" for e in mine]


def _print_result(r: DatasetResult) -> None:
    """One report line: start, end, dataset, state, technique, rows, reason."""
    from sparkmv.cli.session import console

    when = f"{_time(r.started)} -> {_time(r.finished)}"
    rows = f"rows {r.rows}" if r.rows is not None else "rows -"
    technique = r.technique or "-"
    source = r.source if r.kind == "materialized view" else f"{r.source} {r.kind}"
    line = f"{when}  {r.name.display} ({source})  {r.state}  {technique}  {rows}  {r.reason or ''}"
    console.print(line.rstrip(), highlight=False, markup=False, soft_wrap=True)


def _time(value: object) -> str:
    return value.strftime("%H:%M:%S") if value is not None else "-"  # type: ignore[attr-defined]


@pipeline_app.command("dry-run")
def dry_run_command(spec: SpecOption = None) -> None:
    """Validate the project and print its dataset graph in dependency order; nothing is written
    (Python definitions are loaded with Spark started, as SDP does)."""
    from sparkmv.cli.session import console

    project = _load(spec, start_spark=True)
    graph = project.graph
    console.print(f"pipeline {project.spec.name}: {project.spec.path}", highlight=False, soft_wrap=True)
    for name in graph.order():
        ds = graph.datasets[name]
        source = "python" if ds.is_python else "sql"
        if name in graph.reads:
            reads = ", ".join(n.display for n in graph.reads[name]) or "-"
        else:
            reads = "(found when run)"
        line = f"{name.display}  {ds.kind} ({source})  {ds.where}  reads: {reads}"
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(f"dry run is COMPLETED: {len(graph.datasets)} datasets", highlight=False, soft_wrap=True)


@pipeline_app.command("init")
def init_command(name: Annotated[str, typer.Argument(help="Project name (a new directory here).")]) -> None:
    """Create a sample project: the same skeleton as ``spark-pipelines init``."""
    from sparkmv.cli.session import console
    from sparkmv.pipeline.init import init_project

    init_project(name, Path.cwd())
    console.print(f"Pipeline project '{name}' created successfully. To run your pipeline:", highlight=False)
    console.print(f"cd '{name}'", highlight=False)
    console.print("sparkmv pipeline run", highlight=False)
