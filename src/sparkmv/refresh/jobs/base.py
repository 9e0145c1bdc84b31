"""What a job kind supplies to the run lifecycle, and the typed values they exchange.

The lifecycle (:mod:`sparkmv.refresh.lifecycle`) owns the claim, the lease, the progress
table, FINISHING, abort, resume, the attempt limit and the staging cleanup. A *job kind*
(:class:`Job`) supplies only what differs between kinds: planning (a typed
:class:`JobPlan`), computing a batch of chunks into staging, publishing, and the
kind-specific fields of the catalog side of a finished run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.orm import Session

from sparkmv.catalog.models import ObjectRow, ProgressRow
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage import warehouse
from sparkmv.storage.files import remove_unreferenced


def staging_dir(table_location: str, run_id: int) -> str:
    """Location of the staged files of a run, inside the table's data directory."""
    return warehouse.join(table_location, "data", f"run-{run_id}")


class JobPlan(Protocol):
    """The typed plan of one run, stored in the run row (``task_runs.plan``) as JSON."""

    @property
    def mode(self) -> str:
        """FULL, PCT, SKIP, FULL_RELOAD, ... (``SKIP``: nothing to do, the run ends SKIPPED)."""
        ...

    @property
    def reason(self) -> str:
        """Why this mode (shown with the run)."""
        ...

    @property
    def candidate_rows(self) -> list[dict[str, Any]] | None:
        """The refresh techniques weighed (``sparkmv.task_runs.candidates``); None when none
        were (every kind but an MV refresh under AUTO)."""
        ...

    @property
    def estimate_bytes(self) -> int | None:
        """The chosen technique's estimate of the bytes it reads (``task_runs.estimate_bytes``);
        None when none was weighed."""
        ...

    @property
    def partitions_planned(self) -> int:
        """Partitions (MV) or vnodes (table) the run covers."""
        ...

    def chunk_partitions(self) -> list[list[Any]]:
        """One entry per chunk (its progress row's ``partitions``), by chunk id."""
        ...

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (the inverse is the job's ``plan_from_json``)."""
        ...


P = TypeVar("P", bound=JobPlan)


@dataclass(frozen=True)
class JobSettings:
    """Lifecycle settings of one object: lease timing (seconds) and the attempt limit
    (attempts of one run, the first included, before recovery abandons it)."""

    lease_timeout_seconds: int
    lease_renew_seconds: int
    max_attempts: int


@dataclass(frozen=True)
class ChunkOutcome:
    """What computing one chunk wrote to staging.

    Attributes:
        files: ``file://`` URIs of the staged files kept for publishing.
        rows: rows processed; bytes: size of ``files`` in bytes.
        detail: kind-specific typed result as JSON (stored in the progress row's
            ``outcome``), e.g. the inserted/updated/deleted counts of a reload.
    """

    files: list[str]
    rows: int
    bytes: int
    detail: dict[str, Any] | None = None


@dataclass(frozen=True)
class ChunkRecord:
    """One progress-table row as the job kinds see it."""

    chunk_id: int
    partitions: list[Any]
    completed: bool
    published: bool
    files: list[str]
    processed_rows: int
    outcome: dict[str, Any] | None

    @classmethod
    def from_row(cls, row: ProgressRow) -> ChunkRecord:
        """Build from a progress row."""
        return cls(
            row.chunk_id,
            list(row.partitions or []),
            bool(row.is_completed),
            bool(row.published),
            list(row.files or []),
            int(row.processed_rows or 0),
            row.outcome,
        )


@dataclass
class RunContext:
    """One run while this process executes it, as handed to the job kind.

    Attributes:
        run_id: the run; attempt: the run's attempt number (1 = first execution).
        request: what was asked (force, range; MV refreshes only).
        require_lease: renews the lease now; raises ``LeaseLostError`` (with the step
            named by its argument) when it is no longer ours.
        spark_scope: ``with ctx.spark_scope("load"):`` runs Spark jobs under the run's
            tag (cancelled with the run) outside of chunks.
        own_attempts: staging directories (locations) this process wrote that are not yet
            recorded.
    """

    run_id: int
    attempt: int
    request: RefreshRequest
    require_lease: Callable[[str], None]
    spark_scope: Callable[[str], AbstractContextManager[None]]
    own_attempts: list[str] = field(default_factory=list)


class Job(ABC, Generic[P]):
    """One run's work of one job kind (an instance serves one run in one process).

    Subclasses set ``object_id``, ``name`` and ``settings`` in their constructor and keep
    the typed plan in ``plan`` once :meth:`make_plan` or :meth:`plan_from_json` made it.
    """

    object_id: int
    name: ObjectName
    settings: JobSettings
    plan: P

    def __init__(self, rt: Runtime, row: ObjectRow) -> None:
        self.rt = rt
        self.row = row
        self._locations: dict[ObjectName, str] = {}

    @classmethod
    @abstractmethod
    def open(cls, rt: Runtime, s: Session, name: ObjectName) -> Job[Any]:
        """The job of object ``name`` for a new run (inside the claim's transaction).

        Raises:
            SparkMvError: the object is missing, of another kind, or cannot be refreshed.
        """

    # -- the run row ------------------------------------------------------------------------
    def run_fields(self, request: RefreshRequest) -> dict[str, Any]:
        """Extra fields of a new run row (priority, publish, mode, request options)."""
        return {}

    def throttle_per_minute(self) -> float:
        """Chunks per minute allowed now (0: no limit); read fresh between chunks."""
        return 0.0

    # -- planning -----------------------------------------------------------------------------
    @abstractmethod
    def make_plan(self, ctx: RunContext) -> P:
        """Plan the run (pin the input); also sets ``self.plan``."""

    @abstractmethod
    def plan_from_json(self, data: dict[str, Any]) -> P:
        """The stored plan of a resumed run; also sets ``self.plan``."""

    def prepare(self, ctx: RunContext) -> tuple[P, list[str]] | None:
        """Stage input shared by all chunks before the first one (e.g. a reload's source);
        returns the plan that records it and the directories written, or None when there
        is nothing (more) to stage. The lifecycle records the plan only with the lease."""
        return None

    # -- chunks ---------------------------------------------------------------------------------
    def batches(self, pending: list[ChunkRecord]) -> list[list[int]]:
        """Cut the incomplete chunks into batches computed (and recorded) together."""
        return [[c.chunk_id] for c in pending]

    @abstractmethod
    def compute(self, ctx: RunContext, chunk_ids: list[int], attempt_name: str) -> dict[int, ChunkOutcome]:
        """Compute ``chunk_ids`` into staging, under ``<root>/<attempt_name>`` for each of
        :meth:`staging_roots`; returns one outcome per chunk id."""

    def publish_recorded(self, ctx: RunContext, records: list[ChunkRecord]) -> None:
        """Called with recorded chunks (new ones, and on resume the earlier ones): commit
        them now when the kind publishes per chunk."""

    # -- publishing ---------------------------------------------------------------------------
    @abstractmethod
    def publish(self, ctx: RunContext, chunks: list[ChunkRecord], recovering: bool) -> int | None:
        """Commit the run's staged chunks (tagged with the run id; when ``recovering`` only
        what did not land yet); returns the new snapshot id (None when nothing changed)."""

    @abstractmethod
    def finish_fields(self, s: Session, run_id: int, chunks: list[ChunkRecord]) -> dict[str, Any]:
        """Kind-specific catalog side of a finished run inside the finishing transaction
        (e.g. the version map); returns extra fields of the run row."""

    def committed(self, run_id: int) -> bool:
        """True when a commit tagged with ``run_id`` is in one of the object's tables."""
        store = self.rt.iceberg
        return any(store.exists(n) and store.snapshot_of_run(store.load(n), run_id) is not None for n in self.tables())

    # -- staging ----------------------------------------------------------------------------------
    def tables(self) -> list[ObjectName]:
        """The Iceberg tables the run commits to."""
        return [self.name]

    def staging_roots(self, run_id: int) -> list[str]:
        """The run's staging directories (one per table in :meth:`tables`); each table's
        location is loaded once per job (a run asks for its roots several times)."""
        for n in self.tables():
            if n not in self._locations:
                self._locations[n] = self.rt.iceberg.load(n).location()
        return [staging_dir(self._locations[n], run_id) for n in self.tables()]

    def cleanup(self, run_id: int, recorded: set[str]) -> None:
        """After success: remove attempt directories holding none of the ``recorded``
        (published) files."""
        for root in self.staging_roots(run_id):
            remove_unreferenced([e.path for e in warehouse.list_dir(root) if e.is_dir], recorded)

    def discard_staging(self, run_id: int) -> None:
        """After a failed, cancelled or abandoned run: remove its staging except files a
        snapshot references (chunks committed one by one); the root goes when empty."""
        referenced = {
            f for n in self.tables() if self.rt.iceberg.exists(n) for f in self.rt.iceberg.referenced_files(n)
        }
        for root in self.staging_roots(run_id):
            entries = warehouse.list_dir(root)
            if not entries and not warehouse.is_dir(root):
                continue
            remove_unreferenced([e.path for e in entries if e.is_dir], referenced)
            warehouse.remove_empty_dir(root)
