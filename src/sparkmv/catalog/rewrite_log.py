"""RewriteLogStore: ``smv_rewrite_log``, the queries considered for query rewrite.

Read as the system table ``sparkmv.rewrite_log``. One row per MV a rewritten query used, or
one row with ``mv`` NULL when the query had candidate MVs but none was used. The log is
bounded: each insert also deletes the rows more than ``keep`` ids older than the newest
(a range delete on the primary key, nothing to do in the common case), so a catalog holds
at most the last ``keep`` rows (:data:`KEEP` by default). Query text and rejection reasons
are truncated to :data:`QUERY_CHARS` and :data:`REJECTED_CHARS`.

Each method owns its transaction; typed records (:class:`RewriteLogEntry`) go in and come
out, never ORM rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select

from sparkmv.catalog.database import Database
from sparkmv.catalog.models import RewriteLogRow

KEEP = 10_000
"""Rows of the rewrite log kept per catalog (older ones are deleted on insert)."""
QUERY_CHARS = 1000
"""Characters of a query's text kept in the log (the fingerprint identifies the whole query)."""
REJECTED_CHARS = 2000
"""Characters of the rejected candidates' reasons kept in the log."""


@dataclass(frozen=True)
class RewriteLogEntry:
    """One row of the rewrite log.

    Attributes:
        query_time: when the query ran (UTC, naive).
        fingerprint: hex digest of the query with its literals replaced.
        query: the query's text (truncated to :data:`QUERY_CHARS`).
        mv: the MV used (display name), None when no MV was used.
        rewrite_class: ``exact``, ``rollup``, ``predicate`` or ``union``; None when no MV was used.
        analysis_ms: milliseconds the rewrite analysis took for the whole query.
        rejected: ``<mv>: <reason>`` of each rejected candidate, ``; ``-separated, or None.
    """

    query_time: datetime
    fingerprint: str
    query: str
    mv: str | None
    rewrite_class: str | None
    analysis_ms: float
    rejected: str | None


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 3] + "..."


class RewriteLogStore:
    """Appends to and reads the rewrite log (each method one transaction)."""

    def __init__(self, database: Database, keep: int = KEEP) -> None:
        self.db = database
        self.keep = keep

    def record(self, entries: Sequence[RewriteLogEntry]) -> None:
        """Append ``entries`` (one query's rows) and drop the rows beyond the newest ``keep``.

        Raises:
            CatalogError: when the catalog database fails.
        """
        if not entries:
            return
        rows = [
            RewriteLogRow(
                query_time=e.query_time,
                fingerprint=e.fingerprint,
                query=_clip(e.query, QUERY_CHARS) or "",
                mv=e.mv,
                rewrite_class=e.rewrite_class,
                analysis_ms=e.analysis_ms,
                rejected=_clip(e.rejected, REJECTED_CHARS),
            )
            for e in entries
        ]
        with self.db.transaction() as s:
            s.add_all(rows)
            s.flush()
            newest = max(r.id for r in rows)
            s.execute(delete(RewriteLogRow).where(RewriteLogRow.id <= newest - self.keep))

    def list(self, limit: int | None = None, mv: str | None = None) -> list[RewriteLogEntry]:
        """The log, newest first (at most ``limit`` rows; only the rows of MV ``mv``, its
        display name, when given)."""
        stmt = select(RewriteLogRow).order_by(RewriteLogRow.id.desc())
        if mv is not None:
            stmt = stmt.where(RewriteLogRow.mv == mv)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self.db.read() as s:
            return [
                RewriteLogEntry(r.query_time, r.fingerprint, r.query, r.mv, r.rewrite_class, r.analysis_ms, r.rejected)
                for r in s.scalars(stmt)
            ]

    def count(self, mv: str) -> int:
        """Rows naming MV ``mv`` (display name): the queries it answered still in the log."""
        with self.db.read() as s:
            return int(s.scalar(select(func.count()).select_from(RewriteLogRow).where(RewriteLogRow.mv == mv)) or 0)
