"""What a scheduler is tuned with and what one tick reports (plain data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sparkmv.catalog.models import ObjectRow
from sparkmv.names import ObjectName
from sparkmv.refresh.recovery import RecoveryOutcome

FAILED_OUTCOMES = frozenset({"FAILED", "UPSTREAM_FAILED", "LEASE_LOST"})


@dataclass(frozen=True)
class SchedulerConfig:
    """Tuning of one scheduler process.

    Attributes:
        max_concurrent: refreshes at once (independent DAG branches run in parallel).
        poll_seconds: seconds between ticks.
        retry_backoff_seconds: delay before the first retry of a failed run; doubled for
            each further attempt (capped at 300 s).
        stop_grace_seconds: after SIGTERM/SIGINT, how long a running refresh may go on
            before it is cancelled (a second signal cancels at once).
        recover: take over runs with expired leases at each tick.
    """

    max_concurrent: int = 1
    poll_seconds: float = 1.0
    retry_backoff_seconds: float = 2.0
    stop_grace_seconds: float = 30.0
    recover: bool = True


@dataclass(frozen=True)
class NodeResult:
    """What one tick did for one object.

    ``outcome`` is a run state (SUCCESS, SKIPPED, FAILED, CANCELLED, UPSTREAM_FAILED) when
    a run ended, else one of IDLE (nothing due), WAITING (a retry's backoff), BUSY,
    CLAIMED (another scheduler took it), LEASE_LOST, INACTIVE, SUSPENDED, STOPPING.
    """

    name: str
    outcome: str
    run_id: int | None = None
    detail: str = ""


@dataclass
class TickReport:
    """The result of one tick."""

    now: datetime
    results: dict[str, NodeResult] = field(default_factory=dict)
    recovered: list[RecoveryOutcome] = field(default_factory=list)
    cyclic: set[str] = field(default_factory=set)

    def outcome(self, name: str) -> str | None:
        """The outcome of object ``name`` (qualified or display), or None."""
        key = ObjectName.parse(name, allow_reserved=True).qualified
        result = self.results.get(key)
        return result.outcome if result else None

    @property
    def refreshed(self) -> list[str]:
        """Objects whose run ended SUCCESS or SKIPPED in this tick, in completion order."""
        return [n for n, r in self.results.items() if r.outcome in ("SUCCESS", "SKIPPED")]


def qualified(row: ObjectRow) -> str:
    """The qualified name (``namespace.name``) of an object row: the key of a tick's results."""
    return ObjectName(row.namespace, row.name).qualified


def is_async(row: ObjectRow) -> bool:
    """True for an MV refreshed by the scheduler (``REFRESH ASYNC ...``)."""
    return (row.refresh_scheme or "").upper().startswith("ASYNC")
