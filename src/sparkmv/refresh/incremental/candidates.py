"""The refresh techniques AUTO weighs, their estimated cost, and the choice.

Cost is estimated in bytes read, from file statistics only (no Spark):

* FULL: every pinned base table file;
* PCT: the base partitions behind the changed MV partitions (a non-reference table is read
  whole by every chunk);
* INCREMENTAL: the appended bytes of each changed base table, plus the bytes of the other
  base tables each delta term joins with, plus the bytes of the MV partitions the merge
  rewrites (none for an append-only projection).

``incremental_max_change_ratio`` (default 0.1, Snowflake's guidance that incremental refresh
pays off while under roughly a tenth of the rows change) caps INCREMENTAL: a larger change
is recomputed. The cheapest eligible candidate wins; on a tie the order INCREMENTAL, PCT,
FULL decides, as StarRocks prefers the least work.

>>> c = choose([Candidate("INCREMENTAL", True, 30, "3 appended bytes"), Candidate("PCT", True, 40, "1 partition"),
...             Candidate("FULL", True, 900, "all")])
>>> [(x.mode, x.chosen) for x in c]
[('INCREMENTAL', True), ('PCT', False), ('FULL', False)]
>>> describe(c)
'INCREMENTAL: cheapest (30 bytes; PCT 40 bytes, FULL 900 bytes)'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparkmv.refresh.cost_model import CostModel

ORDER = ("INCREMENTAL", "PCT", "FULL")


@dataclass(frozen=True)
class Candidate:
    """One refresh technique as weighed for one run.

    Attributes:
        mode: INCREMENTAL, PCT or FULL.
        eligible: True when the technique is correct for this change.
        estimate_bytes: estimated bytes read (None when not eligible and not estimated).
        reason: why it is (not) eligible, or what the estimate covers.
        chosen: True for the technique the run uses.
        changes: INCREMENTAL: the change log read per base table, one dict each with
            ``table``, ``kind`` (``unchanged``, ``append``, ``signed``,
            ``not_append_only``), ``rows_added``, ``rows_retracted``, ``files_read``,
            ``bytes_read``, ``reason`` (why the change cannot be applied, else None) and
            ``source`` (``change data feed`` for a Delta change read from its feed, else
            None); the base tables after one that cannot be applied are not read.
        predicted_seconds: the cost model's prediction of its wall time, when the catalog's
            history fits it (:mod:`sparkmv.refresh.cost_model`; None: AUTO compared bytes).
    """

    mode: str
    eligible: bool
    estimate_bytes: int | None
    reason: str
    chosen: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)
    predicted_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (``sparkmv.task_runs.candidates``, the run's plan)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        """Inverse of :meth:`to_json`."""
        return cls(**data)


def choose(candidates: list[Candidate], model: CostModel | None = None) -> list[Candidate]:
    """``candidates`` with the cheapest eligible one marked chosen (ties: INCREMENTAL, PCT,
    FULL): by the seconds ``model`` predicts when it fits every eligible technique (each
    candidate then carries its ``predicted_seconds``), else by bytes read. Nothing is marked
    when none is eligible.

    >>> from sparkmv.refresh.cost_model import CostModel, Fitted
    >>> m = CostModel({"INCREMENTAL": Fitted(2.0, 1e6, 30), "FULL": Fitted(0.5, 1e8, 30)})
    >>> [c.mode for c in choose([Candidate("INCREMENTAL", True, 1000, ""), Candidate("FULL", True, 5000, "")], m)
    ...  if c.chosen]
    ['FULL']
    """
    eligible = [c for c in candidates if c.eligible and c.estimate_bytes is not None]
    if not eligible:
        return list(candidates)
    predicted = {c.mode: model.predict(c.mode, c.estimate_bytes or 0) for c in eligible} if model else {}
    if len(eligible) > 1 and predicted and all(p is not None for p in predicted.values()):
        candidates = [replace(c, predicted_seconds=predicted.get(c.mode)) for c in candidates]
        eligible = [c for c in candidates if c.eligible and c.estimate_bytes is not None]
        best = min(eligible, key=lambda c: (c.predicted_seconds, ORDER.index(c.mode) if c.mode in ORDER else 9))
    else:
        best = min(eligible, key=lambda c: (c.estimate_bytes, ORDER.index(c.mode) if c.mode in ORDER else 9))
    return [replace(c, chosen=c is best) for c in candidates]


def describe(candidates: list[Candidate]) -> str:
    """One line for the run's ``mode_reason``: the chosen technique and the others' estimates
    or why they were not eligible."""
    chosen = next((c for c in candidates if c.chosen), None)
    if chosen is None:
        return "no technique is eligible: " + "; ".join(f"{c.mode}: {c.reason}" for c in candidates)
    others = [
        f"{c.mode} {size_text(c.estimate_bytes)}" if c.eligible else f"{c.mode} not eligible: {c.reason}"
        for c in candidates
        if c is not chosen
    ]
    tail = f" ({size_text(chosen.estimate_bytes)}; {', '.join(others)})" if others else ""
    if chosen.predicted_seconds is not None:
        seconds = ", ".join(
            f"{c.mode} {c.predicted_seconds:.2f} s" for c in candidates if c.predicted_seconds is not None
        )
        tail += f"; predicted by the cost model fitted on this catalog's runs: {seconds}"
    return f"{chosen.mode}: cheapest{tail}"


def candidate_table(candidates: list[Candidate]) -> list[str]:
    """Lines of a table of the candidates (``EXPLAIN REFRESH``, the demo).

    >>> print("\\n".join(candidate_table([Candidate("FULL", True, 2048, "every base file", True)])))
      technique    eligible  estimate   chosen  reason
      FULL         yes       2.0 KiB    *       every base file
    """
    lines = [f"  {'technique':<12} {'eligible':<9} {'estimate':<10} {'chosen':<7} reason"]
    for c in candidates:
        estimate = size_text(c.estimate_bytes) if c.estimate_bytes is not None else "-"
        lines.append(
            f"  {c.mode:<12} {'yes' if c.eligible else 'no':<9} {estimate:<10} {'*' if c.chosen else '':<7} {c.reason}"
        )
    for c in candidates:
        if c.changes:
            lines.append(f"change log per base table ({c.mode}):")
            lines.extend(change_lines(c.changes))
    return lines


def change_lines(changes: list[dict[str, Any]]) -> list[str]:
    """Lines of the change log per base table (``EXPLAIN REFRESH``).

    >>> print("\\n".join(change_lines([{"table": "default.t", "kind": "signed", "rows_added": 3,
    ...     "rows_retracted": 5, "files_read": 2, "bytes_read": 4096, "reason": None}])))
      default.t            signed           +3 rows   -5 rows   2 files   4.0 KiB
    """
    lines = []
    for ch in changes:
        head = f"  {ch['table']:<20} {ch['kind']:<16}"
        if ch.get("reason"):
            lines.append(f"{head} {ch['reason']}")
        elif ch["kind"] == "unchanged":
            lines.append(head.rstrip())
        else:
            added = "?" if ch.get("rows_added") is None else ch["rows_added"]
            lines.append(
                f"{head} {'+' + str(added) + ' rows':<9} {'-' + str(ch.get('rows_retracted', 0)) + ' rows':<9} "
                f"{str(ch.get('files_read', 0)) + ' files':<9} {size_text(ch.get('bytes_read'))}"
                + (f" ({ch['source']})" if ch.get("source") else "")
            )
    return lines


def size_text(n: int | None) -> str:
    """Bytes as text (``2.0 KiB``)."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    return f"{n} bytes"  # pragma: no cover
