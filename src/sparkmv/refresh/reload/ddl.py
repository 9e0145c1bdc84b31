"""CREATE TABLE ... WITH (connector = ...): refreshable tables."""

from __future__ import annotations

from typing import Any

from sparkmv.errors import SparkMvError


def create_refreshable_table(rt: Any, stmt: Any) -> str:
    """Create a refreshable table."""
    raise SparkMvError("refreshable tables are not available yet")
