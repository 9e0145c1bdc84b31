"""The rewrite log: every query run with query rewrite enabled that had candidate MVs is
recorded in ``sparkmv.rewrite_log`` (:class:`sparkmv.catalog.rewrite_log.RewriteLogStore`),
so a user can see which MVs answer queries, how, and why the others did not.

A query "had candidate MVs" when some MV reads one of its tables (it is then either
rewritten or has rejection reasons); queries of other tables (system tables, tables no MV
reads) are not logged. Logging never fails a query: a catalog error while recording (a
busy or read-only catalog) is logged as a warning and the query runs.

>>> rewrite_class("aggregate rollup"), rewrite_class("exact match"), rewrite_class("predicate compensation")
('rollup', 'exact', 'predicate')
>>> fingerprint("SELECT a FROM t WHERE m >= '1995-01'") == fingerprint("select a  from t where m >= '1996-07'")
True
"""

from __future__ import annotations

import hashlib
import logging
import time

from sqlalchemy.exc import SQLAlchemyError
from sqlglot import exp

from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.analysis.rewrite import RewriteResult
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.rewrite_log import RewriteLogEntry
from sparkmv.errors import CatalogError, SparkMvError
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.rewrite import rewrite

log = logging.getLogger(__name__)

_CLASSES = {"exact match": "exact", "aggregate rollup": "rollup", "predicate compensation": "predicate"}


def rewrite_class(kind: str, compensated: bool = False) -> str:
    """The rewrite class recorded for a rewrite kind (:class:`UsedMv` ``kind``): ``exact``,
    ``rollup``, ``predicate``, or ``union`` when stale partitions were compensated from the
    base tables (partition compensation, whatever the kind of the match on top)."""
    if compensated:
        return "union"
    return _CLASSES.get(kind, kind[:16])


def fingerprint(sql: str) -> str:
    """16 hex digits identifying ``sql`` up to literals, case and whitespace (the same
    query over other months has the same fingerprint); of the raw text when it does not
    parse."""
    try:
        query = parse_query(sql).transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n)
        text = query.sql(dialect=DIALECT, normalize=True)
    except SparkMvError:
        text = " ".join(sql.lower().split())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def log_entries(result: RewriteResult, analysis_ms: float) -> list[RewriteLogEntry]:
    """The rows recording ``result``: one per (MV, class) used, or one with no MV when the
    query was not rewritten; none when no MV was a candidate."""
    if not result.used and not result.rejected:
        return []
    now = utcnow()
    rejected = "; ".join(result.reasons) or None
    base = (now, fingerprint(result.original_sql), result.original_sql)
    used = dict.fromkeys((u.name.display, rewrite_class(u.kind, bool(u.compensation))) for u in result.used)
    if not used:
        return [RewriteLogEntry(*base, None, None, analysis_ms, rejected)]
    return [RewriteLogEntry(*base, mv, kind, analysis_ms, rejected) for mv, kind in used]


def rewrite_logged(rt: Runtime, sql: str) -> RewriteResult:
    """:func:`sparkmv.services.rewrite.rewrite` of ``sql`` (counted in
    ``sparkmv_mv_rewrite_total``), timed and recorded in the rewrite log.

    Raises:
        ParseError: when ``sql`` is not one SELECT.
    """
    started = time.perf_counter()
    result = rewrite(rt, sql)
    analysis_ms = (time.perf_counter() - started) * 1000
    try:
        rt.catalog.rewrite_log.record(log_entries(result, analysis_ms))
    except (CatalogError, SQLAlchemyError) as exc:  # the log is for visibility: never fail the query over it
        log.warning("cannot record the query rewrite in the rewrite log: %s", exc)
    return result
