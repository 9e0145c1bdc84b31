"""``EXPLAIN REFRESH``'s maintenance plan of an incremental analysis: the
technique or the reason it is refused, each output column's role, the inner stages, the
correlation key's references, and the key queries of an affected-key recomputation."""

from __future__ import annotations

from sparkmv.analysis.correlated import correlation_lines
from sparkmv.analysis.incremental import stage_state_analysis
from sparkmv.analysis.ivm import IvmAnalysis, Stage
from sparkmv.analysis.query import parse_query, table_occurrences


def maintenance_plan(analysis: IvmAnalysis) -> list[str]:
    """The lines of ``EXPLAIN REFRESH``'s maintenance plan: the technique, or the reason
    incremental refresh cannot maintain the query; per output column its role; the keys an
    affected-key recomputation recomputes and the key queries that find them.

    >>> from sparkmv.analysis.incremental import analyze_incremental
    >>> from sparkmv.analysis.query import parse_query
    >>> sql = "SELECT k, count(DISTINCT x) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k) GROUP BY k"
    >>> print("\\n".join(maintenance_plan(analyze_incremental(parse_query(sql)))))
    maintenance plan: affected-key recomputation
      columns: k (group key), n (recomputed)
      recomputes the groups of keys (k) touched by the change, read from:
        the grouped relation: SELECT k AS k FROM t WHERE TRUE
        subquery 1: SELECT k AS k FROM t WHERE EXISTS(SELECT 1 FROM u WHERE u.k = t.k)
    """
    if analysis.reason is not None:
        return [f"maintenance plan: none ({analysis.reason})"]
    roles = {"group": "group key", "value": "recomputed", "plain": "projected"}
    columns = ", ".join(f"{c.name} ({roles.get(c.role, c.role.upper())})" for c in analysis.columns)
    lines = [f"maintenance plan: {analysis.technique}", f"  columns: {columns}"]
    lines += [line for stage in analysis.stages for line in _stage_lines(stage, "  ")]
    if analysis.merged_sql:
        lines.append(f"  derived tables merged into the query maintained: {analysis.merged_sql}")
    if analysis.correlated is not None:
        lines += correlation_lines(analysis.correlated)
    if analysis.keyed is None:
        state = ", ".join(analysis.state_columns)
        return [*lines, f"  state columns: {state}"] if state else lines
    keys = ", ".join(analysis.keyed.keys)
    lines.append(f"  recomputes the groups of keys ({keys}) touched by the change, read from:")
    if analysis.keyed.branch_terms:
        lines += [f"    union branch {i}: {sql}" for i, sql in enumerate(analysis.keyed.branch_terms, 1)]
    elif not analysis.keyed.outer_terms:
        lines.append(f"    the grouped relation: {analysis.keyed.key_sql}")
    for sql, mask in analysis.keyed.outer_terms:
        names = [str(name) for name, own in zip(table_occurrences(parse_query(sql)), mask, strict=True) if own]
        lines.append(f"    outer join, delta of {', '.join(names)}: {sql}")
    lines += [f"    subquery {i}: {sql}" for i, (sql, _) in enumerate(analysis.keyed.subquery_terms, 1)]
    return lines


def _stage_lines(stage: Stage, indent: str) -> list[str]:
    """The maintenance plan's lines of one inner stage and, indented, of its own stages."""
    keyed = stage.analysis.keyed
    keys = ", ".join(keyed.keys) if keyed is not None else ""
    lines = [
        f"{indent}inner stage {stage.name} ({stage.analysis.technique} of keys ({keys})), read as a virtual input "
        "(new, old, signed delta of its touched keys):",
        f"{indent}  {stage.analysis.staged_sql or stage.analysis.augmented_sql}",
    ]
    state = None if stage.analysis.stages else stage_state_analysis(stage.analysis.augmented_sql)
    if state is not None:
        kept = ", ".join(c for c in state.state_columns)
        lines.append(
            f"{indent}  state: its rows per key with {kept}, kept beside the MV's table; the delta rules merge "
            "the change into it (recomputed over the old and new input when no state matches the consumed snapshots)"
        )
    return lines + [line for inner in stage.analysis.stages for line in _stage_lines(inner, indent + "  ")]
