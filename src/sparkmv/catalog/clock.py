"""Wall-clock helpers: the catalog stores naive UTC datetimes."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now, as a naive UTC datetime (the form stored in the catalog)."""
    return datetime.now(UTC).replace(tzinfo=None)


def to_epoch(value: datetime | None) -> float | None:
    """Seconds since the epoch of a naive UTC datetime."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC).timestamp()
