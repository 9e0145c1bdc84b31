"""The refresh pass a refresh run belongs to, seen from inside the run (a context variable
set by :func:`sparkmv.refresh.passes.refresh_pass` in each of its threads): how many MVs of
the pass consume a change, and the lock one change is read under. Outside a pass, a refresh
is alone: one consumer, no lock."""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RefreshPass:
    """The MVs of one pass and what they consumed: object id -> base table -> consumed
    Iceberg snapshot id (None: no position stored)."""

    positions: dict[int, dict[str, int | None]] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def consumers(self, table: str, snapshot_id: int) -> int:
        """How many MVs of the pass consumed ``table`` at ``snapshot_id``."""
        return sum(1 for p in self.positions.values() if p.get(table) == snapshot_id)

    def lock(self, key: str) -> threading.Lock:
        """The lock of one change (by its change-cache key): one MV reads it at a time."""
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


CURRENT: contextvars.ContextVar[RefreshPass | None] = contextvars.ContextVar("sparkmv_refresh_pass", default=None)


def current_pass() -> RefreshPass | None:
    """The pass this thread's refresh is part of (None: a refresh alone)."""
    return CURRENT.get()


def consumers_in_pass(table: str, snapshot_id: int | None) -> int:
    """How many MVs of the current pass consume ``table``'s change from ``snapshot_id``
    (1 outside a pass, or when unknown)."""
    current = CURRENT.get()
    if current is None or snapshot_id is None:
        return 1
    return max(1, current.consumers(table, snapshot_id))


@contextmanager
def change_lock(key: str) -> Iterator[None]:
    """Hold the pass's lock of one change while it is read (nothing outside a pass)."""
    current = CURRENT.get()
    if current is None:
        yield
        return
    with current.lock(key):
        yield


def in_pass(current: RefreshPass | None, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run with ``current`` as its pass, for worker threads (a thread does not inherit
    the context variables of the one that starts it); each call runs in a context of its own,
    so one wrapper serves any number of threads at once."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        ctx = contextvars.copy_context()
        ctx.run(CURRENT.set, current)
        return ctx.run(fn, *args, **kwargs)

    return run
