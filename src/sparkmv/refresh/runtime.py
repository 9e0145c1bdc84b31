"""Runtime: the services one process uses (settings, catalog, Iceberg store, Spark).

Spark starts lazily, on the first property access, so commands that only read the
catalog (status, runs, cancel) never pay for a JVM.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from sparkmv.catalog import Catalog
from sparkmv.config import Settings
from sparkmv.refresh.faults import FaultInjector

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkmv.storage.iceberg import IcebergStore


@dataclass(frozen=True)
class Owner:
    """Identity of a lease holder: host, process id, process start time."""

    host: str
    pid: int
    started: float

    @classmethod
    def current(cls) -> Owner:
        """The owner identity of this process."""
        return cls(socket.gethostname(), os.getpid(), _PROCESS_START)

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{int(self.started)}"

    @property
    def short(self) -> str:
        """``host:pid``."""
        return f"{self.host}:{self.pid}"


_PROCESS_START = time.time()


class Runtime:
    """Services of one process. Build it once and pass it down."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog | None = None,
        spark: SparkSession | None = None,
        faults: FaultInjector | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog or Catalog.open(settings.catalog_url)
        self._spark = spark
        self._starting: threading.Thread | None = None
        self._local = threading.local()  # a session this thread uses instead (:meth:`using`)
        self.faults = faults or FaultInjector.parse(settings.fault, settings.fault_mode)
        self.owner = Owner.current()

    @cached_property
    def iceberg(self) -> IcebergStore:
        """The Iceberg store on the same database as the catalog (pyiceberg is imported here,
        on first use, so that catalog-only commands do not pay for it)."""
        from sparkmv.storage.iceberg import IcebergStore

        return IcebergStore(self.settings.catalog_url, self.settings.warehouse, self.catalog.db.engine)

    @property
    def spark(self) -> SparkSession:
        """The process's SparkSession (started on first use): classic on the settings' master,
        or Spark Connect when they name a remote; inside :meth:`using`, that session."""
        chosen = getattr(self._local, "spark", None)
        if chosen is not None:
            return chosen  # type: ignore[no-any-return]
        self.wait_for_spark()
        if self._spark is None:
            from sparkmv.storage.spark import get_spark

            s = self.settings
            self._spark = get_spark(s.spark_master, s.spark_conf, log_home=s.home, remote=s.spark_remote)
        return self._spark

    @contextmanager
    def using(self, session: SparkSession | None) -> Iterator[None]:
        """Inside the block, :attr:`spark` is ``session`` in this thread (a child session of
        the process's, with settings of its own; None: no change)."""
        before = getattr(self._local, "spark", None)
        if session is not None:
            self._local.spark = session
        try:
            yield
        finally:
            self._local.spark = before

    def start_spark_in_background(self, quick_start: bool = False) -> None:
        """Start the SparkSession in another thread, so that the JVM starts while this thread
        does other work (planning); :attr:`spark` waits for it. A start that fails is tried
        again, and its error raised, by the first use of :attr:`spark`. While Spark starts,
        this process's stdout and stderr go to Spark's log (see :func:`wait_for_spark`).
        ``quick_start``: the process will do little Spark work (a local driver JVM then
        compiles with the first JIT tier only, :data:`sparkmv.storage.spark.QUICK_JAVA_OPTIONS`)."""
        if self._spark is not None or self._starting is not None:
            return

        def start() -> None:
            from sparkmv.storage.spark import get_spark

            s = self.settings
            try:
                self._spark = get_spark(
                    s.spark_master, s.spark_conf, log_home=s.home, remote=s.spark_remote, quick_start=quick_start
                )
            except Exception:  # raised again by the first use of ``spark``
                pass

        self._starting = threading.Thread(target=start, name="sparkmv-spark-start", daemon=True)
        self._starting.start()

    def wait_for_spark(self) -> None:
        """Wait for a start begun by :meth:`start_spark_in_background` (no-op when none is
        running): before printing to the terminal, whose output Spark's start redirects."""
        starting, self._starting = self._starting, None
        if starting is not None:
            starting.join()

    @property
    def has_spark(self) -> bool:
        """True once Spark has been started (or was handed in)."""
        return self._spark is not None

    def close(self) -> None:
        """Release catalog connections (Spark stays up for the process)."""
        self.catalog.close()
