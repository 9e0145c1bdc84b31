"""Seeing a catalog transaction wait for another one's lock, instead of sleeping and hoping.

:class:`LockWaiter` runs one transaction of a second catalog in a thread and returns once
that thread is observed blocked on the lock the test's own open transaction holds:

- PostgreSQL: its backend shows ``wait_event_type = 'Lock'`` in ``pg_stat_activity``, on
  the ``smv_objects`` row the open transaction updated.
- SQLite, whose busy wait shows nowhere outside the process: a probe connection with no
  busy timeout is refused the write lock before the thread starts (so the open transaction
  holds it), then the thread issues its ``BEGIN IMMEDIATE`` (seen by an engine event on that
  thread). SQLite has one writer: the thread cannot pass until the open transaction ends.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event, text

from sparkmv.catalog import Catalog
from sparkmv.catalog.database import sqlite_path

DEADLINE_SECONDS = 30.0
POLL_SECONDS = 0.01

PG_LOCK_WAITS = text(
    "SELECT query FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock' AND state = 'active'"
)


class LockWaiter:
    """``work`` in a thread on catalog ``waiter``; its outcome (None or the exception) in
    :attr:`result` once it ends.

    Args:
        waiter: the catalog (its own engine) the thread works on.
        work: one or more transactions on ``waiter``; it returns nothing.
    """

    def __init__(self, waiter: Catalog, work: Callable[[], None]) -> None:
        self.waiter = waiter
        self.result: list[BaseException | None] = []
        self._work = work
        self._began = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self._work()
            self.result.append(None)
        except BaseException as exc:
            self.result.append(exc)

    def _on_statement(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if threading.current_thread() is self.thread and statement.startswith("BEGIN IMMEDIATE"):
            self._began.set()

    def start_blocked(self, holder: Catalog) -> None:
        """Start the thread and return once it waits for the lock ``holder``'s open
        transaction holds.

        Raises:
            AssertionError: when the thread ended first (it did not wait), after
                :data:`DEADLINE_SECONDS`, or (SQLite) when nobody holds the write lock.
        """
        path = sqlite_path(self.waiter.db.url)
        if path is not None:  # before the thread starts, only the holder can hold it
            assert _sqlite_write_locked(str(path)), "the first transaction holds no write lock"
        engine = self.waiter.db.engine
        event.listen(engine, "before_cursor_execute", self._on_statement)
        try:
            self.thread.start()
            end = time.monotonic() + DEADLINE_SECONDS
            while not (self._began.is_set() if path is not None else _pg_update_waits(holder)):
                assert self.thread.is_alive(), f"the second transaction did not wait: it ended with {self.result}"
                assert time.monotonic() < end, f"no lock wait seen within {DEADLINE_SECONDS} s"
                time.sleep(POLL_SECONDS)
        finally:
            event.remove(engine, "before_cursor_execute", self._on_statement)
        assert self.result == [], "the second transaction ended while the first held its lock"

    def join(self) -> BaseException | None:
        """Wait (30 s at most) for the thread to end; its outcome."""
        self.thread.join(DEADLINE_SECONDS)
        assert not self.thread.is_alive(), "the second transaction still waits after the first ended"
        assert len(self.result) == 1
        return self.result[0]


def _pg_update_waits(holder: Catalog) -> bool:
    """True when a backend of the catalog's database waits for a lock in an UPDATE of
    ``smv_objects`` (looked up on a connection of its own)."""
    with holder.db.engine.connect() as conn:
        waiting = conn.execute(PG_LOCK_WAITS).scalars().all()
    return any(q.lstrip().upper().startswith("UPDATE SMV_OBJECTS") for q in waiting)


def _sqlite_write_locked(path: str) -> bool:
    """True when another connection holds the write lock of the SQLite file at ``path``
    (a probe with no busy timeout is refused ``BEGIN IMMEDIATE``)."""
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "database is locked" not in str(exc):
            raise
        return True
    finally:
        probe.close()
