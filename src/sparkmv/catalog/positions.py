"""PositionStore: consumed positions (``smv_consumed_positions``).

Per object and base table, the position the object last consumed: the pinned base table
(:class:`sparkmv.sources.pinned.PinnedTable` as JSON: an Iceberg snapshot id and its files,
or a Parquet listing with file sizes and modification times). An incremental refresh reads
each base table's change log from there (as RisingWave's batch refresh consumes the upstream
log from the last committed epoch). Written only in the transaction that finishes a
successful refresh, and only when that refresh left the object equal to its query over that
input; cleared otherwise, so a stale position is never used.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from sparkmv.catalog.models import PositionRow


class PositionStore:
    """Reads and replaces consumed positions inside a caller's session."""

    @staticmethod
    def load(session: Session, object_id: int) -> dict[str, dict[str, Any]]:
        """Qualified base table -> consumed position (JSON) of one object; empty when none
        is stored (never refreshed, or the last refresh did not cover every change)."""
        rows = session.scalars(select(PositionRow).where(PositionRow.object_id == object_id))
        return {r.base_table: r.position for r in rows}

    @staticmethod
    def replace(session: Session, object_id: int, run_id: int, positions: dict[str, dict[str, Any]]) -> None:
        """Replace every position of ``object_id`` with ``positions`` (consumed by ``run_id``)."""
        session.execute(delete(PositionRow).where(PositionRow.object_id == object_id))
        session.add_all(
            PositionRow(object_id=object_id, base_table=t, position=p, run_id=run_id) for t, p in positions.items()
        )
        session.flush()

    @staticmethod
    def clear(session: Session, object_id: int) -> None:
        """Forget the positions of ``object_id`` (its next refresh cannot be incremental)."""
        session.execute(delete(PositionRow).where(PositionRow.object_id == object_id))
        session.flush()

    @staticmethod
    def count_at(session: Session, base_table: str, snapshot_id: int) -> int:
        """How many objects consumed ``base_table`` at Iceberg snapshot ``snapshot_id``."""
        rows = session.scalars(select(PositionRow.position).where(PositionRow.base_table == base_table))
        return sum(1 for p in rows if isinstance(p, dict) and p.get("snapshot_id") == snapshot_id)
