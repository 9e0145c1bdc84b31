"""RunMonitor: a background thread that renews the run's lease and reads control commands.

Every ``poll_seconds`` it reads the control commands of the run; every
``lease_renew_seconds`` it renews the lease with a compare-and-set. On CANCEL, or when
the lease is lost, it cancels the run's Spark jobs at once (and again at every poll while
a chunk is still running, so a job submitted right after the first cancel stops too); a
long chunk stops within seconds and the lifecycle sees the flags between chunks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sparkmv.catalog import Catalog, ControlCommand

log = logging.getLogger("sparkmv.refresh")


class RunMonitor:
    """Lease heartbeat and control-command reader of one running refresh."""

    def __init__(
        self,
        catalog: Catalog,
        object_id: int,
        run_id: int,
        owner: str,
        lease_renew_seconds: float,
        lease_timeout_seconds: float,
        on_stop: Callable[[], None],
        poll_seconds: float = 0.5,
        running: Callable[[], bool] | None = None,
    ) -> None:
        self.catalog = catalog
        self.object_id = object_id
        self.run_id = run_id
        self.owner = owner
        self.renew_every = lease_renew_seconds
        self.lease_seconds = lease_timeout_seconds
        self.poll_seconds = poll_seconds
        self.on_stop = on_stop
        self.running = running or (lambda: False)
        self.cancelled = False
        self.paused = False
        self.lease_lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"sparkmv-run-{run_id}", daemon=True)

    def start(self) -> RunMonitor:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (waits for it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def check_commands(self) -> None:
        """Read the control commands now (also called between chunks)."""
        with self.catalog.read() as s:
            commands = self.catalog.control.commands(s, self.run_id)
        if ControlCommand.CANCEL in commands and not self.cancelled:
            self.cancelled = True
            self.on_stop()
        pauses = [c for c in commands if c in (ControlCommand.PAUSE, ControlCommand.RESUME)]
        self.paused = bool(pauses) and pauses[-1] == ControlCommand.PAUSE

    def checkpoint(self) -> None:
        """Between chunks: read commands, wait while paused, stop when cancelled or lost.

        Raises:
            RefreshCancelledError: when the run was cancelled.
            LeaseLostError: when the lease is no longer ours.
        """
        from sparkmv.errors import LeaseLostError, RefreshCancelledError

        self.check_commands()
        if self.paused and not self.cancelled:
            # Logged: what an operator (and a test) sees of a run holding at its pause.
            log.info("run %s paused: no chunk starts until RESUME or CANCEL", self.run_id)
            while self.paused and not self.cancelled:
                time.sleep(0.2)
                self.check_commands()
            log.info("run %s %s", self.run_id, "cancelled while paused" if self.cancelled else "resumed")
        if self.cancelled:
            raise RefreshCancelledError(f"run {self.run_id} cancelled")
        if self.lease_lost:
            raise LeaseLostError(f"run {self.run_id} lost its lease")

    def renew(self) -> bool:
        """Renew the lease now; False (and ``lease_lost``) when it is no longer ours."""
        with self.catalog.transaction() as s:
            ok = self.catalog.objects.renew_lease(s, self.object_id, self.run_id, self.owner, self.lease_seconds)
        if not ok and not self.lease_lost:
            self.lease_lost = True
            self.on_stop()
        return ok

    @property
    def stopping(self) -> bool:
        """True once the run must stop (cancelled, or the lease is lost)."""
        return self.cancelled or self.lease_lost

    def _loop(self) -> None:
        last_renew = time.monotonic()
        while not self._stop.wait(self.poll_seconds):
            try:
                was_stopping = self.stopping
                self.check_commands()
                if time.monotonic() - last_renew >= self.renew_every:
                    self.renew()
                    last_renew = time.monotonic()
                if was_stopping and self.running():
                    self.on_stop()
            except Exception:
                continue
