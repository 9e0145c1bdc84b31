"""Query rewrite as a service: which materialized views may answer a query now, and how.

The matching itself is pure (:mod:`sparkmv.analysis.rewrite`); this module picks the
candidates and gates them on freshness:

* MVs reading none of the query's tables are not candidates;
* an inactive MV, one never built, and one with ``query_rewrite_consistency = 'DISABLE'``
  is rejected with that reason;
* ``CHECKED`` (default): an MV is used as it is only when no base partition it depends on
  changed since its last refresh, decided on base versions by the one freshness rule
  (:mod:`sparkmv.refresh.freshness`), or when its last refresh finished within
  ``mv_rewrite_staleness_second``; otherwise its stale partitions are computed from the
  base and UNION ALL-ed with its fresh ones (partition compensation,
  :mod:`sparkmv.services.compensation`), or, when they cannot be, it is rejected (``3 stale
  base partitions and consistency CHECKED; not compensated from base: non-reference table
  default.cust changed``) and the query rewritten without it;
* ``LOOSE``: the MV is used as it is.

Freshness is checked only for the MVs a rewrite chose (it pins their base tables). Every
query answered through an MV counts in ``sparkmv_mv_rewrite_total{mv}`` of :data:`REGISTRY`.
"""

from __future__ import annotations

import json

import pyarrow as pa
from prometheus_client import CollectorRegistry, Counter

from sparkmv.analysis.expectations import drop_condition, expectations_of
from sparkmv.analysis.query import parse_query, referenced_tables
from sparkmv.analysis.rewrite import MvCandidate, RewriteResult, rewrite_query
from sparkmv.catalog import ObjectKind
from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName, is_hidden_column
from sparkmv.refresh.freshness import freshness
from sparkmv.refresh.properties import MvProperties
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.compensation import compensate

REGISTRY = CollectorRegistry()
"""The registry of the rewrite counter (served by whoever exposes metrics)."""
REWRITES = Counter("sparkmv_mv_rewrite", "Queries answered through query rewrite, per MV", ["mv"], registry=REGISTRY)


def rewrite(rt: Runtime, sql: str, count: bool = True) -> RewriteResult:
    """Rewrite SELECT ``sql`` over the active, fresh-enough MVs that can answer it.

    Args:
        count: add the MVs used to ``sparkmv_mv_rewrite_total`` (False for EXPLAIN).

    Raises:
        ParseError: when ``sql`` is not one SELECT.
    """
    tables = set(referenced_tables(parse_query(sql)))
    with rt.catalog.read() as s:
        objects = {ObjectName(r.namespace, r.name): r for r in rt.catalog.objects.list(s)}
    rows: dict[ObjectName, ObjectRow] = {}
    candidates: list[MvCandidate] = []
    rejected: list[tuple[ObjectName, str]] = []
    for name, row in objects.items():
        if row.kind != ObjectKind.MATERIALIZED_VIEW or not tables & {_name(t) for t in row.base_tables or []}:
            continue
        problem = _never(row)
        candidate = None if problem else _candidate(rt, name, row)
        if candidate is None:
            rejected.append((name, problem or "its table cannot be read"))
            continue
        rows[name] = row
        candidates.append(candidate)
    if not candidates:
        return RewriteResult(sql, sql, (), tuple(rejected))
    schema = _schemas(rt, objects, tables | {_name(t) for c in candidates for t in rows[c.name].base_tables or []})
    checked: set[ObjectName] = set()
    while True:
        result = rewrite_query(sql, candidates, schema, rejected)
        changed = False
        for name in (n for n in result.mvs if n not in checked):
            checked.add(name)
            verdict = _gate(rt, rows[name], next(c for c in candidates if c.name == name))
            if verdict is None:
                continue
            changed = True
            if isinstance(verdict, str):
                rejected.append((name, verdict))
                candidates = [c for c in candidates if c.name != name]
            else:
                candidates = [verdict if c.name == name else c for c in candidates]
        if not changed:
            break
    if count:
        for name in result.mvs:
            REWRITES.labels(name.display).inc()
    return result


def _name(qualified: str) -> ObjectName:
    return ObjectName.parse(qualified, allow_reserved=True)


def _never(row: ObjectRow) -> str | None:
    """Why an MV is never used now, or None."""
    if not row.is_active:
        return f"inactive: {row.inactive_reason or 'no reason recorded'}"
    if row.last_success_run_id is None:
        return "not built yet"
    props = MvProperties.parse(row.properties or {})
    if props.query_rewrite_consistency == "DISABLE":
        return "query_rewrite_consistency is DISABLE"
    if drop_condition(expectations_of(row.options)) is not None:
        return "an expectation drops rows: it holds fewer rows than its query"
    return None


def _gate(rt: Runtime, row: ObjectRow, candidate: MvCandidate) -> MvCandidate | str | None:
    """Freshness of a chosen MV under its consistency: None when it is used as it is; the
    candidate with stale partitions to compute from the base (partition compensation);
    or why it is too stale to answer."""
    props = MvProperties.parse(row.properties or {})
    if props.query_rewrite_consistency == "LOOSE":
        return None
    grace = props.mv_rewrite_staleness_second
    if grace is not None and row.last_success_time is not None:
        if (utcnow() - row.last_success_time).total_seconds() <= grace:
            return None
    try:
        fresh = freshness(rt.catalog, rt.iceberg, row.id, row.base_tables or [])
    except SparkMvError as exc:
        return f"its freshness cannot be decided: {exc}"
    if fresh.is_fresh:
        return None
    verdict = compensate(rt, row, candidate)
    if isinstance(verdict, str):
        return f"{fresh.stale_partitions} stale base partitions and consistency CHECKED; {verdict}"
    return verdict


def _candidate(rt: Runtime, name: ObjectName, row: ObjectRow) -> MvCandidate | None:
    try:
        table = rt.iceberg.load(name)
    except SparkMvError:
        return None
    columns = tuple((f.name.lower(), spark_type(f.type)) for f in table.schema().as_arrow())
    snap = table.current_snapshot()
    total = int(snap.summary.get("total-records", "0") or 0) if snap is not None and snap.summary else 0
    return MvCandidate(name, row.definition or "", columns, total)


def _schemas(
    rt: Runtime, objects: dict[ObjectName, ObjectRow], tables: set[ObjectName]
) -> dict[ObjectName, dict[str, str]]:
    """Columns and Spark types of each of ``tables`` that can be read (visible columns)."""
    out: dict[ObjectName, dict[str, str]] = {}
    for name in tables:
        row = objects.get(name)
        try:
            if row is not None and row.kind == ObjectKind.EXTERNAL_TABLE and row.schema_json:
                fields = json.loads(row.schema_json).get("fields", [])
                out[name] = {f["name"].lower(): _json_type(f["type"]) for f in fields}
            elif rt.iceberg.exists(name):
                arrow = rt.iceberg.load(name).schema().as_arrow()
                # hidden: an MV's state columns and a refreshable table's vnode column
                hidden = {"_vnode"} if row is not None and row.kind == ObjectKind.REFRESHABLE_TABLE else set()
                out[name] = {
                    f.name.lower(): spark_type(f.type)
                    for f in arrow
                    if not is_hidden_column(f.name) and f.name not in hidden
                }
        except (SparkMvError, ValueError, KeyError):
            continue
    return out


_JSON_TYPES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def _json_type(kind: object) -> str:
    if isinstance(kind, str):
        return _JSON_TYPES.get(kind, kind)
    return "string"  # a nested type: rewrite only needs the names of such columns


def spark_type(kind: pa.DataType) -> str:
    """The Spark SQL type name of an Arrow type as sparkmv writes it (pyiceberg's schema).

    >>> spark_type(pa.decimal128(25, 2)), spark_type(pa.int64()), spark_type(pa.timestamp("us"))
    ('decimal(25,2)', 'bigint', 'timestamp_ntz')
    """
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_timestamp(kind):
        return "timestamp" if kind.tz else "timestamp_ntz"
    simple = {
        pa.int64(): "bigint",
        pa.int32(): "int",
        pa.int16(): "smallint",
        pa.int8(): "tinyint",
        pa.float64(): "double",
        pa.float32(): "float",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.string(): "string",
        pa.large_string(): "string",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
    }
    return simple.get(kind, "string")
