"""Enumerations stored in the catalog: object kinds, refresh states, run states, triggers."""

from __future__ import annotations

from enum import StrEnum


class ObjectKind(StrEnum):
    """What a catalog object is."""

    EXTERNAL_TABLE = "EXTERNAL_TABLE"
    MATERIALIZED_VIEW = "MATERIALIZED_VIEW"
    REFRESHABLE_TABLE = "REFRESHABLE_TABLE"


class RefreshState(StrEnum):
    """Per-object refresh state (DESIGN.md, refresh lifecycle); changed only by CAS."""

    IDLE = "IDLE"
    REFRESHING = "REFRESHING"
    FINISHING = "FINISHING"


class RunState(StrEnum):
    """State of one refresh run (task run)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    FINISHING = "FINISHING"
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    SKIPPED = "SKIPPED"
    MERGED = "MERGED"
    UPSTREAM_FAILED = "UPSTREAM_FAILED"

    @property
    def is_final(self) -> bool:
        """True for states a run never leaves."""
        return self in _FINAL


_FINAL = frozenset(
    {
        RunState.SUCCESS,
        RunState.FAILED,
        RunState.CANCELLED,
        RunState.SKIPPED,
        RunState.MERGED,
        RunState.UPSTREAM_FAILED,
    }
)


class Trigger(StrEnum):
    """Why a run was started."""

    MANUAL = "MANUAL"
    SCHEDULED = "SCHEDULED"
    ON_BASE_TABLE_CHANGE = "ON_BASE_TABLE_CHANGE"
    RECOVERY = "RECOVERY"


class ControlCommand(StrEnum):
    """Commands sent to a running refresh; read between chunks."""

    CANCEL = "CANCEL"
    PAUSE = "PAUSE"
    RESUME = "RESUME"
