"""ExpectationStore: ``smv_expectation_results``, the rows that passed and failed each
expectation of a dataset in each refresh run (the system table ``sparkmv.expectations``).

Written inside the caller's transaction, the one that finishes the run (SUCCESS, or FAILED by
a ``FAIL UPDATE`` expectation), so the results of a run exist exactly when the run ended.
Typed records (:class:`ExpectationResult`) go in and come out.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ExpectationResultRow


@dataclass(frozen=True)
class ExpectationResult:
    """One expectation's count over the rows one run processed.

    Attributes:
        expectation: its name; action: ``warn``, ``drop`` or ``fail``; condition: as written.
        rows_passed, rows_failed: rows whose condition was TRUE, and FALSE or NULL.
        run_id, dataset, recorded_at: set when read back (the run, the dataset's display
            name, when the result was stored: UTC, naive).
    """

    expectation: str
    action: str
    condition: str
    rows_passed: int
    rows_failed: int
    run_id: int | None = None
    dataset: str | None = None
    recorded_at: datetime | None = None


class ExpectationStore:
    """Reads and writes expectation results inside a caller's session."""

    @staticmethod
    def record(session: Session, run_id: int | None, dataset: str, results: Iterable[ExpectationResult]) -> None:
        """Store ``results`` of run ``run_id`` of ``dataset`` (replacing any stored for that
        run: a resumed run records its totals once; None: a pipeline's refresh of a dataset
        outside the run lifecycle, always added)."""
        if run_id is not None:
            for old in session.scalars(select(ExpectationResultRow).where(ExpectationResultRow.run_id == run_id)):
                session.delete(old)
        now = utcnow()
        for r in results:
            session.add(
                ExpectationResultRow(
                    run_id=run_id,
                    dataset=dataset,
                    expectation=r.expectation,
                    action=r.action,
                    condition=r.condition,
                    rows_passed=r.rows_passed,
                    rows_failed=r.rows_failed,
                    recorded_at=now,
                )
            )
        session.flush()

    @staticmethod
    def list(
        session: Session,
        dataset: str | None = None,
        run_ids: Iterable[int] | None = None,
        limit: int | None = None,
    ) -> builtins.list[ExpectationResult]:
        """Results, newest first (of ``dataset`` and of the runs ``run_ids`` when given;
        ``limit``: at most that many)."""
        stmt = select(ExpectationResultRow).order_by(ExpectationResultRow.id.desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        if dataset is not None:
            stmt = stmt.where(ExpectationResultRow.dataset == dataset)
        if run_ids is not None:
            stmt = stmt.where(ExpectationResultRow.run_id.in_(builtins.list(run_ids)))
        return [
            ExpectationResult(
                r.expectation, r.action, r.condition, r.rows_passed, r.rows_failed, r.run_id, r.dataset, r.recorded_at
            )
            for r in session.scalars(stmt)
        ]
