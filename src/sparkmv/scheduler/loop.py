"""The scheduler loop (``sparkmv scheduler``)."""

from __future__ import annotations

from typing import Any

from sparkmv.errors import SparkMvError


def run_scheduler(client: Any, once: bool, max_concurrent: int, poll_seconds: float, metrics_port: int | None, console: Any) -> None:
    """Run the scheduler in the foreground."""
    raise SparkMvError("the scheduler is not available yet")
