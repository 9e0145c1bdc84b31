"""Engine creation for the metadata catalog (SQLite or PostgreSQL) and error mapping.

SQLite is opened in WAL mode with a busy timeout, and every transaction starts with
``BEGIN IMMEDIATE`` so that concurrent writers queue on the database lock instead of
failing when a read lock would have to be upgraded (the pysqlite recipe from the
SQLAlchemy documentation). PostgreSQL runs at READ COMMITTED; the compare-and-set updates
are single ``UPDATE ... WHERE`` statements checked by row count, correct at that level.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from sparkmv.errors import CatalogError, ObjectExistsError

SQLITE_BUSY_TIMEOUT_SECONDS = 60
READ_ONLY_OPTION = "sparkmv_read_only"
SQLITE_HEADER = b"SQLite format 3\x00"


def add_unique(session: Session, row: object, exists_message: str) -> None:
    """Add ``row`` and flush it, so a unique-key clash surfaces here, not at commit.

    Raises:
        ObjectExistsError: ``exists_message``, when a row with the same unique key exists
            (the database's IntegrityError mapped to the domain error, as pyiceberg's SQL
            catalog maps it).
    """
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise ObjectExistsError(exists_message) from exc


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


_WRITES = threading.RLock()
_guarded = False


def guard_writes() -> None:
    """From now on, this process's write transactions hold a process-wide lock, which
    :func:`writes_held` takes: for fault injection's stall modes only, so that a process
    stopping itself (SIGSTOP) never stops another thread (the lease heartbeat) inside a
    write transaction, whose database lock would then block every other process for the
    busy timeout (a flaky stalled-owner test)."""
    global _guarded
    _guarded = True


@contextmanager
def writes_held() -> Iterator[None]:
    """Wait until no write transaction of this process is open, and keep new ones from
    starting until the block exits (effective after :func:`guard_writes`)."""
    with _WRITES:
        yield


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
            with _WRITES if _guarded else nullcontext(), self._sessions.begin() as session:
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


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL (``sqlite:///path``), None for other URLs and memory."""
    if not url.startswith("sqlite:///") or url.endswith((":memory:", "sqlite:///")):
        return None
    return Path(url.removeprefix("sqlite:///").split("?", 1)[0])


def open_database(url: str, prepare: Callable[[Database], None], version_table: str) -> Database:
    """Open the catalog database at ``url``; the one place a catalog is opened or created.

    A SQLite catalog is created only where no file exists: it is built in a private file
    (``prepare`` migrates it) and linked into place in one step, so no other process ever
    sees a half-made catalog, and of two processes creating it at once one wins and the
    other opens the winner's. An existing file that is empty, is not SQLite, or holds no
    ``version_table`` (not a sparkmv catalog) is refused, read only and never written to.

    Raises:
        CatalogError: ``catalog <path> is empty or damaged; restore it from a backup``, or
            ``cannot create catalog directory <dir>: <reason>``, or an in-memory SQLite URL
            (``sqlite://``, ``sqlite:///:memory:``), or an error of ``prepare``.
    """
    path = sqlite_path(url)
    if path is None and _in_memory(url):
        raise CatalogError(
            f"catalog URL '{url}' is an in-memory SQLite database, which loses every object when the process "
            "exits; give a file (sqlite:////path/catalog.db) or a PostgreSQL URL"
        )
    if path is not None:
        if not _sqlite_exists(path):
            _create_sqlite(url, path, prepare)
        elif not _holds_table(path, version_table):
            raise CatalogError(damaged_message(path))
    database = Database(url)
    try:
        prepare(database)
    except BaseException:
        database.dispose()
        raise
    return database


def _in_memory(url: str) -> bool:
    """True for a SQLite URL of an in-memory database (no file: ``sqlite://``, ``:memory:``).

    >>> _in_memory("sqlite://"), _in_memory("sqlite:///:memory:"), _in_memory("sqlite:////x/c.db")
    (True, True, False)
    """
    try:
        parsed = make_url(url)
    except ArgumentError:
        return False
    return parsed.get_backend_name() == "sqlite" and (parsed.database or ":memory:") == ":memory:"


def _holds_table(path: Path, table: str) -> bool:
    """True when SQLite file ``path`` has ``table``; read through a read-only connection,
    so a file that is refused is not touched (the engine's first connection would switch
    it to WAL mode). A file in WAL mode gets a ``-wal`` and ``-shm`` file from any reader,
    which a read-only connection cannot remove on close: those this check made are removed,
    so a refused file is left exactly as it was."""
    made = [p for p in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")) if not p.exists()]
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
    except sqlite3.Error:
        return False
    try:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return conn.execute(query, (table,)).fetchone() is not None
    except sqlite3.DatabaseError:  # "file is not a database": a damaged page behind a good header
        return False
    finally:
        conn.close()
        for leftover in made:  # an empty log (nothing was written: the connection was read-only)
            if leftover.exists() and (leftover.name.endswith("-shm") or leftover.stat().st_size == 0):
                leftover.unlink(missing_ok=True)


def damaged_message(path: Path) -> str:
    """The refusal of a catalog file that is not (or no longer) a sparkmv catalog."""
    return f"catalog {path} is empty or damaged; restore it from a backup"


def _sqlite_exists(path: Path) -> bool:
    """True when a catalog file is there; raises when it cannot be a catalog at all.

    A zero-byte file next to a non-empty write-ahead log is a catalog whose pages are all
    still in the log (SQLite replays it), not a truncated one.
    """
    try:
        with path.open("rb") as f:
            header = f.read(len(SQLITE_HEADER))
    except (FileNotFoundError, NotADirectoryError):
        return False  # creating it says what is wrong with its directory
    except IsADirectoryError:
        raise CatalogError(f"catalog {path}: is a directory") from None
    except OSError as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc.strerror}") from exc
    wal = path.with_name(path.name + "-wal")
    if header == SQLITE_HEADER or (not header and wal.is_file() and wal.stat().st_size > 0):
        return True
    raise CatalogError(damaged_message(path))


def _create_sqlite(url: str, path: Path, prepare: Callable[[Database], None]) -> None:
    directory = path.parent
    if directory.exists() and not directory.is_dir():
        raise CatalogError(f"cannot create catalog directory {directory}: not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CatalogError(f"cannot create catalog directory {directory}: {exc.strerror}") from exc
    private = directory / f".{path.name}.new-{os.getpid()}-{threading.get_ident()}"
    for leftover in (private, private.with_name(private.name + "-wal"), private.with_name(private.name + "-shm")):
        leftover.unlink(missing_ok=True)
    query = url.partition("?")[2]
    database = Database(f"sqlite:///{private}" + (f"?{query}" if query else ""))
    try:
        prepare(database)
    finally:
        database.dispose()  # the last connection's close checkpoints the log into the file
    try:
        os.link(private, path)  # fails when another process linked its catalog first: use that one
    except FileExistsError:
        pass
    except OSError as exc:
        raise CatalogError(f"cannot create catalog {path}: {exc.strerror}") from exc
    finally:
        for leftover in (private, private.with_name(private.name + "-wal"), private.with_name(private.name + "-shm")):
            leftover.unlink(missing_ok=True)
