"""Job kind: ``REFRESH TABLE`` (FULL_RELOAD): reload the associated source and merge the
differences per vnode.

1. Plan: pin the source listing and the table's current snapshot (files per vnode); one
   chunk per vnode (``chunk_id = vnode``, ``partitions = [vnode]``).
2. Prepare: load the source into staging partitioned by ``_vnode``; the load is recorded
   in the plan only once fully written, so a vnode whose staging is incomplete is never
   merged, and a resumed run reuses a recorded load.
3. Compute: merge batches of vnodes (at most ``merge_batch_rows`` staged + table rows
   each, at least one vnode): new table files for changed vnodes and changelog rows.
4. Publish: commit the replaced vnodes to the table and the changelog rows (``I``,
   ``U`` + ``UB``, ``D`` with signs; see :mod:`sparkmv.refresh.reload.ddl`) to
   ``name__changelog`` (both tagged with the run id, so a resumed publish commits only
   what is missing; a changelog without ``sign`` gains it first); the run records the
   inserted / updated / deleted counts.

Everything else (lease, progress table, FINISHING, abort, resume, attempt limit, staging
cleanup) is the lifecycle's (:mod:`sparkmv.refresh.lifecycle`).

Fault points: ``during_load`` (staging written, load not recorded) and
``during_merge[:n]`` (batch ``n``, 0-based within one process's execution, written but
not recorded), besides the lifecycle's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import ObjectNotFoundError, RefreshError
from sparkmv.names import ObjectName
from sparkmv.refresh.jobs.base import ChunkOutcome, ChunkRecord, Job, JobSettings, RunContext
from sparkmv.refresh.reload.options import CHANGELOG_LEAF, SIGN_COLUMN, TableDef, changelog_name
from sparkmv.refresh.reload.source import SourceFile, StagedLoad, list_source, listing_from_json, listing_to_json
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage import warehouse
from sparkmv.storage.iceberg import RUN_ID_PROPERTY, IcebergStore

log = logging.getLogger("sparkmv.reload")

DEFAULT_MAX_ATTEMPTS = 2
"""Attempts of one run (the first plus one resume) before recovery abandons it, unless
the table option ``max_refresh_attempts`` says otherwise."""


def not_refreshable_message(name: ObjectName) -> str:
    """The error text for ``REFRESH TABLE`` on a table without a FULL_RELOAD source."""
    return f"Table '{name.display}' is not refreshable: it has no associated source with refresh_mode FULL_RELOAD"


@dataclass(frozen=True)
class MergeCounts:
    """What merging one vnode did (stored as the progress row's ``outcome``)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    changed: bool = False
    rows: int = 0

    def to_json(self) -> dict[str, Any]:
        """``{"I", "U", "D", "changed", "rows"}``."""
        return {"I": self.inserted, "U": self.updated, "D": self.deleted, "changed": self.changed, "rows": self.rows}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MergeCounts:
        """Inverse of :meth:`to_json` (zero counts for None)."""
        d = data or {}
        return cls(
            int(d.get("I", 0)), int(d.get("U", 0)), int(d.get("D", 0)), bool(d.get("changed")), int(d.get("rows", 0))
        )


@dataclass(frozen=True)
class ReloadPlan:
    """The stored plan of a reload run.

    Attributes:
        listing: the pinned source files (empty for JDBC).
        table_snapshot: the table's snapshot when planned (the publish requires it).
        table_files / table_rows: vnode -> the table's data files / rows at that snapshot.
        vnode_count: vnodes (= chunks) of the table; connector: ``files`` or ``jdbc``.
        load: the staged source, once fully written and recorded.
    """

    listing: list[SourceFile]
    table_snapshot: int | None
    table_files: dict[int, list[str]]
    table_rows: dict[int, int]
    vnode_count: int
    connector: str
    load: StagedLoad | None = None

    @property
    def mode(self) -> str:
        """Always FULL_RELOAD."""
        return "FULL_RELOAD"

    @property
    def reason(self) -> str:
        """What is reloaded."""
        if self.connector == "files":
            return f"reload of {len(self.listing)} source file(s)"
        return "reload of the JDBC query"

    @property
    def candidate_rows(self) -> None:
        """A reload weighs no techniques."""
        return None

    @property
    def estimate_bytes(self) -> None:
        """A reload estimates nothing."""
        return None

    @property
    def partitions_planned(self) -> int:
        """Vnodes."""
        return self.vnode_count

    def chunk_partitions(self) -> list[list[Any]]:
        """One chunk per vnode."""
        return [[v] for v in range(self.vnode_count)]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (``load`` only once recorded)."""
        out: dict[str, Any] = {
            "listing": listing_to_json(self.listing),
            "table_snapshot": self.table_snapshot,
            "table_files": {str(k): v for k, v in self.table_files.items()},
            "table_rows": {str(k): v for k, v in self.table_rows.items()},
            "vnode_count": self.vnode_count,
            "connector": self.connector,
        }
        if self.load is not None:
            out["load"] = self.load.to_json()
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReloadPlan:
        """Inverse of :meth:`to_json` (runs stored before ``vnode_count`` and
        ``connector`` were recorded read with 0 and ``files``)."""
        return cls(
            listing_from_json(data["listing"]),
            data.get("table_snapshot"),
            {int(k): list(v) for k, v in data.get("table_files", {}).items()},
            {int(k): int(v) for k, v in data.get("table_rows", {}).items()},
            int(data.get("vnode_count", 0)),
            str(data.get("connector", "files")),
            StagedLoad.from_json(data["load"]) if "load" in data else None,
        )


class TableReloadJob(Job[ReloadPlan]):
    """The reload of one refreshable table (one run)."""

    def __init__(self, rt: Runtime, row: ObjectRow) -> None:
        super().__init__(rt, row)
        self.tdef = TableDef.from_row(row)
        self.object_id = row.id
        self.name = self.tdef.name
        opts = self.tdef.options
        self.settings = JobSettings(
            int(opts.get("lease_timeout_seconds", 60)),
            int(opts.get("lease_renew_seconds", 10)),
            int(opts.get("max_refresh_attempts", DEFAULT_MAX_ATTEMPTS)),
        )
        self._merges = 0  # merge batches computed by this process (the during_merge ordinal)

    @classmethod
    def open(cls, rt: Runtime, s: Session, name: ObjectName) -> TableReloadJob:
        """The job of refreshable table ``name``.

        Raises:
            ObjectNotFoundError: no such table.
            RefreshError: ``Table 'x' is not refreshable: it has no associated source with
                refresh_mode FULL_RELOAD``; ``Table 'x' has a column named 'sign', reserved
                for the changelog: ...`` (a table created before ``sign`` was reserved).
        """
        row = rt.catalog.objects.find(s, name)
        if row is None:
            raise ObjectNotFoundError(f"table '{name}' does not exist")
        if row.kind != ObjectKind.REFRESHABLE_TABLE or not TableDef.from_row(row).refreshable:
            raise RefreshError(not_refreshable_message(name))
        if any(c.name == SIGN_COLUMN for c in TableDef.from_row(row).columns):
            raise RefreshError(
                f"Table '{name.display}' has a column named '{SIGN_COLUMN}', reserved for the changelog: "
                "recreate the table with another name for that column"
            )
        return cls(rt, row)

    def run_fields(self, request: Any) -> dict[str, Any]:
        """The mode of a new run."""
        return {"mode": "FULL_RELOAD"}

    def tables(self) -> list[ObjectName]:
        """The table and its changelog table."""
        return [self.name, changelog_name(self.name)]

    # -- planning -----------------------------------------------------------------------------
    def make_plan(self, ctx: RunContext) -> ReloadPlan:
        """Pin the source listing and the table's files per vnode."""
        listing = list_source(self.tdef)
        table = self.rt.iceberg.load(self.name)
        snap = table.current_snapshot()
        files: dict[int, list[str]] = {}
        rows: dict[int, int] = {}
        for f in IcebergStore.data_files(table):
            key = int(f.partition) if f.partition is not None else 0
            files.setdefault(key, []).append(f.path)
            rows[key] = rows.get(key, 0) + f.record_count
        self.plan = ReloadPlan(
            listing,
            snap.snapshot_id if snap else None,
            files,
            rows,
            self.tdef.vnode_count,
            str(self.tdef.options["connector"]),
        )
        return self.plan

    def plan_from_json(self, data: dict[str, Any]) -> ReloadPlan:
        """The stored plan of a resumed run."""
        self.plan = ReloadPlan.from_json(data)
        return self.plan

    def prepare(self, ctx: RunContext) -> tuple[ReloadPlan, list[str]] | None:
        """Load the source into ``<staging>/load-a<attempt>`` unless a load is recorded."""
        from sparkmv.refresh.reload.source import write_load

        if self.plan.load is not None:
            return None
        staging = self.staging_roots(ctx.run_id)[0]
        for old in warehouse.list_dir(staging):
            if old.name.startswith("load-a"):
                warehouse.remove_tree(old.path)  # an unrecorded load of an earlier attempt
        directory = warehouse.join(staging, f"load-a{ctx.attempt}")
        started = time.monotonic()
        with ctx.spark_scope("load"):
            staged = write_load(self.rt.spark, self.tdef, self.plan.listing, directory, self.rt.settings.jdbc_jars)
        self.rt.faults.hit("during_load")
        log.info(
            "run %s: staged %d source rows in %d vnodes (%.1f s)",
            ctx.run_id,
            staged.rows,
            len(staged.vnodes),
            time.monotonic() - started,
        )
        self.plan = replace(self.plan, load=staged)
        return self.plan, [directory]

    # -- chunks -------------------------------------------------------------------------------
    def _weight(self, vnode: int) -> int:
        assert self.plan.load is not None
        return self.plan.load.vnodes.get(vnode, ([], 0))[1] + self.plan.table_rows.get(vnode, 0)

    def batches(self, pending: list[ChunkRecord]) -> list[list[int]]:
        """Empty vnodes first (one batch, no Spark), then batches of at most
        ``merge_batch_rows`` staged + table rows (at least one vnode each)."""
        limit = int(self.tdef.options.get("merge_batch_rows", 4_000_000))
        batches: list[list[int]] = []
        empty: list[int] = []
        weight = 0
        for v in (c.chunk_id for c in pending):
            w = self._weight(v)
            if w == 0:
                empty.append(v)
            elif batches and weight + w <= limit:
                batches[-1].append(v)
                weight += w
            else:
                batches.append([v])
                weight = w
        return ([empty] if empty else []) + batches

    def compute(self, ctx: RunContext, chunk_ids: list[int], attempt_name: str) -> dict[int, ChunkOutcome]:
        """Merge the vnodes ``chunk_ids`` (table and changelog files under
        ``<root>/<attempt_name>`` of both staging roots)."""
        from sparkmv.refresh.reload.merge import merge_batch

        load = self.plan.load
        assert load is not None
        if all(self._weight(v) == 0 for v in chunk_ids):
            return {v: ChunkOutcome([], 0, 0, MergeCounts().to_json()) for v in chunk_ids}
        table_root, changelog_root = self.staging_roots(ctx.run_id)
        result = merge_batch(
            self.rt.spark,
            self.tdef,
            ctx.run_id,
            chunk_ids,
            [f for v in chunk_ids for f in load.vnodes.get(v, ([], 0))[0]],
            [f for v in chunk_ids for f in self.plan.table_files.get(v, [])],
            warehouse.join(table_root, attempt_name),
            load.vnodes,
            warehouse.join(changelog_root, attempt_name),
            self.plan.table_files,
        )
        self.rt.faults.hit("during_merge", self._merges)
        self._merges += 1
        out: dict[int, ChunkOutcome] = {}
        for i, v in enumerate(chunk_ids):
            r = result.vnodes[v]
            files = list(r.files) + (result.changelog_files if i == 0 else [])
            counts = MergeCounts(r.inserted, r.updated, r.deleted, r.changed, r.rows)
            out[v] = ChunkOutcome(files, load.vnodes.get(v, ([], 0))[1], _size(files), counts.to_json())
        return out

    # -- publishing ---------------------------------------------------------------------------
    def publish(self, ctx: RunContext, chunks: list[ChunkRecord], recovering: bool) -> int | None:
        """Commit what is not yet committed (table, then changelog); idempotent."""
        changed = sorted(c.chunk_id for c in chunks if MergeCounts.from_json(c.outcome).changed)
        table_files = [f for c in chunks for f in c.files if f"/{CHANGELOG_LEAF}/" not in f]
        log_files = [f for c in chunks for f in c.files if f"/{CHANGELOG_LEAF}/" in f]
        store = self.rt.iceberg
        snapshot_id: int | None = None
        if changed:
            snapshot_id = store.snapshot_of_run(store.load(self.name), ctx.run_id)
            if snapshot_id is None:
                snapshot_id = store.publish(
                    self.name,
                    ctx.run_id,
                    table_files,
                    [str(v) for v in changed],
                    expected_snapshot_id=self.plan.table_snapshot,
                )
        log_name = changelog_name(self.name)
        ensure_changelog_sign(store, log_name)
        if log_files:
            _append_changelog(store, log_name, ctx.run_id, log_files)
        return snapshot_id

    def finish_fields(self, s: Session, run_id: int, chunks: list[ChunkRecord]) -> dict[str, Any]:
        """The run's inserted / updated / deleted counts."""
        counts = [MergeCounts.from_json(c.outcome) for c in chunks]
        inserted, updated, deleted = (sum(getattr(c, k) for c in counts) for k in ("inserted", "updated", "deleted"))
        vnodes = sum(1 for c in counts if c.changed)
        return {
            "rows_inserted": inserted,
            "rows_updated": updated,
            "rows_deleted": deleted,
            "partitions_done": len(chunks),
            "mode_reason": f"{inserted} inserted, {updated} updated, {deleted} deleted in {vnodes} vnode(s)",
        }

    def cleanup(self, run_id: int, recorded: set[str]) -> None:
        """Remove the staged source and every staged file not published."""
        keep = {warehouse.normalize(f) for f in recorded}
        for root in self.staging_roots(run_id):
            _prune(root, keep)


def _prune(root: str, keep: set[str]) -> None:
    """Remove everything under ``root`` except the files in ``keep`` (and their directories)."""
    for entry in warehouse.list_dir(root):
        if not any(warehouse.is_within(p, entry.path) and p != entry.path for p in keep):
            warehouse.remove_tree(entry.path)
            continue
        # a directory holding published files (e.g. staged files reused as table files):
        # remove everything else in it, then the directories left empty (deepest first)
        dirs: list[str] = []
        for parts, _subdirs, files in warehouse.walk(entry.path):
            dirs.append(warehouse.join(entry.path, *parts))
            for f in files:
                if f.path not in keep:
                    warehouse.remove_file(f.path)
        for directory in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
            warehouse.remove_empty_dir(directory)


def ensure_changelog_sign(store: IcebergStore, name: ObjectName) -> bool:
    """Add the optional ``sign int`` column to changelog table ``name`` when it lacks it
    (created by a sparkmv before the changelog carried retractions; see
    :mod:`sparkmv.refresh.reload.ddl`). Its rows keep their values and read ``sign`` NULL.

    Returns:
        True when the schema was evolved, False when ``sign`` was already there.
    """
    from pyiceberg.types import IntegerType

    table = store.load(name)
    if SIGN_COLUMN in table.schema().column_names:
        return False
    with table.update_schema() as update:
        update.add_column(SIGN_COLUMN, IntegerType(), doc="+1 for I and U rows, -1 for UB and D rows")
    log.info("changelog %s: added column %s", name, SIGN_COLUMN)
    return True


def _append_changelog(store: IcebergStore, name: ObjectName, run_id: int, files: list[str]) -> None:
    """Append ``files`` to the changelog table unless the run's commit already landed."""
    table = store.load(name)
    if store.snapshot_of_run(table, run_id) is not None:
        return
    with table.transaction() as tx:
        tx.add_files(files, snapshot_properties={RUN_ID_PROPERTY: str(run_id)}, check_duplicate_files=False)


def _size(files: list[str]) -> int:
    return sum(warehouse.stat(f).size for f in files)
