"""Expectations applied to the rows a refresh computes, with Spark.

:class:`ExpectationCheck` wraps the DataFrame a chunk writes: an observation
(``DataFrame.observe``, computed inside the write's own Spark job, no extra pass) counts
per expectation the rows whose condition is TRUE and all rows, then the rows failing a
``drop`` expectation are filtered out. Signed rows (an incremental delta, column
:data:`~sparkmv.analysis.signed.SIGN`) are filtered whatever their sign — a filter is linear
over a Z-set, so the delta of the filtered query is the filtered delta — and counted over
their inserted rows only: the rows the run processed. After the write, :meth:`results`
gives the counts and :meth:`raise_on_failure` fails the refresh when a ``fail`` expectation
saw a violating row, naming it and one such row.

Which rows a run counts: a FULL refresh every row of the query, a PCT refresh the rows of the
recomputed partitions, an INCREMENTAL refresh the rows its delta inserts (delta rules) or
the recomputed rows of the touched keys (affected-key recomputation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sparkmv.analysis.expectations import FAIL, Expectation, drop_condition
from sparkmv.analysis.signed import SIGN
from sparkmv.catalog.expectations import ExpectationResult
from sparkmv.errors import RefreshError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SAMPLE_CHARS = 500
"""Characters of a sample violating row shown in a failed refresh's error."""


class ExpectationFailedError(RefreshError):
    """A ``FAIL UPDATE`` expectation saw a violating row: the refresh fails, the dataset
    unchanged.

    Attributes:
        results: every expectation's counts over the rows the run processed.
    """

    def __init__(self, message: str, results: list[ExpectationResult]) -> None:
        super().__init__(message)
        self.results = results


class ExpectationCheck:
    """Counts and applies ``expectations`` of ``dataset`` to the rows of one or more writes.

    Use: ``df = check.apply(df)`` before each write of a run, then, once written,
    ``check.collect()``; finally :meth:`results` / :meth:`raise_on_failure`.
    """

    def __init__(self, dataset: str, expectations: Sequence[Expectation]) -> None:
        self.dataset = dataset
        self.expectations = tuple(expectations)
        self._pending: list[tuple[object, DataFrame]] = []
        self._passed = [0] * len(self.expectations)
        self._total = 0
        self._unfiltered: list[DataFrame] = []

    def __bool__(self) -> bool:
        return bool(self.expectations)

    def apply(self, df: DataFrame) -> DataFrame:
        """``df`` observed (the counts) and filtered by the ``drop`` expectations; ``df``
        itself when there are no expectations."""
        if not self.expectations:
            return df
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        counted = F.col(f"`{SIGN}`") > 0 if SIGN in df.columns else F.lit(True)
        metrics = [F.count_if(counted).alias("total")]
        for i, e in enumerate(self.expectations):
            metrics.append(F.count_if(counted & F.coalesce(F.expr(e.condition), F.lit(False))).alias(f"p{i}"))
        observation = Observation(f"sparkmv_expectations_{id(self)}_{len(self._pending)}")
        observed = df.observe(observation, *metrics)
        self._pending.append((observation, df))
        drop = drop_condition(self.expectations)
        return observed.where(F.coalesce(F.expr(drop), F.lit(False))) if drop else observed

    def discard(self) -> None:
        """Forget the newest :meth:`apply` whose DataFrame was not written (computed again
        another way)."""
        if self._pending:
            self._pending.pop()

    def collect(self) -> None:
        """Add the counts of every applied DataFrame written since the last call (call only
        after their writes ran: reading an observation waits for its action)."""
        for observation, df in self._pending:
            got = observation.get  # type: ignore[attr-defined]
            self._total += int(got.get("total") or 0)
            for i in range(len(self.expectations)):
                self._passed[i] += int(got.get(f"p{i}") or 0)
            self._unfiltered.append(df)
        self._pending.clear()

    def detail(self) -> dict[str, Any]:
        """After the writes: their counts collected, the refresh failed on a ``fail``
        expectation's violation (:meth:`raise_on_failure`), and the chunk outcome's part:
        ``{"expectations": [...]}`` (:func:`results_json`; ``{}`` without expectations)."""
        if not self.expectations:
            return {}
        self.collect()
        self.raise_on_failure()
        return {"expectations": results_json(self.results())}

    def results(self) -> list[ExpectationResult]:
        """Each expectation's rows passed and failed so far."""
        return [
            ExpectationResult(e.name, e.action, e.condition, p, self._total - p)
            for e, p in zip(self.expectations, self._passed, strict=True)
        ]

    def raise_on_failure(self) -> None:
        """Raise when a ``fail`` expectation saw a violating row.

        Raises:
            ExpectationFailedError: ``expectation 'e' of 'ds' failed (ON VIOLATION FAIL
                UPDATE): n of m rows violate (cond); a violating row: {...}``.
        """
        for e, result in zip(self.expectations, self.results(), strict=True):
            if e.action == FAIL and result.rows_failed > 0:
                total = result.rows_passed + result.rows_failed
                raise ExpectationFailedError(
                    f"expectation '{e.name}' of '{self.dataset}' failed (ON VIOLATION FAIL UPDATE): "
                    f"{result.rows_failed} of {total} rows violate ({e.condition}); "
                    f"a violating row: {self._sample(e)}",
                    self.results(),
                )

    def _sample(self, e: Expectation) -> str:
        """One violating row as JSON (the hidden columns left out), or ``unknown``."""
        from pyspark.sql import functions as F

        for df in self._unfiltered:
            counted = F.col(f"`{SIGN}`") > 0 if SIGN in df.columns else F.lit(True)
            rows = df.where(counted & ~F.coalesce(F.expr(e.condition), F.lit(False))).limit(1).collect()
            if rows:
                values = {k: v for k, v in rows[0].asDict().items() if not k.startswith("__smv_")}
                return json.dumps(values, default=str)[:SAMPLE_CHARS]
        return "unknown"


def results_json(results: Sequence[ExpectationResult]) -> list[dict[str, Any]]:
    """Results as stored in a chunk's outcome (``{"expectations": [...]}``)."""
    return [
        {
            "expectation": r.expectation,
            "action": r.action,
            "condition": r.condition,
            "passed": r.rows_passed,
            "failed": r.rows_failed,
        }
        for r in results
    ]


def summed(outcomes: Sequence[dict[str, Any] | None]) -> list[ExpectationResult]:
    """The run's results: the sum over its chunks' outcomes (key ``expectations``, as
    :func:`results_json` stores them), in the order the first chunk lists them."""
    passed: dict[tuple[str, str, str], list[int]] = {}
    for outcome in outcomes:
        for d in (outcome or {}).get("expectations") or []:
            counts = passed.setdefault((str(d["expectation"]), str(d["action"]), str(d["condition"])), [0, 0])
            counts[0] += int(d["passed"])
            counts[1] += int(d["failed"])
    return [ExpectationResult(n, a, c, p, f) for (n, a, c), (p, f) in passed.items()]
