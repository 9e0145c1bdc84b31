"""REFRESH TABLE: reload the associated source and merge the differences per vnode."""

from __future__ import annotations

from typing import Any

from sparkmv.errors import SparkMvError


def reload_table(rt: Any, name: Any, trigger: Any, progress: Any = None) -> Any:
    """Refresh a refreshable table."""
    raise SparkMvError(f"Table '{name}' is not refreshable: it has no associated source with refresh_mode FULL_RELOAD")


def resume_reload(rt: Any, run_id: int, attempts: int) -> Any:
    """Resume an interrupted reload."""
    raise SparkMvError("refreshable tables are not available yet")
