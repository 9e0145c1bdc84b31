"""Fire-time arithmetic of scheduled refreshes (pure, no catalog, no Spark).

A schedule ``ASYNC [START (s)] EVERY (INTERVAL n unit)`` fires on the grid
``anchor + k * every`` (k = 0, 1, 2, ...), where the anchor is START, or the time the
schedule was set when START is absent. Fire times are always computed from the anchor,
never from "when the last run ended", so a schedule does not drift; fires missed while no
scheduler was running coalesce into one run, not a burst.

All datetimes are naive UTC (the form stored in the catalog); periods are whole seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


def _period(every_seconds: int) -> timedelta:
    if every_seconds <= 0:
        raise ValueError(f"schedule period must be positive, not {every_seconds} seconds")
    return timedelta(seconds=every_seconds)


def next_fire_after(anchor: datetime, every_seconds: int, after: datetime) -> datetime:
    """The first grid point ``anchor + k * every`` strictly later than ``after``.

    Raises:
        ValueError: when ``every_seconds`` is not positive.

    >>> a = datetime(2026, 1, 1)
    >>> next_fire_after(a, 3600, datetime(2025, 12, 31))   # anchor in the future: the anchor
    datetime.datetime(2026, 1, 1, 0, 0)
    >>> next_fire_after(a, 3600, a)                        # strictly later
    datetime.datetime(2026, 1, 1, 1, 0)
    >>> next_fire_after(a, 3600, datetime(2026, 1, 1, 5, 59, 59, 999999))
    datetime.datetime(2026, 1, 1, 6, 0)
    """
    period = _period(every_seconds)
    if anchor > after:
        return anchor
    steps = (after - anchor) // period + 1
    return anchor + steps * period


def latest_fire_at_or_before(anchor: datetime, every_seconds: int, now: datetime) -> datetime | None:
    """The newest grid point not later than ``now`` (None when the anchor is still ahead).

    >>> latest_fire_at_or_before(datetime(2026, 1, 1), 60, datetime(2026, 1, 1, 0, 2, 30))
    datetime.datetime(2026, 1, 1, 0, 2)
    >>> latest_fire_at_or_before(datetime(2026, 1, 1), 60, datetime(2025, 1, 1)) is None
    True
    """
    period = _period(every_seconds)
    if anchor > now:
        return None
    return anchor + ((now - anchor) // period) * period


def initial_fire_time(start: datetime | None, every_seconds: int, set_at: datetime) -> datetime:
    """The first fire time of a schedule set (created or altered) at ``set_at``.

    With START the grid is anchored there: a START in the future fires first at START, a
    START in the past at the next grid point after ``set_at``. Without START the grid is
    anchored at ``set_at`` and the first fire is one period later (the MV was just built).

    >>> initial_fire_time(None, 2, datetime(2026, 1, 1, 0, 0, 0))
    datetime.datetime(2026, 1, 1, 0, 0, 2)
    >>> initial_fire_time(datetime(2026, 1, 1), 60, datetime(2026, 1, 1, 0, 10, 30))
    datetime.datetime(2026, 1, 1, 0, 11)
    >>> initial_fire_time(datetime(2027, 1, 1), 60, datetime(2026, 1, 1))
    datetime.datetime(2027, 1, 1, 0, 0)
    """
    return next_fire_after(start or set_at, every_seconds, set_at)


@dataclass(frozen=True)
class Fire:
    """The outcome of one due check of a schedule.

    Attributes:
        due_time: the fire time this run serves (the newest missed grid point).
        next_fire_time: the next fire time to store (strictly later than ``now``).
        missed: how many grid points passed since the stored next fire time (>= 1); all of
            them are served by one run.
    """

    due_time: datetime
    next_fire_time: datetime
    missed: int


def check_due(next_fire_time: datetime, every_seconds: int, now: datetime) -> Fire | None:
    """Whether a schedule whose stored next fire time is ``next_fire_time`` is due at ``now``.

    The grid is anchored at ``next_fire_time`` itself (it lies on the grid), so the result
    never drifts however late the tick is.

    Raises:
        ValueError: when ``every_seconds`` is not positive.

    >>> t = datetime(2026, 1, 1, 0, 0, 0)
    >>> check_due(t, 2, datetime(2025, 12, 31, 23, 59, 59)) is None
    True
    >>> check_due(t, 2, t + timedelta(seconds=0.3))            # a little late: no drift
    Fire(due_time=datetime.datetime(2026, 1, 1, 0, 0), next_fire_time=datetime.datetime(2026, 1, 1, 0, 0, 2), missed=1)
    >>> f = check_due(t, 2, t + timedelta(seconds=61))          # down for a minute
    >>> (f.due_time.second, f.next_fire_time.minute, f.next_fire_time.second, f.missed)
    (0, 1, 2, 31)
    """
    latest = latest_fire_at_or_before(next_fire_time, every_seconds, now)
    if latest is None:
        return None
    missed = (latest - next_fire_time) // _period(every_seconds) + 1
    return Fire(latest, next_fire_after(next_fire_time, every_seconds, now), missed)


def retry_delay(attempt: int, base_seconds: float, cap_seconds: float = 300.0) -> float:
    """Exponential backoff before retry ``attempt`` (2 = the first retry), in seconds.

    >>> [retry_delay(a, 1.0) for a in (2, 3, 4)]
    [1.0, 2.0, 4.0]
    >>> retry_delay(30, 1.0)
    300.0
    """
    return float(min(cap_seconds, base_seconds * 2 ** max(0, attempt - 2)))
