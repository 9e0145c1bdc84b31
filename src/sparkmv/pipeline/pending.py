"""What a pipeline run will do, known from metadata before it starts Spark: whether it needs
Spark at all, and whether its work is small enough for a quickly started driver JVM.

A run in which every selected dataset is up to date starts no JVM (``sparkmv pipeline run``
then takes under a second). Otherwise the CLI starts the JVM in the background while the first
dataset plans; when the run only refreshes existing SQL materialized views whose changes a
refresh reads at most :data:`QUICK_START_MAX_BYTES` of (the bound of
:func:`sparkmv.refresh.freshness.read_bound`), the JVM is started for a short process
(:data:`sparkmv.storage.spark.QUICK_JAVA_OPTIONS`: 8.2-8.4 s -> 6.3-6.5 s for the one-partition
refresh of ``bench/bench_pipeline.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmv.names import ObjectName
from sparkmv.pipeline.model import REFRESHED_KINDS
from sparkmv.pipeline.project import Project
from sparkmv.pipeline.sql_datasets import definition_changed

if TYPE_CHECKING:
    from sparkmv.client.client import Client

QUICK_START_MAX_BYTES = 64 * 1024 * 1024
"""Base data a run may read (bytes, summed over its datasets) and still start its driver JVM
for a short process. Measured on 2 cores (``bench/RESULTS.md``, 2026-11-29): the first
JIT tier alone was 1.8-2 s faster reading 3-20 MiB and 15 % slower reading 300 MiB."""


@dataclass(frozen=True)
class PendingWork:
    """What a run will do, from metadata.

    Attributes:
        needs_spark: a selected dataset is a Python one, forced, missing from the catalog,
            defined differently from its stored query, or has a changed base partition.
        read_bound_bytes: the bytes of base data the run reads at most (summed over the
            datasets with changes); None when unknown (a build, replace, forced or Python
            dataset, or an MV whose bound cannot be computed).
    """

    needs_spark: bool
    read_bound_bytes: int | None = None

    @property
    def quick_start(self) -> bool:
        """True when Spark is needed for at most :data:`QUICK_START_MAX_BYTES` of reading."""
        bound = self.read_bound_bytes
        return self.needs_spark and bound is not None and bound <= QUICK_START_MAX_BYTES


def pending_work(
    client: Client,
    project: Project,
    full_refresh: set[ObjectName] | None = None,
    full_refresh_all: bool = False,
    refresh: set[ObjectName] | None = None,
) -> PendingWork:
    """What running ``project`` with these options will do (the freshness rule of ``sparkmv
    status``, from metadata only). Lets the caller start the JVM while the run plans, and
    choose how; ``needs_spark`` is False when every selected dataset is up to date (then
    nothing starts Spark)."""
    from sparkmv.services.status import mv_freshness

    chosen = set(full_refresh or ()) | set(refresh or ())
    if full_refresh_all or full_refresh:
        return PendingWork(True)
    bound = 0
    for name in project.graph.order():
        ds = project.graph.datasets[name]
        if ds.kind not in REFRESHED_KINDS or (chosen and name not in chosen):
            continue
        if ds.query is None:
            return PendingWork(True)
        with client.runtime.catalog.read() as s:
            row = client.runtime.catalog.objects.find(s, name)
            if row is None or definition_changed(row, project.queries[name], ds):
                return PendingWork(True)
        fresh = mv_freshness(client.runtime, row, read_bound=True)
        if fresh is None or fresh.read_bound_bytes is None:
            return PendingWork(True)
        bound += fresh.read_bound_bytes
        if bound > QUICK_START_MAX_BYTES:
            return PendingWork(True, bound)
    return PendingWork(bound > 0, bound)
