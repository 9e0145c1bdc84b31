"""VersionStore: the version map (``smv_version_map``).

Per object, base table and base partition, the version the object last consumed
(Iceberg: last-updated snapshot id; Parquet path: file count, bytes, newest modification
time, names hash). Written only in the transaction that finishes a successful refresh.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from sparkmv.catalog.models import VersionRow


@dataclass(frozen=True)
class VersionEntry:
    """One consumed base partition version.

    Attributes:
        base_table: qualified base table name.
        base_partition: Hive-style partition path (``col=value``), ``""`` when unpartitioned.
        version: opaque version string.
        changed_at: epoch seconds of the newest change in that partition, if known.
    """

    base_table: str
    base_partition: str
    version: str
    changed_at: float | None = None


class VersionStore:
    """Reads and replaces version map entries inside a caller's session."""

    @staticmethod
    def load(session: Session, object_id: int) -> dict[tuple[str, str], VersionEntry]:
        """The version map of one object, keyed by ``(base_table, base_partition)``."""
        # Columns, not ORM objects: an MV over a table partitioned by day has thousands of
        # entries, loaded several times per run (ORM objects cost ~0.1 s per load).
        rows = session.execute(
            select(VersionRow.base_table, VersionRow.base_partition, VersionRow.version, VersionRow.changed_at).where(
                VersionRow.object_id == object_id
            )
        )
        return {(t, p): VersionEntry(t, p, v, at) for t, p, v, at in rows}

    @staticmethod
    def apply(
        session: Session,
        object_id: int,
        run_id: int,
        upserts: list[VersionEntry],
        removals: list[tuple[str, str]],
        replace_all: bool = False,
    ) -> None:
        """Record consumed versions: upsert ``upserts``, delete ``removals``.

        With ``replace_all`` the whole map is replaced by ``upserts`` (a full refresh).
        """
        if replace_all:
            session.execute(delete(VersionRow).where(VersionRow.object_id == object_id))
        else:
            for table, partition in removals:
                session.execute(
                    delete(VersionRow).where(
                        VersionRow.object_id == object_id,
                        VersionRow.base_table == table,
                        VersionRow.base_partition == partition,
                    )
                )
            for e in upserts:
                session.execute(
                    delete(VersionRow).where(
                        VersionRow.object_id == object_id,
                        VersionRow.base_table == e.base_table,
                        VersionRow.base_partition == e.base_partition,
                    )
                )
        session.flush()
        session.add_all(
            VersionRow(
                object_id=object_id,
                base_table=e.base_table,
                base_partition=e.base_partition,
                version=e.version,
                changed_at=e.changed_at,
                run_id=run_id,
            )
            for e in upserts
        )
        session.flush()
