"""ObjectStore: the ``smv_objects`` table and its compare-and-set state transitions.

Every change of ``state`` is one ``UPDATE ... WHERE state = :expected [AND owner]``
checked by row count, as pyiceberg's SqlCatalog commits are. A transition that matches no
row means another process got there first; the caller gets a domain error built from the
row as it is now.
"""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sparkmv.catalog.clock import utcnow
from sparkmv.catalog.database import add_unique
from sparkmv.catalog.models import ControlRow, ObjectRow, PositionRow, TaskRunRow, VersionRow
from sparkmv.catalog.states import ObjectKind, RefreshState
from sparkmv.errors import BusyError, LeaseLostError, ObjectExistsError, ObjectNotFoundError
from sparkmv.names import ObjectName, is_replacement

KIND_LABEL = {
    ObjectKind.EXTERNAL_TABLE: "Table",
    ObjectKind.MATERIALIZED_VIEW: "MV",
    ObjectKind.REFRESHABLE_TABLE: "Table",
}


def busy_message(row: ObjectRow) -> str:
    """The error text for a refresh of an object that is not IDLE.

    >>> from datetime import datetime
    >>> r = ObjectRow(namespace="default", name="x", kind="MATERIALIZED_VIEW", state="REFRESHING",
    ...               current_run_id=17, lease_owner="h:42", state_since=datetime(2026, 1, 1))
    >>> busy_message(r)
    "MV 'x' is being refreshed (state REFRESHING, run 17, owner h:42, since 2026-01-01 00:00:00)"
    """
    name = ObjectName(row.namespace, row.name).display
    if row.kind == ObjectKind.REFRESHABLE_TABLE:
        return f"Table '{name}' is not in idle state (current state {row.state}, run {row.current_run_id})"
    since = row.state_since.isoformat(sep=" ", timespec="seconds") if row.state_since else "?"
    owner = ":".join((row.lease_owner or "?").split(":")[:2])  # host:pid (the lease also holds a start time)
    return f"MV '{name}' is being refreshed (state {row.state}, run {row.current_run_id}, owner {owner}, since {since})"


class ObjectStore:
    """Reads and writes ``smv_objects`` rows inside a caller's session."""

    # -- plain reads and writes ------------------------------------------------------
    @staticmethod
    def find(session: Session, name: ObjectName) -> ObjectRow | None:
        """The row named ``name``, or None (always None for an external catalog's table)."""
        if name.catalog:
            return None
        return session.scalars(
            select(ObjectRow).where(ObjectRow.namespace == name.namespace, ObjectRow.name == name.name)
        ).one_or_none()

    @classmethod
    def get(cls, session: Session, name: ObjectName, kind: ObjectKind | None = None) -> ObjectRow:
        """The row named ``name``.

        Raises:
            ObjectNotFoundError: when no object (of ``kind``, if given) has that name.
        """
        row = cls.find(session, name)
        if row is None or (kind is not None and row.kind != kind):
            what = "materialized view" if kind == ObjectKind.MATERIALIZED_VIEW else "table or view"
            raise ObjectNotFoundError(f"{what} '{name}' does not exist")
        return row

    @staticmethod
    def by_id(session: Session, object_id: int) -> ObjectRow:
        """The row with primary key ``object_id``.

        Raises:
            ObjectNotFoundError: when it was dropped.
        """
        row = session.get(ObjectRow, object_id)
        if row is None:
            raise ObjectNotFoundError(f"object {object_id} does not exist")
        return row

    @staticmethod
    def list(session: Session, kind: ObjectKind | None = None, *, hidden: bool = False) -> list[ObjectRow]:
        """All objects (of ``kind``), ordered by namespace and name; without the hidden
        replacements being built (:data:`sparkmv.names.REPLACEMENT_PREFIX`) unless ``hidden``."""
        stmt = select(ObjectRow).order_by(ObjectRow.namespace, ObjectRow.name)
        if kind is not None:
            stmt = stmt.where(ObjectRow.kind == kind)
        return [r for r in session.scalars(stmt) if hidden or not is_replacement(r.name)]

    @staticmethod
    def insert(session: Session, name: ObjectName, kind: ObjectKind, **fields: Any) -> ObjectRow:
        """Insert a new object.

        Raises:
            ObjectExistsError: when the name is taken (checked by the unique constraint, so
                two concurrent CREATEs cannot both succeed).
        """
        now = utcnow()
        row = ObjectRow(
            namespace=name.namespace,
            name=name.name,
            kind=kind,
            state=RefreshState.IDLE,
            created_at=now,
            updated_at=now,
            **fields,
        )
        add_unique(session, row, f"'{name}' already exists")
        return row

    @staticmethod
    def delete(session: Session, row: ObjectRow) -> None:
        """Delete an object and (by cascade) its runs, progress and version map."""
        session.execute(delete(ObjectRow).where(ObjectRow.id == row.id))

    @staticmethod
    def set_fields(session: Session, object_id: int, **fields: Any) -> None:
        """Update plain (non-state) fields of one object."""
        fields["updated_at"] = utcnow()
        session.execute(update(ObjectRow).where(ObjectRow.id == object_id).values(**fields))

    @staticmethod
    def swap_in(session: Session, old_id: int | None, new_id: int, name: ObjectName, **fields: Any) -> None:
        """Make object ``new_id`` (a replacement built under a hidden name) the object named
        ``name``, in the caller's transaction: object ``old_id`` (None: there is none) hands
        its runs over and is deleted with its version map, positions and control rows; the
        new row takes ``name`` and ``fields``. Its id, version map and positions are the new
        definition's; MVs reading ``name`` read it by name, so they need no change.

        Raises:
            BusyError: object ``old_id`` is no longer IDLE (a refresh started meanwhile) or
                was dropped, or the new row is not IDLE; nothing is changed.
            ObjectExistsError: ``old_id`` is None and ``name`` was created meanwhile.
        """
        session.execute(
            update(TaskRunRow)
            .where(TaskRunRow.object_id == new_id)
            .values(object_name=name.display)
            .execution_options(synchronize_session=False)
        )
        if old_id is not None:
            session.execute(
                update(TaskRunRow)
                .where(TaskRunRow.object_id == old_id)
                .values(object_id=new_id)
                .execution_options(synchronize_session=False)
            )
            for table in (VersionRow, PositionRow, ControlRow):
                session.execute(delete(table).where(table.object_id == old_id))
            gone = session.execute(
                delete(ObjectRow)
                .where(ObjectRow.id == old_id, ObjectRow.state == RefreshState.IDLE)
                .execution_options(synchronize_session=False)
            )
            if gone.rowcount != 1:  # type: ignore[attr-defined]
                row = session.get(ObjectRow, old_id)
                raise BusyError(busy_message(row) if row is not None else f"'{name}' was dropped meanwhile")
        try:
            renamed = session.execute(
                update(ObjectRow)
                .where(ObjectRow.id == new_id, ObjectRow.state == RefreshState.IDLE)
                .values(namespace=name.namespace, name=name.name, updated_at=utcnow(), **fields)
                .execution_options(synchronize_session=False)
            )
        except IntegrityError as exc:
            raise ObjectExistsError(f"'{name}' was created meanwhile") from exc
        if renamed.rowcount != 1:  # type: ignore[attr-defined]
            raise BusyError(f"the new definition of '{name}' is being refreshed; it was not swapped in")

    @classmethod
    def deactivate_readers(cls, session: Session, name: str, reason: str) -> builtins.list[str]:
        """Turn inactive every MV that reads ``name`` (qualified), and the MVs over those,
        down the whole MV graph; each names its cause in ``inactive_reason``.

        Returns:
            The qualified names of the MVs turned inactive now (already inactive MVs keep
            their reason, and their readers are visited all the same).
        """
        changed: builtins.list[str] = []
        seen = {name}
        pending = [(name, reason)]
        mvs = cls.list(session, ObjectKind.MATERIALIZED_VIEW)
        while pending:
            current, why = pending.pop(0)
            for mv in mvs:
                qualified = f"{mv.namespace}.{mv.name}"
                if current not in (mv.base_tables or []) or qualified in seen:
                    continue
                seen.add(qualified)
                if mv.is_active:
                    cls.set_fields(session, mv.id, is_active=False, inactive_reason=why)
                    mv.is_active, mv.inactive_reason = False, why
                    changed.append(qualified)
                display = qualified.removeprefix("default.")
                pending.append((qualified, f"input materialized view '{display}' is inactive: {why}"))
        return changed

    # -- compare-and-set transitions ------------------------------------------------------
    @staticmethod
    def begin_refresh(session: Session, row: ObjectRow, run_id: int, owner: str, lease_seconds: float) -> None:
        """CAS ``IDLE -> REFRESHING`` and take the lease for ``run_id``.

        Raises:
            BusyError: when the object is not IDLE; the message names its state and run.
        """
        now = utcnow()
        result = session.execute(
            update(ObjectRow)
            .where(ObjectRow.id == row.id, ObjectRow.state == RefreshState.IDLE)
            .values(
                state=RefreshState.REFRESHING,
                current_run_id=run_id,
                lease_owner=owner,
                lease_expires=now + timedelta(seconds=lease_seconds),
                state_since=now,
                last_trigger_time=now,
                last_run_id=run_id,
            )
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            session.expire(row)
            raise BusyError(busy_message(session.get(ObjectRow, row.id) or row))

    @staticmethod
    def transition(
        session: Session,
        object_id: int,
        run_id: int,
        owner: str,
        expected: RefreshState,
        new: RefreshState,
        lease_seconds: float,
    ) -> None:
        """CAS ``expected -> new`` for the run holding the lease; renews the lease.

        ``new == IDLE`` releases the lease.

        Raises:
            LeaseLostError: when the object is no longer in ``expected`` held by
                ``run_id``/``owner`` (the lease expired and recovery took over).
        """
        now = utcnow()
        values: dict[str, Any] = {"state": new, "state_since": now}
        if new == RefreshState.IDLE:
            values.update(current_run_id=None, lease_owner=None, lease_expires=None)
        else:
            values["lease_expires"] = now + timedelta(seconds=lease_seconds)
        result = session.execute(
            update(ObjectRow)
            .where(
                ObjectRow.id == object_id,
                ObjectRow.state == expected,
                ObjectRow.current_run_id == run_id,
                ObjectRow.lease_owner == owner,
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise LeaseLostError(f"run {run_id} lost its lease on object {object_id} (expected state {expected})")

    @staticmethod
    def renew_lease(session: Session, object_id: int, run_id: int, owner: str, lease_seconds: float) -> bool:
        """Extend the lease of ``owner``; False when the lease is no longer ours."""
        result = session.execute(
            update(ObjectRow)
            .where(
                ObjectRow.id == object_id,
                ObjectRow.current_run_id == run_id,
                ObjectRow.lease_owner == owner,
                ObjectRow.state != RefreshState.IDLE,
            )
            .values(lease_expires=utcnow() + timedelta(seconds=lease_seconds))
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]

    @classmethod
    def require_lease(
        cls, session: Session, object_id: int, run_id: int, owner: str, lease_seconds: float, what: str
    ) -> None:
        """Renew the lease of ``owner`` inside the caller's transaction, so what the caller
        writes next in it is written only while the lease is held.

        Raises:
            LeaseLostError: when the lease is no longer ours (``what``: the step refused).
        """
        if not cls.renew_lease(session, object_id, run_id, owner, lease_seconds):
            raise LeaseLostError(f"run {run_id} lost its lease before {what}")

    @staticmethod
    def expired_leases(session: Session, now: datetime | None = None) -> builtins.list[ObjectRow]:
        """Objects in a non-IDLE state whose lease expired (their owner is presumed dead)."""
        now = now or utcnow()
        return list(
            session.scalars(
                select(ObjectRow).where(
                    ObjectRow.state != RefreshState.IDLE,
                    ObjectRow.lease_expires < now,
                )
            )
        )

    @staticmethod
    def take_over(session: Session, row: ObjectRow, new_owner: str, lease_seconds: float) -> bool:
        """CAS the lease from its expired owner to ``new_owner``; False if someone else won."""
        now = utcnow()
        result = session.execute(
            update(ObjectRow)
            .where(
                and_(
                    ObjectRow.id == row.id,
                    ObjectRow.state == row.state,
                    ObjectRow.current_run_id == row.current_run_id,
                    ObjectRow.lease_owner == row.lease_owner,
                    ObjectRow.lease_expires < now,
                )
            )
            .values(lease_owner=new_owner, lease_expires=now + timedelta(seconds=lease_seconds))
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]
