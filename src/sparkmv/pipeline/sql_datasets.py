"""SQL datasets of a pipeline run: a SQL materialized view or streaming table kept as a
sparkmv MV — created, replaced atomically when its definition changed, or refreshed by AUTO
(rules in :mod:`sparkmv.pipeline.run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkmv.analysis.expectations import expectations_of
from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.model import STREAMING_TABLE, Dataset
from sparkmv.pipeline.project import Project
from sparkmv.pipeline.results import DatasetResult

if TYPE_CHECKING:
    from sparkmv.catalog.models import ObjectRow
    from sparkmv.client.client import Client
    from sparkmv.refresh.result import RefreshRun

KNOWN_PROPERTY_PREFIXES = ("session.",)


def sparkmv_properties(props: dict[str, str]) -> dict[str, str]:
    """The ``TBLPROPERTIES`` that are sparkmv properties (the others are not kept)."""
    from sparkmv.refresh.properties import KNOWN

    return {k: v for k, v in props.items() if k in KNOWN or k.startswith(KNOWN_PROPERTY_PREFIXES)}


def create_statement(name: ObjectName, ds: Dataset, query: str, replace_scheme: str | None = None) -> str:
    """The sparkmv ``CREATE MATERIALIZED VIEW ... REFRESH DEFERRED AS`` of a SQL MV; with
    ``replace_scheme``, ``CREATE OR REPLACE MATERIALIZED VIEW ... REFRESH <scheme> AS``
    instead (built, then swapped in for the MV of that name). The dataset's expectations
    are the ``(CONSTRAINT ... EXPECT (...) ...)`` list after the name."""
    parts = [f"CREATE {'OR REPLACE ' if replace_scheme else ''}MATERIALIZED VIEW {name.qualified}"]
    if ds.expectations:
        parts.append("(" + ", ".join(e.clause for e in ds.expectations) + ")")
    if ds.partition_by:
        parts.append(f"PARTITION BY {ds.partition_by}")
    props = sparkmv_properties(ds.properties)
    if props:
        parts.append("PROPERTIES (" + ", ".join(f"{_quote(k)} = {_quote(v)}" for k, v in props.items()) + ")")
    parts.append(f"REFRESH {replace_scheme} AS {query}" if replace_scheme else f"REFRESH DEFERRED AS {query}")
    return " ".join(parts)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_sql_mv(client: Client, project: Project, ds: Dataset, force: bool, query: str | None = None) -> DatasetResult:
    """Create, replace or refresh one SQL MV (``query``: a Python MV's translated query, else
    the dataset's own); a failed first build drops what it created, a failed build of a
    changed definition leaves the MV as it was."""
    query = query or project.queries[ds.name]
    with client.runtime.catalog.read() as s:
        row = client.runtime.catalog.objects.find(s, ds.name)
        stored = (row.kind, dict(row.properties or {}), definition_changed(row, query, ds, client)) if row else None
        scheme = row.refresh_scheme if row else None
    if stored is not None and stored[0] != "MATERIALIZED_VIEW":
        raise SparkMvError(f"{ds.name.display} is already a sparkmv {stored[0].lower().replace('_', ' ')}")
    if stored is not None and stored[2]:
        return _replace_sql_mv(client, project, ds, query, scheme or "MANUAL")
    created = stored is None
    if created:
        client.sql(create_statement(ds.name, ds, query), raise_on_failure=True)
    else:
        changed = {k: v for k, v in sparkmv_properties(ds.properties).items() if stored and stored[1].get(k) != v}
        if changed:
            props = ", ".join(f"{_quote(k)} = {_quote(v)}" for k, v in changed.items())
            client.sql(f"ALTER MATERIALIZED VIEW {ds.name.qualified} SET PROPERTIES ({props})")
    if project.refresh_scheme is not None and (created or scheme != project.refresh_scheme):
        client.sql(f"ALTER MATERIALIZED VIEW {ds.name.qualified} REFRESH {project.refresh_scheme}")
    try:
        run = client.refresh(ds.name, force=force and not created)
    except Exception:
        if created:
            client.sql(f"DROP MATERIALIZED VIEW IF EXISTS {ds.name.qualified}")
        raise
    if run.state not in ("SUCCESS", "SKIPPED") and created:
        client.sql(f"DROP MATERIALIZED VIEW IF EXISTS {ds.name.qualified}")
    return sql_result(client, ds, run, "created" if created else None)


def definition_changed(row: ObjectRow, query: str, ds: Dataset, client: Client | None = None) -> bool:
    """True when SQL dataset ``ds`` (its resolved ``query``) differs from the MV ``row`` the
    catalog stores for it: another query, partition column or set of expectations (the MV is
    then replaced). With ``client``, a query sparkmv stored resolved against its base tables'
    schemas (maintained only so: :func:`sparkmv.services.ddl.create_materialized_view`) is the
    same query; without (metadata only, no Spark), any other text is a change."""
    if (row.partition_by or None) != ds.partition_by:
        return True
    if set(expectations_of(row.options)) != set(ds.expectations):
        return True
    if row.definition == query or client is None:
        return row.definition != query
    from sparkmv.analysis.qualify import qualify_unqualified
    from sparkmv.analysis.query import DIALECT, parse_query, referenced_tables
    from sparkmv.refresh.analyze import base_dataframe

    parsed = parse_query(query)
    rt = client.runtime
    try:
        columns = {b.qualified: base_dataframe(rt, b, empty=True).columns for b in referenced_tables(parsed)}
    except SparkMvError:  # a base table gone: the definition is replaced (and says why)
        return True
    return qualify_unqualified(parsed, columns).sql(DIALECT) != row.definition


def _replace_sql_mv(client: Client, project: Project, ds: Dataset, query: str, scheme: str) -> DatasetResult:
    """A SQL MV whose query or partition column changed: the new definition is built hidden
    and swapped in atomically (``CREATE OR REPLACE``, :mod:`sparkmv.services.replace`), with
    the spec's refresh scheme or else the MV's own; a failed build leaves the MV as it was."""
    statement = create_statement(ds.name, ds, query, replace_scheme=project.refresh_scheme or scheme)
    run = client.execute(statement).run
    assert run is not None  # CREATE OR REPLACE always returns its build run
    if run.state in ("SUCCESS", "SKIPPED"):
        return sql_result(client, ds, run, "definition changed: replaced")
    return sql_result(client, ds, run, "definition changed: not replaced, the MV is left as it was")


def sql_result(client: Client, ds: Dataset, run: RefreshRun, note: str | None) -> DatasetResult:
    """The report line of SQL dataset ``ds`` after ``run`` (``note``: what was done first)."""
    reason = run.error if run.state in ("FAILED", "CANCELLED") else run.reason
    if note:
        reason = f"{note}; {reason}" if reason else note
    state = "FAILED" if run.state == "CANCELLED" else run.state
    rows = _table_rows(client, ds.name) if state != "FAILED" else None
    if ds.kind == STREAMING_TABLE:
        flows = f"flows {', '.join(ds.flows)}"
        reason = f"{flows}; {reason}" if reason else flows
    return DatasetResult(ds.name, "sql", state, run.mode, reason, rows, run.started, run.finished, run.run_id, ds.kind)


def _table_rows(client: Client, name: ObjectName) -> int | None:
    """Rows of the current snapshot of MV ``name``'s Iceberg table (its summary's total)."""
    snap = client.runtime.iceberg.load(name).current_snapshot()
    total = snap.summary.get("total-records") if snap is not None and snap.summary is not None else None
    return int(total) if total is not None else 0 if snap is None else None
