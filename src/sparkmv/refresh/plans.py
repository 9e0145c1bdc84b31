"""The data of a refresh plan: the request (:class:`RefreshRequest`), what the planner
reads (:class:`PlanInput`) and what it decides (:class:`Plan`), stored in the run as JSON so
a resumed run executes exactly the same chunks (:mod:`sparkmv.refresh.planner` makes plans).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from typing import Any

from sparkmv.analysis.lineage import Lineage
from sparkmv.refresh.chunking import Chunk
from sparkmv.refresh.properties import MvProperties
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.partition_values import PartitionText, sort_key

PartitionValue = PartitionText
"""An MV partition value in its one text form (:mod:`sparkmv.storage.partition_values`)."""

RetentionFilter = Callable[[set[PartitionValue]], set[PartitionValue]]
"""Given MV partition values, the ones ``partition_retention_condition`` keeps."""


@dataclass(frozen=True)
class RefreshRequest:
    """What the user asked for.

    Attributes:
        force: refresh every partition in range, changed or not.
        start / end: partition range, start inclusive, end exclusive (None = open).
        automatic: True for scheduler-driven refreshes (``auto_refresh_partitions_limit``).
    """

    force: bool = False
    start: str | None = None
    end: str | None = None
    automatic: bool = False

    def to_json(self) -> dict[str, Any]:
        """The request as stored in a run's ``request_options`` (``automatic`` is not stored:
        it follows from the run's trigger).

        >>> RefreshRequest(True, "2026-01-01", None).to_json()
        {'force': True, 'start': '2026-01-01', 'end': None}
        """
        return {"force": self.force, "start": self.start, "end": self.end}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, automatic: bool = False) -> RefreshRequest:
        """Inverse of :meth:`to_json`; other keys of ``request_options`` (a schedule's due
        time, a retry's attempt) are ignored.

        >>> RefreshRequest.from_json({"force": True, "start": None, "end": "5", "attempt": 2}, automatic=True)
        RefreshRequest(force=True, start=None, end='5', automatic=True)
        """
        opts = data or {}
        return cls(bool(opts.get("force")), opts.get("start"), opts.get("end"), automatic)

    def in_range(self, value: PartitionValue) -> bool:
        """True when ``value`` is inside [start, end)."""
        if self.start is None and self.end is None:
            return True
        if value is None:
            return False
        if self.start is not None and sort_key(value) < sort_key(self.start):
            return False
        return not (self.end is not None and sort_key(value) >= sort_key(self.end))


@dataclass
class Plan:
    """The plan of one run (JSON-able through :meth:`to_json`).

    Attributes:
        mode: FULL, PCT or SKIP.
        reason: why this mode (and, for SKIP, ``up to date``).
        chunks: the chunks, in execution order.
        replace_all: publish replaces the whole MV (FULL) rather than listed partitions.
        drop_partitions: MV partitions removed without recomputation (TTL, retention).
        changed_base_partitions: qualified base table -> changed partition paths.
        partition_reasons: MV partition (text, ``<all>`` for the whole MV) -> why refreshed.
        consumed: qualified base table -> partition paths whose versions the run records on
            success (``["*"]`` = every pinned partition).
    """

    mode: str
    reason: str
    chunks: list[Chunk] = field(default_factory=list)
    replace_all: bool = False
    drop_partitions: list[PartitionValue] = field(default_factory=list)
    changed_base_partitions: dict[str, list[str]] = field(default_factory=dict)
    partition_reasons: dict[str, str] = field(default_factory=dict)
    consumed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def partitions(self) -> list[PartitionValue]:
        """Every MV partition refreshed by the plan (empty for whole-MV chunks)."""
        return [p for c in self.chunks for p in (c.partitions or [])]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (stored in the run)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        """Inverse of :meth:`to_json`."""
        chunks = [Chunk(**c) for c in data.get("chunks", [])]
        return cls(**{**data, "chunks": chunks})


@dataclass(frozen=True)
class PlanInput:
    """Everything the planner reads.

    Attributes:
        partition_by: MV partition column, or None for an unpartitioned MV.
        lineage: partition lineage of the MV.
        pinned: qualified base table -> pinned input.
        version_map: (base table, partition path) -> version consumed last time.
        mv_partitions: MV partitions currently published (values).
        refreshed_before: True when the MV has had a successful refresh.
        properties: the MV's properties.
        request: the user's request.
        today: the date partition TTL is measured from.
        partition_kind: kind of the MV partition column's typed values.
        retention: evaluates ``partition_retention_condition`` (by Spark); None drops nothing.
        mv_snapshot_id: the MV's current snapshot id when ``mv_partitions`` was read (the
            run publishes only if it is still current); None for an empty table.
    """

    partition_by: str | None
    lineage: Lineage
    pinned: dict[str, PinnedTable]
    version_map: dict[tuple[str, str], str]
    mv_partitions: set[PartitionValue]
    refreshed_before: bool
    properties: MvProperties
    request: RefreshRequest = field(default_factory=RefreshRequest)
    today: date = field(default_factory=lambda: datetime.now().date())
    partition_kind: str = "string"
    retention: RetentionFilter | None = None
    mv_snapshot_id: int | None = None
