"""Cutting the MV partitions of one refresh into chunks, and what each chunk reads.

Strategies (``partition_refresh_strategy``), as StarRocks': STRICT puts
``partition_refresh_number`` partitions in each chunk; ADAPTIVE adds partitions to a chunk
while its base rows and bytes stay under ``mv_max_rows_per_refresh`` /
``mv_max_bytes_per_refresh`` (at least one per chunk). Plain Python, no Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sparkmv.analysis.lineage import Lineage
from sparkmv.refresh.properties import MvProperties
from sparkmv.sources.pinned import PinnedTable
from sparkmv.storage.partition_values import PartitionText


@dataclass
class Chunk:
    """One unit of work: MV partition values (None = the whole MV) and base cost.

    ``outside`` marks the *rest chunk*: it computes the query over all input (reference
    tables unrestricted) and keeps every row whose partition value is none of ``outside``
    (the values the reference tables map to); ``partitions`` then lists the MV partitions
    of that kind published now, which the chunk replaces. The MV's partition set comes
    from the query: rows a non-reference input contributes (a NULL from a UNION ALL with
    an unpartitioned table) are never filtered out.
    """

    partitions: list[PartitionText] | None
    base_bytes: int = 0
    base_rows: int = 0
    outside: list[PartitionText] | None = None


def cut_chunks(
    values: list[PartitionText], cost: Callable[[PartitionText], tuple[int, int]], props: MvProperties
) -> list[Chunk]:
    """``values`` (in order) cut into chunks by the strategy of ``props``.

    Args:
        cost: (base bytes, base rows) behind one MV partition value.

    >>> from sparkmv.refresh.properties import MvProperties
    >>> props = MvProperties.parse({"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2"})
    >>> [c.partitions for c in cut_chunks(["a", "b", "c"], lambda v: (1, 1), props)]
    [['a', 'b'], ['c']]
    """
    chunks: list[Chunk] = []
    current: list[PartitionText] = []
    size = rows = 0
    for v in values:
        v_size, v_rows = cost(v)
        if props.partition_refresh_strategy == "STRICT":
            full = len(current) >= props.partition_refresh_number
        else:
            full = bool(current) and (
                size + v_size > props.mv_max_bytes_per_refresh or rows + v_rows > props.mv_max_rows_per_refresh
            )
        if full:
            chunks.append(Chunk(current, size, rows))
            current, size, rows = [], 0, 0
        current.append(v)
        size += v_size
        rows += v_rows
    if current:
        chunks.append(Chunk(current, size, rows))
    return chunks


def base_partitions_for(plan_chunk: Chunk, inp_lineage: Lineage, pinned: dict[str, PinnedTable]) -> dict[str, set[str]]:
    """Reference table -> the pinned partition paths a chunk must read (others: all)."""
    if plan_chunk.partitions is None or plan_chunk.outside is not None:
        return {}
    wanted = set(plan_chunk.partitions)
    out: dict[str, set[str]] = {}
    for table, mapping in inp_lineage.mappings.items():
        if table not in pinned:
            continue
        out[table] = {
            path
            for path in pinned[table].partitions
            if mapping.transform.apply(pinned[table].value(path, mapping.base_column)) in wanted
        }
    return out
