"""How a refresh run begins: the job kind's opener, the claim that creates or takes a run
and the object's lease (CAS ``IDLE -> REFRESHING``), and the Spark job tag and group names
of a run (cancelled together; the jobs of one chunk). Used by :mod:`sparkmv.refresh.lifecycle`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from sparkmv.catalog import RunState, Trigger
from sparkmv.catalog.clock import utcnow
from sparkmv.names import ObjectName
from sparkmv.refresh import run_events
from sparkmv.refresh.jobs.base import Job
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.runtime import Runtime


class JobType(Protocol):
    """A job kind's class: opens the job of one object for a new run."""

    def open(self, rt: Runtime, s: Session, name: ObjectName) -> Job[Any]:
        """Look ``name`` up and check it can be refreshed by this kind.

        Raises:
            SparkMvError: not found, wrong kind, inactive, ... (the message says which).
        """
        ...


class RunClaim(Protocol):
    """Creates or claims the run of a refresh inside the caller's transaction and takes
    the object's lease (CAS ``IDLE -> REFRESHING``); returns the run id, or None when
    another process claimed it first. Raises BusyError when the object is not IDLE."""

    def __call__(self, s: Session, job: Job[Any], request: RefreshRequest, owner: str) -> int | None: ...


@dataclass(frozen=True)
class NewRun:
    """The claim of ``REFRESH``: a new RUNNING run with ``trigger``."""

    trigger: Trigger = Trigger.MANUAL

    def __call__(self, s: Session, job: Job[Any], request: RefreshRequest, owner: str) -> int:
        """Create the run row and take the lease (see :class:`RunClaim`)."""
        catalog = job.rt.catalog
        run = catalog.runs.create(
            s,
            job.object_id,
            job.name.display,
            self.trigger,
            RunState.RUNNING,
            started=utcnow(),
            attempts=1,
            owner=owner,
            **job.run_fields(request),
        )
        catalog.objects.begin_refresh(s, job.row, run.run_id, owner, job.settings.lease_timeout_seconds)
        run_events.started(s, catalog, job.name, int(run.run_id), self.trigger)
        return int(run.run_id)


def job_tag(run_id: int) -> str:
    """The Spark job tag of every job of run ``run_id`` (cancelled together)."""
    return f"sparkmv-run-{run_id}"


def chunk_job_group(run_id: int, chunk_id: int) -> str:
    """The Spark job group of one chunk (the first of its batch) of a run (classic:
    ``statusTracker().getJobIdsForGroup``; Spark Connect: an operation tag)."""
    return f"sparkmv-run-{run_id}-chunk-{chunk_id}"
