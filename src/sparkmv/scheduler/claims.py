"""Claims of the scheduler: the rules live in :mod:`sparkmv.catalog.scheduling`.

This module keeps the scheduler's own piece (retries carry a ``not_before`` time in their
request options).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sparkmv.catalog.scheduling import NOT_BEFORE

__all__ = ["NOT_BEFORE", "with_not_before"]


def with_not_before(options: dict[str, Any], when: datetime) -> dict[str, Any]:
    """``options`` plus a not-before time (a retry waits for its backoff).

    >>> with_not_before({"attempt": 2}, datetime(2026, 1, 1, 0, 0, 5))
    {'attempt': 2, 'not_before': '2026-01-01T00:00:05'}
    """
    return {**options, NOT_BEFORE: when.isoformat()}
