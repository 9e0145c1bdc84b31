"""Publishing a run: one Iceberg commit, tagged with the run id, replaces the refreshed
partitions (or everything, for FULL) with the staged files of every chunk."""

from __future__ import annotations

from sparkmv.refresh.context import MvDefinition
from sparkmv.refresh.planner import Chunk, Plan
from sparkmv.refresh.runtime import Runtime
from sparkmv.storage.iceberg import CHUNKS_PROPERTY


def publish_run(rt: Runtime, run_id: int, mv: MvDefinition, plan: Plan) -> int | None:
    """Commit the run; returns the new snapshot id.

    With ``publish = per_chunk`` the chunks were committed already; this commit only drops
    the partitions the run removes (TTL, or partitions absent after a FULL refresh).

    Raises:
        StorageError: on a commit conflict.
    """
    with rt.catalog.transaction() as s:
        chunks = rt.catalog.runs.chunks(s, run_id)
    per_chunk = mv.properties.publish == "PER_CHUNK"
    if per_chunk:
        files = [f for c in chunks if not c.published for f in (c.files or [])]
    else:
        files = [f for c in chunks for f in (c.files or [])]
    whole = [c for c in plan.chunks if c.partitions is None]
    replace: list[str | None] | None
    if plan.replace_all and (whole or not per_chunk):
        replace = None
    elif plan.replace_all:
        current = {p.value for p in rt.iceberg.partitions(rt.iceberg.load(mv.name))}
        replace = sorted((v for v in current if v not in set(plan.partitions)), key=lambda v: (v is not None, v))
    else:
        replace = ([] if per_chunk else list(plan.partitions)) + list(plan.drop_partitions)
    return rt.iceberg.publish(
        mv.name, run_id, files, replace, extra_properties={CHUNKS_PROPERTY: str(len(chunks))}
    )


def publish_chunk(rt: Runtime, run_id: int, mv: MvDefinition, plan: Plan, chunk_id: int, files: list[str], chunk: Chunk) -> None:
    """Commit one chunk (``publish = per_chunk``): replace its partitions with its files."""
    replace = None if chunk.partitions is None else list(chunk.partitions)
    rt.iceberg.publish(mv.name, run_id, files, replace, extra_properties={"sparkmv.chunk": str(chunk_id)})
