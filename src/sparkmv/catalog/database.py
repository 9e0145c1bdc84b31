"""Engine creation for the metadata catalog (SQLite or PostgreSQL) and error mapping.

SQLite is opened in WAL mode with a busy timeout, and every transaction starts with
``BEGIN IMMEDIATE`` so that concurrent writers queue on the database lock instead of
failing when a read lock would have to be upgraded (the pysqlite recipe from the
SQLAlchemy documentation). PostgreSQL runs at READ COMMITTED; the compare-and-set updates
are single ``UPDATE ... WHERE`` statements checked by row count, correct at that level.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from sparkmv.errors import CatalogError

SQLITE_BUSY_TIMEOUT_SECONDS = 60
READ_ONLY_OPTION = "sparkmv_read_only"


def make_engine(url: str) -> Engine:
    """Create the SQLAlchemy engine for ``url``.

    Raises:
        CatalogError: when the URL cannot be parsed or its driver is missing.
    """
    try:
        if url.startswith("sqlite"):
            engine = create_engine(
                url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
            )
            _configure_sqlite(engine)
            return engine
        return create_engine(url, pool_pre_ping=True, pool_size=4, max_overflow=8)
    except Exception as exc:  # ArgumentError, NoSuchModuleError, ...
        raise CatalogError(f"cannot open catalog {url!r}: {exc}") from exc


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite so BEGIN IMMEDIATE below is ours.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_SECONDS * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Reads start deferred: in WAL mode they take no lock a writer waits for.
        read_only = conn.get_execution_options().get(READ_ONLY_OPTION, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


class Database:
    """An engine plus session factories; ``transaction()`` is the unit of every write,
    ``read()`` of polling reads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(
            self.engine.execution_options(**{READ_ONLY_OPTION: True}), expire_on_commit=False
        )

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error.

        Raises:
            CatalogError: when the database cannot be reached.
        """
        try:
            with self._sessions.begin() as session:
                yield session
        except OperationalError as exc:
            raise CatalogError(f"catalog database error: {exc.orig}") from exc

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for reads only: on SQLite it begins deferred, so a frequent poll (a
        running refresh reads its control commands twice a second) never holds the write
        lock that other processes' writes queue on. Writing in it is a bug.

        Raises:
            CatalogError: when the database cannot be reached.
        """
        try:
            with self._read_sessions.begin() as session:
                yield session
        except OperationalError as exc:
            raise CatalogError(f"catalog database error: {exc.orig}") from exc

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
