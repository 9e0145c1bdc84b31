"""What a SQL dataset needs around its refresh beyond its query: the external tables of its
``format.`path``` references, its column list checked, and its ``SET`` confs applied.

A dataset with confs refreshes alone (no other dataset runs in the shared SparkSession
meanwhile, :func:`runs_alone`), with each conf set for the refresh and put back after it, as
SDP applies a flow's ``sqlConf`` when it analyses and runs that flow.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sqlglot import exp

from sparkmv.analysis.paths import bind_paths
from sparkmv.analysis.query import DIALECT, parse_query
from sparkmv.names import ObjectName
from sparkmv.pipeline.graph import inlined, resolved_query
from sparkmv.pipeline.model import Dataset
from sparkmv.pipeline.sql_columns import ALIAS, check_schema, declared_ddl

if TYPE_CHECKING:
    from sparkmv.client.client import Client
    from sparkmv.pipeline.project import Project


def stored_query(project: Project, name: ObjectName) -> str:
    """The query sparkmv stores for SQL dataset ``name``: temporary views inlined
    (:func:`resolved_query`) and path references read as their external tables."""
    return bind_paths(resolved_query(project.graph, name, project.namespace), name.namespace)[0]


def stored_text(project: Project, query: str, namespace: str) -> str:
    """Any ``query`` of the project (a flow's, say) as :func:`stored_query` stores a
    dataset's: temporary views inlined, path references read as their external tables
    (one-word names of paths' tables in ``namespace``)."""
    return bind_paths(inlined(project.graph, query, project.namespace), namespace)[0]


def runs_alone(ds: Dataset) -> bool:
    """A dataset no other runs beside: Python (it binds temporary views in the shared
    session) or one with ``SET`` confs (they are set in the shared session)."""
    return ds.is_python or bool(ds.conf)


def prepare(client: Client, project: Project, ds: Dataset, query: str) -> None:
    """Before SQL dataset ``ds`` (stored ``query``) is created or refreshed: create the
    external tables of its path references, and check its typed column list against the
    query's schema when the MV is to be built from this definition.

    Raises:
        SourceError: a path that does not exist or holds no data of its format.
        SparkMvError: the query's schema does not match the declared one
            (:func:`sparkmv.pipeline.sql_columns.check_schema`).
    """
    ensure_paths(client, project, ds)
    typed = [c for c in ds.columns if c.type is not None]
    if typed and _to_build(client, ds, query):
        from pyspark.sql.types import StructType

        from sparkmv.refresh.analyze import run_select

        produced = run_select(client.runtime, _inner(query), schema_only=True).schema
        declared = StructType.fromDDL(declared_ddl(typed))
        check_schema(ds.where, typed, produced, declared)


def ensure_paths(client: Client, project: Project, ds: Dataset) -> None:
    """Create the external tables of SQL dataset ``ds``'s path references (those that exist
    are kept).

    Raises:
        SourceError: a path that does not exist or holds no data of its format.
    """
    _, refs = bind_paths(resolved_query(project.graph, ds.name, project.namespace), ds.name.namespace)
    if refs:
        from sparkmv.services.path_tables import ensure_path_tables

        ensure_path_tables(client.runtime, refs)


def _to_build(client: Client, ds: Dataset, query: str) -> bool:
    """True when the MV is missing or stores another query (it is built from ``query``)."""
    with client.runtime.catalog.read() as s:
        row = client.runtime.catalog.objects.find(s, ds.name)
        return row is None or row.definition != query


def _inner(query: str) -> str:
    """The query under the projection onto the declared columns
    (:func:`sparkmv.pipeline.sql_columns.project_columns`)."""
    tree = parse_query(query)
    for sub in tree.find_all(exp.Subquery):
        if sub.alias == ALIAS:
            return sub.this.sql(DIALECT)
    return query  # pragma: no cover - the projection is always there


@contextmanager
def scoped_spark_conf(client: Client, conf: dict[str, str]) -> Iterator[None]:
    """``conf`` set in the client's SparkSession for the block, then put back (unset when
    it was not set)."""
    if not conf:
        yield
        return
    spark = client.spark
    before = {k: spark.conf.get(k, None) for k in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
