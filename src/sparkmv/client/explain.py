"""``EXPLAIN REFRESH MATERIALIZED VIEW``: the plan of a refresh, without running it
(``EXPLAIN ANALYZE``: then the refresh run, and where its time went);
``EXPLAIN <select>``: how query rewrite answers a query."""

from __future__ import annotations

from sparkmv.analysis.incremental import analyze_for_table
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.rewrite import RewriteResult
from sparkmv.catalog import ObjectKind
from sparkmv.errors import RefreshError
from sparkmv.refresh.context import MvDefinition, check_request, pin_all, plan_input
from sparkmv.refresh.incremental.candidates import Candidate, candidate_table, size_text
from sparkmv.refresh.incremental.decide import base_columns, decide
from sparkmv.refresh.planner import OUTSIDE_LABEL, Plan, RefreshRequest, plan_refresh
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.refresh.timing import PHASES
from sparkmv.sql.statements import RefreshMaterializedView


def plan_for(
    rt: Runtime, stmt: RefreshMaterializedView
) -> tuple[Plan, str, list[Candidate], MvDefinition, dict[str, list[str]]]:
    """The plan a refresh would run now (the same choice among INCREMENTAL, PCT and FULL as
    the run makes), a description of the partition lineage, the candidates weighed, the
    MV's definition and its base tables' columns.
    A strict INCREMENTAL refresh that would fail shows as mode ``FAILS`` with the reason."""
    with rt.catalog.read() as s:
        row = rt.catalog.objects.get(s, stmt.name, ObjectKind.MATERIALIZED_VIEW)
    check_request(rt.catalog, rt.iceberg, stmt.name, stmt.start, stmt.end)
    mv = MvDefinition.from_row(row)
    pinned = pin_all(rt.catalog, rt.iceberg, mv.base_tables)
    request = RefreshRequest(stmt.force, stmt.start, stmt.end)
    try:
        decision = decide(rt, mv, pinned, request)
        plan, lineage, candidates = decision.plan, decision.planner_input.lineage, decision.candidates
    except RefreshError as exc:
        inp = plan_input(rt, mv, pinned, request)
        plan, lineage, candidates = Plan("FAILS", str(exc)), inp.lineage, []
        plan.changed_base_partitions = plan_refresh(inp).changed_base_partitions
    if lineage.mappings:
        lines = [
            f"{m.base_table}: {mv.partition_by} = {m.transform.describe(m.base_column)}"
            for m in lineage.mappings.values()
        ]
        text = "; ".join(lines)
    else:
        text = f"unknown ({lineage.reason})"
    return plan, text, candidates, mv, base_columns(pinned)


def explain_refresh(rt: Runtime, stmt: RefreshMaterializedView) -> str:
    """Text of the plan: mode and reason, changed base partitions, MV partitions with
    their reasons, chunks."""
    plan, lineage, candidates, mv, columns = plan_for(rt, stmt)
    out = [f"mode: {plan.mode}", f"reason: {plan.reason}", f"partition lineage: {lineage}"]
    table_columns = [f.name for f in rt.iceberg.load(mv.name).schema().fields]
    out.extend(maintenance_plan(analyze_for_table(mv.query, table_columns, columns)))
    if candidates:
        out.append("candidates:")
        out.extend(candidate_table(candidates))
        out.extend(shared_reads(rt, mv.object_id, candidates))
    out.append("changed base partitions:")
    for table, paths in sorted(plan.changed_base_partitions.items()):
        out.append(f"  {table}: {', '.join(p or '<all>' for p in paths)}")
    if not plan.changed_base_partitions:
        out.append("  (none)")
    out.append("MV partitions to refresh:")
    for part, why in plan.partition_reasons.items():
        out.append(f"  {part}: {why}")
    if plan.drop_partitions:
        out.append("MV partitions to drop: " + ", ".join(str(p) for p in plan.drop_partitions))
    out.append(f"chunks: {len(plan.chunks)}")
    for i, c in enumerate(plan.chunks):
        parts = "<all>" if c.partitions is None else ", ".join("NULL" if p is None else p for p in c.partitions)
        if c.outside is not None:
            parts = OUTSIDE_LABEL + (f" (replacing {parts})" if c.partitions else "")
        out.append(f"  chunk {i}: {parts} (base {c.base_bytes} bytes)")
    return "\n".join(out)


def shared_reads(rt: Runtime, object_id: int, candidates: list[Candidate]) -> list[str]:
    """Lines of the signed changes this MV's INCREMENTAL candidate reads that other objects
    consumed from the same snapshot: in one refresh pass their read and netting is shared
    (:mod:`sparkmv.refresh.passes`), each MV's share the read over the consumers."""
    incremental = next((c for c in candidates if c.mode == "INCREMENTAL"), None)
    signed = [ch for ch in (incremental.changes if incremental else []) if ch.get("kind") == "signed"]
    if not signed:
        return []
    lines = []
    with rt.catalog.read() as s:
        consumed = rt.catalog.positions.load(s, object_id)
        for ch in signed:
            position = consumed.get(ch["table"])
            snapshot = position.get("snapshot_id") if isinstance(position, dict) else None
            n = rt.catalog.positions.count_at(s, ch["table"], snapshot) if snapshot is not None else 0
            if n > 1:
                size = ch.get("bytes_read") or 0
                lines.append(
                    f"    {ch['table']}: read by {n} MVs from snapshot {snapshot}; in one refresh pass "
                    f"(REFRESH ALL MATERIALIZED VIEWS) read and netted once: ~{size_text(size // n)} each "
                    f"of {size_text(size)}"
                )
    return ["shared change reads:", *lines] if lines else []


def analyzed_text(run: RefreshRun) -> str:
    """The ``actual:`` part of ``EXPLAIN ANALYZE REFRESH``: the run's outcome, the chosen
    technique's estimate against what Spark read, and where the run's time went (each
    phase, the Spark jobs per job group).

    >>> from sparkmv.refresh.result import RefreshRun
    >>> run = RefreshRun(7, "mv", "SUCCESS", "MANUAL", "FULL", "x", 1, 1, 1, 1, 5, 0.5, None, None, None,
    ...                  estimate_bytes=2048, bytes_read=1024, timings={"total": 0.5, "phases": {"plan": 0.1,
    ...                  "compute": 0.4}, "spark_jobs": {"count": 2, "seconds": 0.3, "groups": {"g": [2, 0.3]}}})
    >>> print(analyzed_text(run))
    actual:
      run 7: SUCCESS, mode FULL, 5 rows, 0.500 s
      estimate: 2.0 KiB read; Spark read 1.0 KiB
      time: 0.500 s
        plan        0.100 s
        compute     0.400 s
      Spark jobs: 2, 0.300 s
        g: 2 jobs, 0.300 s
    """
    total = run.duration_seconds
    out = ["actual:", f"  run {run.run_id}: {run.state}, mode {run.mode}, {run.rows_written} rows"]
    if total is not None:
        out[-1] += f", {total:.3f} s"
    if run.error:
        out.append(f"  error: {run.error}")
    out.append(f"  estimate: {size_text(run.estimate_bytes)} read; Spark read {size_text(run.bytes_read)}")
    timings = run.timings or {}
    phases = timings.get("phases") or {}
    if timings:
        out.append(f"  time: {timings.get('total', 0.0):.3f} s")
        out.extend(f"    {p:<11} {phases[p]:.3f} s" for p in PHASES if p in phases)
    jobs = timings.get("spark_jobs") or {}
    if jobs:
        out.append(f"  Spark jobs: {jobs['count']}, {jobs['seconds']:.3f} s")
        for group, (n, seconds) in sorted((jobs.get("groups") or {}).items()):
            out.append(f"    {group or '(no group)'}: {n} jobs, {seconds:.3f} s")
    return "\n".join(out)


def explain_query(result: RewriteResult, enabled: bool = True) -> str:
    """Text of a query rewrite: the MVs used and why, the SQL run, the MVs whose stale
    partitions are computed from the base, and each rejected MV with its reason
    (``rewrite: disabled in this session`` when ``enabled`` is False).

    >>> print(explain_query(RewriteResult("SELECT 1", "SELECT 1")))
    rewrite: none
    SQL: SELECT 1
    rejected MVs: (none)
    """
    head = "rewrite: " + ("; ".join(str(u) for u in result.used) if result.used else "none")
    if not enabled:
        head += " (disabled in this session: queries run as written)"
    out = [head, f"SQL: {result.sql}"]
    if result.compensations:
        out.append("partition compensation:")
        out.extend(f"  {line}" for line in result.compensations)
    out.append("rejected MVs:" + ("" if result.rejected else " (none)"))
    out.extend(f"  {reason}" for reason in result.reasons)
    return "\n".join(out)
