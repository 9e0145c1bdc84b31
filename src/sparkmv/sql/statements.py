"""Statement types produced by :mod:`sparkmv.sql.parser` (plain data, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sparkmv.analysis.expectations import Expectation
from sparkmv.names import ObjectName


@dataclass(frozen=True)
class RefreshScheme:
    """How an MV is refreshed: ``MANUAL``, or ``ASYNC`` on change / on a schedule.

    Attributes:
        kind: MANUAL or ASYNC.
        start: first fire time of a schedule (naive UTC), if given.
        every_seconds: schedule period in seconds (None: ASYNC on base-table change).
        text: the scheme as written, normalised (shown in system tables).
    """

    kind: str = "MANUAL"
    start: datetime | None = None
    every_seconds: int | None = None
    text: str = "MANUAL"


@dataclass(frozen=True)
class CreateExternalTable:
    """``CREATE EXTERNAL TABLE [IF NOT EXISTS] name USING parquet | csv | json | orc | delta
    [OPTIONS ('k' = 'v', ...)] LOCATION 'path'`` (OPTIONS: Spark's reader options)."""

    name: ObjectName
    location: str
    format: str = "parquet"
    if_not_exists: bool = False
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateExternalCatalog:
    """``CREATE EXTERNAL CATALOG [IF NOT EXISTS] name PROPERTIES ("type" = "iceberg", ...)``."""

    name: str
    properties: dict[str, str]
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropCatalog:
    """``DROP CATALOG [IF EXISTS] name``."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ColumnDef:
    """A column of ``CREATE TABLE``: name, Spark SQL type, NOT NULL."""

    name: str
    type: str
    not_null: bool = False


@dataclass(frozen=True)
class CreateRefreshableTable:
    """``CREATE TABLE name (cols, PRIMARY KEY (...)) [ON CONFLICT ...] WITH (...)``."""

    name: ObjectName
    columns: list[ColumnDef]
    primary_key: list[str]
    on_conflict: str
    options: dict[str, str]
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateMaterializedView:
    """``CREATE [OR REPLACE] MATERIALIZED VIEW ... AS <select>`` (``or_replace``: an existing
    MV of that name is replaced atomically once the new definition is built; ``expectations``:
    the ``(CONSTRAINT name EXPECT (...) ...)`` list after the name, in the order written)."""

    name: ObjectName
    query: str
    partition_by: str | None = None
    refresh: RefreshScheme = field(default_factory=RefreshScheme)
    properties: dict[str, str] = field(default_factory=dict)
    if_not_exists: bool = False
    deferred: bool = False
    or_replace: bool = False
    expectations: tuple[Expectation, ...] = ()


@dataclass(frozen=True)
class RefreshMaterializedView:
    """``REFRESH MATERIALIZED VIEW name [PARTITION START ('a') END ('b')] [FORCE]
    [WITH SYNC MODE | WITH ASYNC MODE]``."""

    name: ObjectName
    start: str | None = None
    end: str | None = None
    force: bool = False
    asynchronous: bool = False


@dataclass(frozen=True)
class RefreshMaterializedViews:
    """``REFRESH MATERIALIZED VIEW a, b, ... [FORCE]`` and ``REFRESH ALL MATERIALIZED VIEWS
    [FORCE]``: one refresh pass over several MVs, in dependency order (``names`` empty and
    ``every`` True for ALL)."""

    names: tuple[ObjectName, ...]
    every: bool = False
    force: bool = False


@dataclass(frozen=True)
class ExplainRefresh:
    """``EXPLAIN REFRESH MATERIALIZED VIEW ...``: print the plan without running it;
    ``EXPLAIN ANALYZE REFRESH MATERIALIZED VIEW ...`` (``analyze``): run the refresh and
    print the plan's estimate beside where the run's time went."""

    refresh: RefreshMaterializedView
    analyze: bool = False


@dataclass(frozen=True)
class RefreshTable:
    """``REFRESH TABLE name [WITH SYNC MODE | WITH ASYNC MODE]``."""

    name: ObjectName
    asynchronous: bool = False


@dataclass(frozen=True)
class CancelRefresh:
    """``CANCEL REFRESH MATERIALIZED VIEW name``."""

    name: ObjectName


@dataclass(frozen=True)
class DropObject:
    """``DROP MATERIALIZED VIEW [IF EXISTS] name`` or ``DROP TABLE [IF EXISTS] name``."""

    name: ObjectName
    materialized_view: bool
    if_exists: bool = False


@dataclass(frozen=True)
class AlterMaterializedView:
    """``ALTER MATERIALIZED VIEW name`` with one action: ``SET PROPERTIES (...)``,
    ``ACTIVE``, ``INACTIVE``, ``REFRESH <scheme>`` or ``RESUME SCHEDULE``."""

    name: ObjectName
    set_properties: dict[str, str] | None = None
    active: bool | None = None
    refresh: RefreshScheme | None = None
    resume_schedule: bool = False


@dataclass(frozen=True)
class Show:
    """``SHOW MATERIALIZED VIEWS``, ``SHOW TABLES`` or ``SHOW CATALOGS``."""

    what: str


@dataclass(frozen=True)
class Describe:
    """``DESCRIBE [EXTENDED] name`` (EXTENDED: also the kind, format, location and partition
    columns)."""

    name: ObjectName
    extended: bool = False


@dataclass(frozen=True)
class ExplainQuery:
    """``EXPLAIN <select>``: show how query rewrite would answer the query, without running it."""

    sql: str


@dataclass(frozen=True)
class SetVariable:
    """``SET <name> = <value>``: a session variable of the client (names lower-cased; the
    only one is ``enable_materialized_view_rewrite``, a boolean)."""

    name: str
    value: bool


@dataclass(frozen=True)
class Query:
    """Any other statement: a SELECT run on Spark."""

    sql: str


Statement = (
    CreateExternalTable
    | CreateExternalCatalog
    | DropCatalog
    | CreateRefreshableTable
    | CreateMaterializedView
    | RefreshMaterializedView
    | RefreshMaterializedViews
    | ExplainRefresh
    | ExplainQuery
    | SetVariable
    | RefreshTable
    | CancelRefresh
    | DropObject
    | AlterMaterializedView
    | Show
    | Describe
    | Query
)
