"""Fault injection for crash tests: die at a named point of the refresh lifecycle.

Configured by ``SPARKMV_FAULT=<point>[:<chunk>]`` and
``SPARKMV_FAULT_MODE=exit|kill|stall|stall-fail`` (``os._exit(17)``, ``SIGKILL`` to itself,
``SIGSTOP`` to itself: a live-but-stalled owner that continues when sent ``SIGCONT``, or that
stall followed by an :class:`InjectedFailure` when continued), read once into :class:`sparkmv.config.Settings` and
turned into a :class:`FaultInjector` when the runtime is built. Points: ``after_chunk_staged``,
``before_progress_recorded``, ``after_progress_recorded``, ``before_publish``,
``after_publish``, ``during_cleanup``, ``during_load``, ``during_merge``.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

from sparkmv.catalog.database import guard_writes, writes_held

POINTS = (
    "after_chunk_staged",
    "before_progress_recorded",
    "after_progress_recorded",
    "before_publish",
    "after_publish",
    "during_cleanup",
    "during_load",
    "during_merge",
)

MODES = ("exit", "kill", "stall", "stall-fail")
STALL_MODES = ("stall", "stall-fail")
"""Modes that stop the process (SIGSTOP) instead of ending it."""


class InjectedFailure(RuntimeError):
    """The failure of a stalled owner when it continues (mode ``stall-fail``)."""


@dataclass(frozen=True)
class FaultInjector:
    """Kills the process at ``point`` (for chunk ``chunk`` when given)."""

    point: str | None = None
    chunk: int | None = None
    mode: str = "exit"

    @classmethod
    def parse(cls, spec: str | None, mode: str = "exit") -> FaultInjector:
        """The injector for ``<point>[:<chunk>]`` and ``mode``; an inactive one when ``spec``
        is None or empty.

        Raises:
            ValueError: for an unknown point or mode.

        >>> FaultInjector.parse("before_publish:2", "kill")
        FaultInjector(point='before_publish', chunk=2, mode='kill')
        """
        if not spec:
            return cls()
        point, _, chunk = spec.partition(":")
        if point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}; known: {', '.join(POINTS)}")
        if mode not in MODES:
            raise ValueError(f"unknown fault mode {mode!r}; known: {', '.join(MODES)}")
        if mode in STALL_MODES:
            guard_writes()
        return cls(point, int(chunk) if chunk else None, mode)

    def hit(self, point: str, chunk: int | None = None) -> None:
        """Die here when configured for ``point`` (and ``chunk``)."""
        if self.point != point or (self.chunk is not None and chunk != self.chunk):
            return
        if self.mode in STALL_MODES:
            with writes_held():  # never stop the lease heartbeat inside a transaction
                os.kill(os.getpid(), signal.SIGSTOP)
            if self.mode == "stall-fail":
                raise InjectedFailure(f"injected failure at {point} after a stall")
            return
        if self.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(17)
