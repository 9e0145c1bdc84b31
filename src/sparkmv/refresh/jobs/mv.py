"""Job kind: refresh of a materialized view (FULL or PCT).

Plans with :func:`sparkmv.refresh.planner.plan_refresh` over pinned base tables, computes
a chunk of MV partitions with :func:`sparkmv.refresh.compute.compute_chunk`, and publishes
with :mod:`sparkmv.refresh.publish` (one commit tagged with the run id, or one per chunk
with ``publish = per_chunk``); the catalog side of a finished run stores the version map.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session

from sparkmv.analysis.lineage import Lineage
from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.catalog.versions import VersionEntry
from sparkmv.errors import InactiveError, RefreshError
from sparkmv.names import ObjectName
from sparkmv.refresh import timing
from sparkmv.refresh.context import MvDefinition, lineage_of, pin_for_refresh
from sparkmv.refresh.expectations import ExpectationCheck
from sparkmv.refresh.incremental.candidates import Candidate
from sparkmv.refresh.incremental.decide import IncrementalInput, decide
from sparkmv.refresh.jobs.base import ChunkOutcome, ChunkRecord, Job, JobSettings, RunContext
from sparkmv.refresh.planner import Plan, RefreshRequest, base_partitions_for
from sparkmv.refresh.runtime import Runtime
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage import warehouse
from sparkmv.storage.iceberg import RUN_ID_PROPERTY

if TYPE_CHECKING:  # pyspark is imported where a chunk is computed
    from pyspark.sql.types import StructType

    from sparkmv.analysis.ivm import IvmAnalysis
    from sparkmv.refresh.incremental.stage_state import StagedFull

log = logging.getLogger("sparkmv.refresh")


TINY_RUN_BYTES = 4 * 1024 * 1024
"""An incremental run estimated to read at most this (bytes) of a small MV runs on the
tiny-input session (:meth:`MvRefreshJob._tiny_session`)."""


@dataclass(frozen=True)
class MvRunPlan:
    """The stored plan of an MV refresh run.

    Attributes:
        plan: what to refresh (mode, chunks, consumed base partitions).
        pinned: qualified base table -> the input pinned for the whole run.
        mv_snapshot: the MV's Iceberg snapshot when planned; an atomic publish requires it.
        inputs: INCREMENTAL only: base table -> consumed position and appended files.
        candidates: the techniques AUTO weighed (empty when none were).
    """

    plan: Plan
    pinned: dict[str, PinnedTable]
    mv_snapshot: int | None
    inputs: dict[str, IncrementalInput] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)

    @property
    def mode(self) -> str:
        """FULL, PCT, INCREMENTAL or SKIP."""
        return self.plan.mode

    @property
    def reason(self) -> str:
        """Why this mode."""
        return self.plan.reason

    @property
    def partitions_planned(self) -> int:
        """MV partitions refreshed."""
        return len(self.plan.partitions)

    def chunk_partitions(self) -> list[list[Any]]:
        """The MV partitions of each chunk (None: the whole MV)."""
        return [c.partitions for c in self.plan.chunks]  # type: ignore[misc]

    @property
    def candidate_rows(self) -> list[dict[str, Any]] | None:
        """The candidates as stored in ``sparkmv.task_runs.candidates`` (None: none weighed)."""
        return [c.to_json() for c in self.candidates] or None

    @property
    def estimate_bytes(self) -> int | None:
        """The chosen candidate's estimate (None when none was weighed or chosen)."""
        return next((c.estimate_bytes for c in self.candidates if c.chosen), None)

    def to_json(self) -> dict[str, Any]:
        """``{"plan", "pinned", "mv_snapshot", "inputs", "candidates"}`` (runs stored before
        incremental refresh have the first three)."""
        return {
            "plan": self.plan.to_json(),
            "pinned": {t: p.to_json() for t, p in self.pinned.items()},
            "mv_snapshot": self.mv_snapshot,
            "inputs": {t: i.to_json() for t, i in self.inputs.items()},
            "candidates": [c.to_json() for c in self.candidates],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MvRunPlan:
        """Inverse of :meth:`to_json`.

        Raises:
            RefreshError: when ``data`` holds no plan.
        """
        if "plan" not in data:
            raise RefreshError("the run has no stored plan to resume")
        pinned = {t: PinnedTable.from_json(p) for t, p in data.get("pinned", {}).items()}
        inputs = {t: IncrementalInput.from_json(i) for t, i in (data.get("inputs") or {}).items()}
        candidates = [Candidate.from_json(c) for c in data.get("candidates") or []]
        return cls(Plan.from_json(data["plan"]), pinned, data.get("mv_snapshot"), inputs, candidates)


class MvRefreshJob(Job[MvRunPlan]):
    """The refresh of one materialized view (one run)."""

    def __init__(self, rt: Runtime, row: ObjectRow) -> None:
        super().__init__(rt, row)
        self.mv = MvDefinition.from_row(row)
        self.object_id = row.id
        self.name = self.mv.name
        props = self.mv.properties
        self.settings = JobSettings(props.lease_timeout_seconds, props.lease_renew_seconds, props.max_refresh_attempts)
        self.per_chunk = props.publish == "PER_CHUNK"
        self.lineage: Lineage | None = None
        """Partition lineage, traced once per run (sqlglot lineage costs ~0.1 s)."""
        self.target: StructType | None = None
        """The MV table's Spark schema, loaded once per run (chunks cast their rows to it)."""
        self.layout: tuple[list[str], int | None] | None = None
        """The MV's key columns and current size, loaded once per run (chunks cluster by it)."""
        self.staged: StagedFull | None = None
        """A FULL run over the kept states of the inner stages (:meth:`_stage_state`)."""
        self.files_replaced: int | None = None
        """Data files the run's commits removed, counted once published."""

    @classmethod
    def open(cls, rt: Runtime, s: Session, name: ObjectName) -> MvRefreshJob:
        """The job of MV ``name``.

        Raises:
            ObjectNotFoundError: no such MV. InactiveError: the MV is inactive (with why).
        """
        row = rt.catalog.objects.get(s, name, ObjectKind.MATERIALIZED_VIEW)
        if not row.is_active:
            raise InactiveError(f"MV '{name}' is inactive: {row.inactive_reason}")
        return cls(rt, row)

    def run_fields(self, request: RefreshRequest) -> dict[str, Any]:
        """Priority, publish mode and the request of a new run."""
        return {
            "priority": self.mv.properties.task_priority,
            "publish": self.mv.properties.publish.lower(),
            "request_options": request.to_json(),
        }

    def throttle_per_minute(self) -> float:
        """``throttle_chunks_per_minute``, read fresh: it may change while the run goes."""
        with self.rt.catalog.read() as s:
            row = self.rt.catalog.objects.by_id(s, self.object_id)
            return float((row.properties or {}).get("throttle_chunks_per_minute", 0) or 0)

    # -- planning ---------------------------------------------------------------------------
    def make_plan(self, ctx: RunContext) -> MvRunPlan:
        """Pin the base tables and plan FULL / PCT / SKIP."""
        mv, catalog = self.mv, self.rt.catalog
        with timing.phase("pin"):
            pinned = pin_for_refresh(catalog, self.rt.iceberg, mv)
        decision = decide(self.rt, mv, pinned, ctx.request)
        self.lineage = decision.planner_input.lineage
        plan = decision.plan
        log.info("run %s of %s: %d chunks", ctx.run_id, mv.name, len(plan.chunks))
        snapshot = decision.planner_input.mv_snapshot_id
        self.plan = MvRunPlan(plan, pinned, snapshot, decision.inputs, decision.candidates)
        return self.plan

    def plan_from_json(self, data: dict[str, Any]) -> MvRunPlan:
        """The stored plan of a resumed run."""
        self.plan = MvRunPlan.from_json(data)
        return self.plan

    def _tiny_session(self) -> Any:
        """The child session for tiny inputs (:data:`~sparkmv.refresh.small_mv.TINY_INPUT_CONF`:
        no adaptive re-planning, no code generation, one shuffle partition) when this
        incremental run reads at most :data:`TINY_RUN_BYTES` by its estimate and the MV is
        small: a refresh of a few rows then costs no code generation (compiled anew per
        plan, most of such a run: bench/RESULTS.md, "Where the time goes"); else None."""
        from sparkmv.refresh.small_mv import is_small, tiny_session

        estimate = next((c.estimate_bytes for c in self.plan.candidates if c.chosen), None)
        if estimate is None or estimate > TINY_RUN_BYTES or not self.rt.has_spark:
            return None
        if not is_small(self.rt.iceberg.load(self.mv.name)):
            return None
        return tiny_session(self.rt.spark)

    # -- chunks -------------------------------------------------------------------------------
    def compute(self, ctx: RunContext, chunk_ids: list[int], attempt_name: str) -> dict[int, ChunkOutcome]:
        """Compute each chunk's MV partitions into ``<staging>/<attempt_name>``."""
        from sparkmv.refresh.compute import cluster_layout, compute_chunk, mv_schema

        [root] = self.staging_roots(ctx.run_id)
        if self.plan.mode == "INCREMENTAL":
            from sparkmv.refresh.jobs.incremental import compute_incremental

            [chunk_id] = chunk_ids
            with self.rt.using(self._tiny_session()):
                outcome = compute_incremental(
                    self.rt,
                    self.mv,
                    self.plan.pinned,
                    self.plan.inputs,
                    self.plan.mv_snapshot,
                    warehouse.join(root, attempt_name),
                )
            return {chunk_id: outcome}
        out: dict[int, ChunkOutcome] = {}
        for chunk_id in chunk_ids:
            chunk = self.plan.plan.chunks[chunk_id]
            if self.lineage is None:
                self.lineage = lineage_of(self.mv, self.plan.pinned)
            if self.target is None:
                self.target = mv_schema(self.rt, self.mv)
                self.layout = cluster_layout(self.rt, self.mv)
                self.staged = self._stage_state(self.target)
            restrict = base_partitions_for(chunk, self.lineage, self.plan.pinned)
            tag = f"r{ctx.run_id}c{chunk_id}"
            check = ExpectationCheck(self.name.display, self.mv.expectations)
            staged = compute_chunk(
                self.rt,
                self.mv,
                self.plan.pinned,
                chunk,
                restrict,
                warehouse.join(root, attempt_name),
                tag,
                self.target,
                self.layout,
                self.staged,
                check,
            )
            out[chunk_id] = ChunkOutcome(staged.files, staged.rows, staged.bytes, check.detail() or None)
        return out

    def _stage_state(self, target: StructType) -> StagedFull | None:
        """For a FULL run: keep the state of the MV's decomposable inner stages over the
        run's input, for the next INCREMENTAL run, and compute the MV from those states
        when every stage of its top level keeps one
        (:mod:`sparkmv.refresh.incremental.stage_state`); only for an MV with
        ``refresh_mode = 'INCREMENTAL'``. The state is a cache checked on read: a failure to write it is logged,
        and the MV's query runs as written."""
        if self.plan.mode != "FULL" or self.mv.properties.refresh_mode not in ("INCREMENTAL", "AUTO"):
            return None
        from sparkmv.refresh.incremental.decide import mv_analysis

        analysis = mv_analysis(self.rt, self.mv, self.plan.pinned)
        strict = self.mv.properties.refresh_mode == "INCREMENTAL"
        # Stage state only for strict INCREMENTAL: writing it costs an AUTO MV's FULL refresh
        # more than its next INCREMENTAL run saves at TPC-H SF 1 (Q17: 12 s against 8 s,
        # bench/RESULTS.md). A reduced state makes the FULL itself cheaper: for both.
        if analysis.reason is not None or not ((analysis.stages and strict) or analysis.correlated is not None):
            return None
        location = self.rt.iceberg.load(self.name).location()
        try:
            if analysis.correlated is not None:
                return self._reduced_state(location, analysis, target)
            from sparkmv.refresh.incremental.stage_state import full_over_states

            return full_over_states(self.rt, location, analysis, self.plan.pinned, [f.name for f in target.fields])
        except Exception as exc:  # a cache: the refresh runs the query as written
            log.warning("stage state of %s not written: %s", self.name.display, exc)
            return None

    def _reduced_state(self, location: str, analysis: IvmAnalysis, target: StructType) -> StagedFull | None:
        """The FULL run over the MV's reduced state, written first
        (:mod:`sparkmv.refresh.incremental.reduced_state`); None without one."""
        from sparkmv.analysis.correlated import used_columns
        from sparkmv.analysis.query import parse_query
        from sparkmv.refresh.compute import stored_query
        from sparkmv.refresh.incremental.reduced_state import full_over_reduced

        assert analysis.correlated is not None
        stored = stored_query(self.mv, [f.name for f in target.fields]).sql(dialect="spark")
        used = used_columns(parse_query(analysis.augmented_sql))
        return full_over_reduced(self.rt, location, analysis.correlated, self.plan.pinned, stored, used)

    def publish_recorded(self, ctx: RunContext, records: list[ChunkRecord]) -> None:
        """``publish = per_chunk``: commit each recorded chunk not yet committed."""
        from sparkmv.refresh.publish import publish_chunk

        if not self.per_chunk:
            return
        for record in records:
            if record.published:
                continue
            ctx.require_lease(f"publishing chunk {record.chunk_id}")
            chunk = self.plan.plan.chunks[record.chunk_id]
            publish_chunk(self.rt, ctx.run_id, self.mv, self.plan.plan, record.chunk_id, record.files, chunk)
            with self.rt.catalog.transaction() as s:
                self.rt.catalog.runs.mark_published(s, ctx.run_id, [record.chunk_id])

    # -- publishing ---------------------------------------------------------------------------
    def publish(self, ctx: RunContext, chunks: list[ChunkRecord], recovering: bool) -> int | None:
        """One commit tagged with the run id; when ``recovering``, only if it did not land.
        Counts the data files the run's commits removed (:attr:`files_replaced`)."""
        snapshot_id = self._publish(ctx, chunks, recovering)
        self.files_replaced = files_removed_by_run(self.rt.iceberg.load(self.name), ctx.run_id)
        return snapshot_id

    def _publish(self, ctx: RunContext, chunks: list[ChunkRecord], recovering: bool) -> int | None:
        from sparkmv.refresh.publish import publish_run

        if recovering:
            table = self.rt.iceberg.load(self.name)
            snapshot_id = self.rt.iceberg.snapshot_of_run(table, ctx.run_id)
            if snapshot_id is not None and not (self.plan.plan.chunks and self.per_chunk):
                log.info("run %s: commit already landed (snapshot %s); completing the catalog", ctx.run_id, snapshot_id)
                return snapshot_id
            log.info("run %s: publishing again during recovery", ctx.run_id)
        if self.plan.mode == "INCREMENTAL":
            from sparkmv.refresh.jobs.incremental import publish_incremental

            [record] = chunks
            files, detail = record.files, record.outcome or {}
            return publish_incremental(
                self.rt, ctx.run_id, self.mv, files, detail, self.plan.mv_snapshot, self.plan.pinned
            )
        return publish_run(self.rt, ctx.run_id, self.mv, self.plan.plan, self.plan.mv_snapshot)

    def finish_fields(self, s: Session, run_id: int, chunks: list[ChunkRecord]) -> dict[str, Any]:
        """Store the version map consumed by the run."""
        catalog = self.rt.catalog
        upserts, removals, replace_all = _version_updates(self.plan.plan, self.plan.pinned, s, catalog, self.object_id)
        catalog.versions.apply(s, self.object_id, run_id, upserts, removals, replace_all)
        _record_positions(s, catalog, self.object_id, run_id, self.plan.pinned)
        files = {"files_written": sum(len(c.files) for c in chunks), "files_replaced": self.files_replaced}
        if self.plan.mode == "INCREMENTAL":  # the MV partitions the merge rewrote
            detail = (chunks[0].outcome or {}) if chunks else {}
            return {"partitions_done": len(detail.get("replace") or []), **files}
        return {"partitions_done": len(self.plan.plan.partitions), **files}


def files_removed_by_run(table: Any, run_id: int) -> int:
    """Data files removed by the snapshots of pyiceberg ``table`` tagged with ``run_id``
    (their summaries' ``deleted-data-files``)."""
    return sum(
        int(snap.summary.get("deleted-data-files") or 0)
        for snap in table.snapshots()
        if snap.summary is not None and snap.summary.get(RUN_ID_PROPERTY) == str(run_id)
    )


def _record_positions(s: Session, catalog: Any, object_id: int, run_id: int, pinned: dict[str, PinnedTable]) -> None:
    """Store the run's pinned input as the MV's consumed positions when the MV now equals
    its query over that input: every pinned partition's version is in the version map (an
    INCREMENTAL or complete FULL/PCT run). Otherwise (a range, a partition limit, excluded
    tables) forget the positions: the next run cannot be incremental until one covers all."""
    versions = catalog.versions.load(s, object_id)
    current = {(t, path): v for t, p in pinned.items() for path, v in p.versions().items()}
    if {k: e.version for k, e in versions.items() if k[0] in pinned} == current:
        catalog.positions.replace(s, object_id, run_id, {t: p.to_json() for t, p in pinned.items()})
    else:
        catalog.positions.clear(s, object_id)


def _version_updates(
    plan: Plan, pinned: dict[str, PinnedTable], s: Any, catalog: Any, object_id: int
) -> tuple[list[VersionEntry], list[tuple[str, str]], bool]:
    """Version map changes of a successful run, from ``plan.consumed``."""

    def entry(table: str, path: str) -> VersionEntry:
        p = pinned[table].partitions[path]
        return VersionEntry(table, path, p.version, p.changed_at)

    if plan.mode in ("FULL", "INCREMENTAL") and all(v == ["*"] for v in plan.consumed.values()):
        return [entry(t, path) for t, p in pinned.items() for path in p.partitions], [], True
    existing = catalog.versions.load(s, object_id)
    upserts: list[VersionEntry] = []
    removals: list[tuple[str, str]] = []
    for table, paths in plan.consumed.items():
        if table not in pinned:
            continue
        if paths == ["*"]:
            removals.extend(k for k in existing if k[0] == table and k[1] not in pinned[table].partitions)
            upserts.extend(entry(table, path) for path in pinned[table].partitions)
            continue
        for path in paths:
            if path in pinned[table].partitions:
                upserts.append(entry(table, path))
            elif (table, path) in existing:
                removals.append((table, path))
    return upserts, removals, False
