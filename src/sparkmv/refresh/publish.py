"""Publishing a run: one Iceberg commit, tagged with the run id, replaces the refreshed
partitions (or everything, for FULL) with the staged files of every chunk."""

from __future__ import annotations

from sparkmv.errors import StorageError
from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.planner import Chunk, Plan
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.iceberg import CHUNKS_PROPERTY


def publish_run(
    rt: Runtime, run_id: int, mv: MvDefinition, plan: Plan, expected_snapshot_id: int | None = None
) -> int | None:
    """Commit the run; returns the new snapshot id.

    With ``publish = atomic`` the commit requires the MV's current snapshot to still be
    ``expected_snapshot_id`` (the one the run planned against): a late publish by an owner
    whose lease was taken over, after recovery published, is rejected.

    With ``publish = per_chunk`` the chunks were committed already; this commit drops the
    partitions the run removes (TTL, or partitions absent after a FULL refresh) and commits
    any recorded chunk that was not committed yet.

    Raises:
        StorageError: on a commit conflict, or when the MV changed since the run planned.
    """
    with rt.catalog.transaction() as s:
        chunks = rt.catalog.runs.chunks(s, run_id)
    per_chunk = mv.properties.publish == "PER_CHUNK"
    pending = [c for c in chunks if not c.published] if per_chunk else chunks
    files = [f for c in pending for f in (c.files or [])]
    whole = [c for c in plan.chunks if c.partitions is None]
    replace: list[str | None] | None
    if plan.replace_all and (whole or not per_chunk):
        replace = None
    elif plan.replace_all:
        current = {p.value for p in rt.iceberg.partitions(rt.iceberg.load(mv.name))}
        # A rest chunk published the values outside the reference partitions already.
        rest = next((set(c.outside) for c in plan.chunks if c.outside is not None), None)
        replace = sorted(
            (v for v in current if v not in set(plan.partitions) and (rest is None or v in rest)),
            key=lambda v: (v is not None, v),
        )
        replace += [p for c in pending for p in (c.partitions or []) if p not in replace]
    elif per_chunk:
        replace = [p for c in pending for p in (c.partitions or [])] + list(plan.drop_partitions)
    else:
        replace = list(plan.partitions) + list(plan.drop_partitions)
    if not per_chunk:
        _require_snapshot(rt, mv, run_id, expected_snapshot_id)
    return rt.iceberg.publish(
        mv.name,
        run_id,
        files,
        replace,
        expected_snapshot_id=None if per_chunk else expected_snapshot_id,
        extra_properties={CHUNKS_PROPERTY: str(len(chunks))},
    )


def _require_snapshot(rt: Runtime, mv: MvDefinition, run_id: int, expected: int | None) -> None:
    """Raise unless the MV's current snapshot is ``expected`` (None: no snapshot yet)."""
    current = rt.iceberg.load(mv.name).current_snapshot()
    current_id = current.snapshot_id if current is not None else None
    if current_id != expected:
        raise StorageError(
            f"MV {mv.name.qualified} changed since run {run_id} planned its publish "
            f"(snapshot {current_id}, expected {expected}); the publish is rejected"
        )


def publish_chunk(
    rt: Runtime, run_id: int, mv: MvDefinition, plan: Plan, chunk_id: int, files: list[str], chunk: Chunk
) -> None:
    """Commit one chunk (``publish = per_chunk``): replace its partitions with its files."""
    replace = None if chunk.partitions is None else list(chunk.partitions)
    rt.iceberg.publish(mv.name, run_id, files, replace, extra_properties={"sparkmv.chunk": str(chunk_id)})
