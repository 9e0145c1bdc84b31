"""What the rewrite log records for a rewrite outcome (pure: no catalog, no Spark)."""

from __future__ import annotations

from sparkmv.analysis.rewrite import COMPENSATION, EXACT, ROLLUP, RewriteResult, UsedMv
from sparkmv.names import ObjectName
from sparkmv.services.rewrite_log import fingerprint, log_entries, rewrite_class

Q1 = ObjectName("default", "q1")
SEG = ObjectName("default", "seg")
SQL = "SELECT l_flag, sum(l_qty) FROM li WHERE l_month >= '1995-03' GROUP BY l_flag"


def test_classes() -> None:
    assert [rewrite_class(k) for k in (EXACT, ROLLUP, COMPENSATION)] == ["exact", "rollup", "predicate"]
    assert rewrite_class(ROLLUP, compensated=True) == "union"


def test_fingerprint_ignores_literals_case_and_spacing_only() -> None:
    same = "select l_flag,  SUM(l_qty) from li where l_month >= '1996-01' group by l_flag"
    assert fingerprint(SQL) == fingerprint(same)
    assert len(fingerprint(SQL)) == 16
    assert fingerprint(SQL) != fingerprint(SQL.replace("l_flag", "l_mode"))
    assert fingerprint("SELEC x") == fingerprint("selec   X")  # not a query: the raw text, normalized


def test_one_row_per_mv_used() -> None:
    used = (UsedMv(Q1, ROLLUP, "grouping by l_flag"), UsedMv(SEG, EXACT, ""), UsedMv(Q1, ROLLUP, "again"))
    result = RewriteResult("SELECT ...", SQL, used, ((ObjectName("default", "big"), "it aggregates"),))
    rows = log_entries(result, 12.5)
    assert [(r.mv, r.rewrite_class, r.analysis_ms, r.rejected, r.query) for r in rows] == [
        ("q1", "rollup", 12.5, "big: it aggregates", SQL),
        ("seg", "exact", 12.5, "big: it aggregates", SQL),
    ]
    assert rows[0].fingerprint == rows[1].fingerprint == fingerprint(SQL)
    assert rows[0].query_time == rows[1].query_time


def test_not_rewritten_is_one_row_without_mv_and_no_candidate_is_none() -> None:
    rejected = ((Q1, "group-by column l_mode not in the MV"), (SEG, "it reads cust, li, ord, the query reads li"))
    rows = log_entries(RewriteResult(SQL, SQL, (), rejected), 3.0)
    assert [(r.mv, r.rewrite_class, r.rejected) for r in rows] == [
        (None, None, "q1: group-by column l_mode not in the MV; seg: it reads cust, li, ord, the query reads li")
    ]
    assert log_entries(RewriteResult(SQL, SQL), 3.0) == []
