"""Catalog: the facade over the metadata stores, as SQLMesh's StateSync.

Open it with :meth:`Catalog.open`; it migrates the database to the newest revision (cheap
when already there). Each store works inside a session handed out by
:meth:`Catalog.transaction`, so a multi-table change (finish a run: version map, run
result, state IDLE) is one transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.orm import Session

from sparkmv.catalog import migrate
from sparkmv.catalog.control import ControlStore
from sparkmv.catalog.database import Database, open_database
from sparkmv.catalog.events import EventStore
from sparkmv.catalog.expectations import ExpectationStore
from sparkmv.catalog.external import ExternalCatalogStore
from sparkmv.catalog.objects import ObjectStore
from sparkmv.catalog.pipelines import PipelineStore
from sparkmv.catalog.positions import PositionStore
from sparkmv.catalog.rewrite_log import RewriteLogStore
from sparkmv.catalog.runs import RunStore
from sparkmv.catalog.scheduling import SchedulingStore
from sparkmv.catalog.versions import VersionStore


class Catalog:
    """The sparkmv metadata catalog in one SQL database (SQLite or PostgreSQL).

    Attributes:
        url: SQLAlchemy URL.
        objects, runs, versions, positions, control, external_catalogs, events, expectations:
            the stores, one per metadata table group
            (methods inside a caller's session from :meth:`transaction`).
        scheduling: the scheduler's claims and queue (:class:`SchedulingStore`); each
            method owns its transaction.
        rewrite_log: the queries considered for query rewrite (:class:`RewriteLogStore`);
            each method owns its transaction.
        pipelines: the datasets of the pipeline projects run (:class:`PipelineStore`); each
            method owns its transaction.
    """

    objects = ObjectStore
    runs = RunStore
    versions = VersionStore
    positions = PositionStore
    control = ControlStore
    external_catalogs = ExternalCatalogStore
    events = EventStore
    expectations = ExpectationStore

    def __init__(self, database: Database) -> None:
        self.db = database
        self.url = database.url
        self.scheduling = SchedulingStore(database)
        self.rewrite_log = RewriteLogStore(database)
        self.pipelines = PipelineStore(database)

    @classmethod
    def open(cls, url: str) -> Catalog:
        """Connect to ``url`` and migrate it to the head revision; create it where no
        catalog exists (see :func:`sparkmv.catalog.database.open_database`).

        Raises:
            CatalogError: when the database cannot be reached, the catalog file is empty or
                damaged, or its revision is unknown.
        """
        return cls(open_database(url, _migrate, migrate.VERSION_TABLE))

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """One catalog transaction (see :meth:`Database.transaction`)."""
        with self.db.transaction() as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A read-only catalog session (see :meth:`Database.read`)."""
        with self.db.read() as session:
            yield session

    def close(self) -> None:
        """Release database connections."""
        self.db.dispose()


_MIGRATING = threading.Lock()  # Alembic's context is process-global: one migration at a time


def _migrate(database: Database) -> None:
    try:
        with _MIGRATING:
            migrate.upgrade(database.engine)
    except Exception as exc:
        from sparkmv.errors import CatalogError

        if isinstance(exc, CatalogError):
            raise
        raise CatalogError(f"cannot open catalog {database.url!r}: {exc}") from exc
