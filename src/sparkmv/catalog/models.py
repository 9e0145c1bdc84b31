"""SQLAlchemy 2 models of the sparkmv metadata tables.

One row per catalog object in ``smv_objects`` (external tables, materialized views,
refreshable tables share one namespace of names); refresh runs in ``smv_task_runs``; one
row per chunk of a run in ``smv_refresh_progress`` (the progress table); the version map in
``smv_version_map``; control commands in ``smv_control``; the queries considered for query
rewrite in ``smv_rewrite_log``. The schema is created and changed only by the Alembic
migrations in ``catalog/migrations``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of the sparkmv metadata tables."""


class ObjectRow(Base):
    """A table or materialized view known to sparkmv.

    ``state``/``current_run_id``/``lease_owner``/``lease_expires`` form the refresh state
    machine; they change only through the compare-and-set updates of
    :class:`sparkmv.catalog.objects.ObjectStore`.
    """

    __tablename__ = "smv_objects"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_smv_objects_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    definition: Mapped[str | None] = mapped_column(Text, nullable=True)
    location: Mapped[str | None] = mapped_column(Text, nullable=True)
    format: Mapped[str | None] = mapped_column(String(32), nullable=True)
    schema_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    partition_columns: Mapped[list[str]] = mapped_column(JSON, default=list)
    partition_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    base_tables: Mapped[list[str]] = mapped_column(JSON, default=list)
    properties: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    refresh_scheme: Mapped[str] = mapped_column(String(200), default="MANUAL")
    state: Mapped[str] = mapped_column(String(16), default="IDLE")
    state_since: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    current_run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lease_owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    lease_expires: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    inactive_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_success_run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_trigger_time: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_success_time: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    schedule_start: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    schedule_every_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    next_fire_time: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_fire_time: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    suspended: Mapped[bool] = mapped_column(Boolean, default=False)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    refresh_state_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class TaskRunRow(Base):
    """One refresh run: trigger, mode, plan (pinned input and chunks), state, counts."""

    __tablename__ = "smv_task_runs"

    run_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    object_id: Mapped[int] = mapped_column(ForeignKey("smv_objects.id", ondelete="CASCADE"), index=True)
    object_name: Mapped[str] = mapped_column(String(260))
    trigger: Mapped[str] = mapped_column(String(32))
    mode: Mapped[str | None] = mapped_column(String(32), nullable=True)
    mode_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    state: Mapped[str] = mapped_column(String(32))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    publish: Mapped[str] = mapped_column(String(16), default="atomic")
    created: Mapped[datetime] = mapped_column(DateTime)
    started: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    plan: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    partitions_planned: Mapped[int] = mapped_column(Integer, default=0)
    partitions_done: Mapped[int] = mapped_column(Integer, default=0)
    chunks_planned: Mapped[int] = mapped_column(Integer, default=0)
    chunks_done: Mapped[int] = mapped_column(Integer, default=0)
    rows_written: Mapped[int] = mapped_column(BigInteger, default=0)
    rows_inserted: Mapped[int] = mapped_column(BigInteger, default=0)
    rows_updated: Mapped[int] = mapped_column(BigInteger, default=0)
    rows_deleted: Mapped[int] = mapped_column(BigInteger, default=0)
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    request_options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    candidates: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    """The refresh techniques weighed (mode, eligible, estimate_bytes, chosen, reason)."""
    estimate_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """The chosen technique's estimate of the bytes it reads (None when none was weighed)."""
    bytes_read: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """Bytes the run's Spark jobs read in this process, by Spark's input metrics (None on
    Spark Connect, where the driver's metrics are out of reach, and for SKIPPED runs)."""
    files_written: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Data files the run's chunks staged (None: the run committed nothing)."""
    files_replaced: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """Data files the run's commits removed from the table (None: the run committed nothing)."""
    timings: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """Where the run's time went: seconds per phase and its Spark jobs
    (:mod:`sparkmv.refresh.timing`); None for runs stored before it was recorded."""


class ProgressRow(Base):
    """The progress table: one row per chunk of a run.

    A chunk is recorded ``is_completed`` only after its data files are fully written;
    ``files`` lists them (absolute URIs) so the publish can commit them.
    """

    __tablename__ = "smv_refresh_progress"

    run_id: Mapped[int] = mapped_column(ForeignKey("smv_task_runs.run_id", ondelete="CASCADE"), primary_key=True)
    chunk_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    partitions: Mapped[list[Any]] = mapped_column(JSON, default=list)
    is_completed: Mapped[bool] = mapped_column(Boolean, default=False)
    position: Mapped[str | None] = mapped_column(Text, nullable=True)
    outcome: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
    processed_rows: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_written: Mapped[int] = mapped_column(BigInteger, default=0)
    files_written: Mapped[int] = mapped_column(Integer, default=0)
    files: Mapped[list[str]] = mapped_column(JSON, default=list)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    duration_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    published: Mapped[bool] = mapped_column(Boolean, default=False)
    last_checkpoint: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class VersionRow(Base):
    """The version map: per object, base table and base partition, the version consumed."""

    __tablename__ = "smv_version_map"

    object_id: Mapped[int] = mapped_column(ForeignKey("smv_objects.id", ondelete="CASCADE"), primary_key=True)
    base_table: Mapped[str] = mapped_column(String(260), primary_key=True)
    base_partition: Mapped[str] = mapped_column(String(1000), primary_key=True)
    version: Mapped[str] = mapped_column(String(255))
    changed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class PositionRow(Base):
    """The consumed position of an object per base table: the pinned base table (JSON) of
    the last run after which the object equals its query over that input."""

    __tablename__ = "smv_consumed_positions"

    object_id: Mapped[int] = mapped_column(ForeignKey("smv_objects.id", ondelete="CASCADE"), primary_key=True)
    base_table: Mapped[str] = mapped_column(String(260), primary_key=True)
    position: Mapped[dict[str, Any]] = mapped_column(JSON)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class ControlRow(Base):
    """A control command (CANCEL, PAUSE, RESUME) for a run, consumed between chunks."""

    __tablename__ = "smv_control"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    object_id: Mapped[int] = mapped_column(ForeignKey("smv_objects.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    command: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class RewriteLogRow(Base):
    """One query considered for query rewrite (``sparkmv.rewrite_log``): one row per MV the
    rewrite used, or one row with ``mv`` NULL when none was. Bounded: see
    :class:`sparkmv.catalog.rewrite_log.RewriteLogStore`."""

    __tablename__ = "smv_rewrite_log"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    query_time: Mapped[datetime] = mapped_column(DateTime)
    fingerprint: Mapped[str] = mapped_column(String(32))
    query: Mapped[str] = mapped_column(Text)
    mv: Mapped[str | None] = mapped_column(String(260), nullable=True)
    rewrite_class: Mapped[str | None] = mapped_column(String(16), nullable=True)
    analysis_ms: Mapped[float] = mapped_column(Float)
    rejected: Mapped[str | None] = mapped_column(Text, nullable=True)


class ExternalCatalogRow(Base):
    """An external Iceberg catalog (``CREATE EXTERNAL CATALOG``): its name and the
    properties passed to pyiceberg's ``load_catalog``, as written (secrets only as
    ``env:NAME`` references, never in clear text)."""

    __tablename__ = "smv_external_catalogs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    catalog_type: Mapped[str] = mapped_column(String(32))
    properties: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class PipelineDatasetRow(Base):
    """One dataset of a Spark Declarative Pipelines project run by ``sparkmv pipeline run``
    (``sparkmv.pipeline_datasets``): SQL and Python, materialized views, streaming tables,
    views and sinks, with the outcome of its newest run. See
    :class:`sparkmv.catalog.pipelines.PipelineStore`."""

    __tablename__ = "smv_pipeline_datasets"
    __table_args__ = (UniqueConstraint("namespace", "name", name="uq_smv_pipeline_datasets_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    pipeline: Mapped[str] = mapped_column(String(200))
    namespace: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(16))
    definition_file: Mapped[str] = mapped_column(Text)
    definition_line: Mapped[int] = mapped_column(Integer)
    last_state: Mapped[str | None] = mapped_column(String(16), nullable=True)
    last_technique: Mapped[str | None] = mapped_column(String(16), nullable=True)
    last_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    rows: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    last_run_start: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_run_end: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime)


class ExpectationResultRow(Base):
    """The rows that passed and failed one expectation in one refresh run
    (``sparkmv.expectations``). See :class:`sparkmv.catalog.expectations.ExpectationStore`."""

    __tablename__ = "smv_expectation_results"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    """The refresh run; None for a dataset a pipeline keeps outside the run lifecycle (a
    Python table or streaming table), counted per pipeline run."""
    dataset: Mapped[str] = mapped_column(String(260), index=True)
    expectation: Mapped[str] = mapped_column(String(260))
    action: Mapped[str] = mapped_column(String(8))
    condition: Mapped[str] = mapped_column(Text)
    rows_passed: Mapped[int] = mapped_column(BigInteger)
    rows_failed: Mapped[int] = mapped_column(BigInteger)
    recorded_at: Mapped[datetime] = mapped_column(DateTime)


class EventRow(Base):
    """One event of the event log (``sparkmv.pipeline_events``). See
    :class:`sparkmv.catalog.events.EventStore`."""

    __tablename__ = "smv_pipeline_events"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    timestamp: Mapped[datetime] = mapped_column(DateTime, index=True)
    pipeline: Mapped[str | None] = mapped_column(String(200), nullable=True, index=True)
    run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    dataset: Mapped[str | None] = mapped_column(String(260), nullable=True)
    event_type: Mapped[str] = mapped_column(String(40))
    level: Mapped[str] = mapped_column(String(8))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)
