"""Helpers shared by the refreshable-table tests (not a test module)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_csv(directory: Path, name: str, rows: list[tuple[Any, ...]], header: str = "id,v") -> Path:
    """Write ``rows`` as a CSV file with ``header`` under ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    lines = [header] + [",".join("" if x is None else str(x) for x in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def contents(client: Any, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query as sorted tuples."""
    return sorted(tuple(r) for r in client.sql(sql).collect())


def run_counts(client: Any, run_id: int) -> tuple[int, int, int]:
    """(inserted, updated, deleted) recorded for a run."""
    rt = client.runtime
    with rt.catalog.transaction() as s:
        run = rt.catalog.runs.get(s, run_id)
        return run.rows_inserted, run.rows_updated, run.rows_deleted


def changelog_ops(client: Any, table: str, run_id: int) -> dict[str, int]:
    """op -> rows in the changelog of ``table`` for ``run_id``."""
    rows = client.sql(f"SELECT op, count(*) AS n FROM {table}__changelog WHERE run_id = {run_id} GROUP BY op").collect()
    return {r["op"]: r["n"] for r in rows}


def refresh(client: Any, table: str) -> Any:
    """REFRESH TABLE and return the run (asserting it succeeded)."""
    run = client.execute(f"REFRESH TABLE {table}").run
    assert run is not None
    assert run.state == "SUCCESS", run.error
    return run
