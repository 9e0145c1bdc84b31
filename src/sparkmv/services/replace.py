"""``CREATE OR REPLACE MATERIALIZED VIEW``: a new definition of an MV, swapped in atomically.

The new definition is created under a hidden name in the MV's namespace
(:func:`sparkmv.names.replacement_name`, ``__smv_replace_<name>_<8 hex>``: listings, query
rewrite and statements never see it) and built by a FULL refresh through the normal run
lifecycle, while the old MV stays readable and unchanged. Then ONE catalog transaction swaps
it in: the sparkmv rows (:meth:`~sparkmv.catalog.objects.ObjectStore.swap_in`: the object
row takes the MV's name and keeps the new definition's id, version map and positions; the
old MV's runs join its history) and pyiceberg's ``iceberg_tables`` row
(:func:`~sparkmv.storage.iceberg_swap.point_name_at`: the name points at the new table's
metadata), both in the one database, each a compare-and-set checked by row count. Readers
see the old contents until that commit and the new ones after it, never no table. The old
table is kept under a hidden retired name (:func:`sparkmv.names.retired_name`) so that a
reader that opened it before the swap can finish; ``sparkmv vacuum`` drops it once retired
longer than the MV's ``snapshot_retention_hours``, and ``DROP MATERIALIZED VIEW`` with the MV.
MVs reading the MV read it by name: their next refresh sees all of it changed.

A build that fails, or a swap refused (the old MV was refreshed, altered or dropped
meanwhile), drops the replacement: the old MV is as it was; a failed build's run is kept
in the MV's runs, with its error. A replacement left behind by a process that died is
dropped by the next replacement of the same MV and by ``DROP MATERIALIZED VIEW``.
An MV that does not exist is created the same way (built hidden, then named): it appears
built, or not at all.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkmv.catalog import ObjectKind, RefreshState, RunState, Trigger
from sparkmv.catalog.objects import busy_message
from sparkmv.errors import BusyError, ObjectExistsError
from sparkmv.names import ObjectName, replacement_name
from sparkmv.refresh.planner import RefreshRequest
from sparkmv.refresh.result import RefreshRun
from sparkmv.refresh.runtime import Runtime
from sparkmv.services.leftovers import discard, drop_leftovers
from sparkmv.sql.statements import CreateMaterializedView, RefreshScheme

if TYPE_CHECKING:
    from sparkmv.refresh.lifecycle import ProgressCallback

log = logging.getLogger("sparkmv.replace")

BUILT_STATES = (RunState.SUCCESS, RunState.SKIPPED)
"""States of a build run after which the replacement is swapped in."""


@dataclass(frozen=True)
class Replaced:
    """What :func:`replace_materialized_view` did.

    Attributes:
        message: one line for the user.
        run: the build run of the new definition (FAILED or CANCELLED: not swapped in).
        replaced: True when the new definition is now the MV.
        created: True when no MV of that name existed before.
    """

    message: str
    run: RefreshRun
    replaced: bool
    created: bool


def replace_materialized_view(
    rt: Runtime, stmt: CreateMaterializedView, progress: ProgressCallback | None = None, plain_table: bool = False
) -> Replaced:
    """Build ``stmt``'s definition hidden and swap it in for MV ``stmt.name`` in one catalog
    transaction (the module docstring tells the whole protocol); create the MV when missing.
    ``progress``: the refresh progress callback of the build. ``plain_table``: ``stmt.name``
    is a plain Iceberg table of sparkmv's catalog (no sparkmv object: a pipeline's Python
    materialized view), replaced by the MV the same way (retired, never deleted at once).

    Returns:
        The outcome; a build that ended FAILED or CANCELLED is returned (``replaced`` False,
        the old MV untouched), not raised.

    Raises:
        ObjectExistsError: ``stmt.name`` is a table, not a materialized view (unless
            ``plain_table`` and it is a plain Iceberg table).
        BusyError: the MV is being refreshed (now, or when the swap was due), or another
            replacement of it is being built.
        AnalysisError, InvalidPropertyError: the new definition is refused, as by CREATE.
    """
    from sparkmv.refresh.run_now import refresh_mv
    from sparkmv.services.ddl import create_materialized_view

    name = stmt.name
    old_id = _replaceable(rt, name, plain_table)
    drop_leftovers(rt, name)
    hidden = replacement_name(name, uuid.uuid4().hex[:8])
    building = dataclasses.replace(stmt, name=hidden, refresh=RefreshScheme(), if_not_exists=False, or_replace=False)
    create_materialized_view(rt, building, checked_as=name)
    try:
        run = refresh_mv(rt, hidden, Trigger.MANUAL, RefreshRequest(), progress)
        if run.state not in BUILT_STATES:
            discard(rt, hidden, name, old_id)
            run = _as_run_of(run, hidden, name) if old_id is not None else run
            what = "not replaced (the old definition is kept)" if old_id is not None else "not created"
            reason = f": {run.error}" if run.error else ""
            return Replaced(
                f"materialized view '{name}' {what}: run {run.run_id} {run.state}{reason}", run, False, False
            )
        _swap(rt, name, hidden, old_id, stmt.refresh, plain_table)
    except BaseException:
        discard(rt, hidden, name)
        raise
    run = dataclasses.replace(run, name=name.display)
    done = "replaced" if old_id is not None else "created"
    return Replaced(f"{done} materialized view '{name}'", run, True, old_id is None)


def _replaceable(rt: Runtime, name: ObjectName, plain_table: bool = False) -> int | None:
    """The id of MV ``name`` (None when there is none), checked replaceable now.

    Raises:
        ObjectExistsError: ``name`` is a table, or a plain Iceberg table (unless ``plain_table``).
        BusyError: the MV is being refreshed.
    """
    with rt.catalog.read() as s:
        row = rt.catalog.objects.find(s, name)
    if row is None:
        if rt.iceberg.exists(name) and not plain_table:
            raise ObjectExistsError(
                f"'{name}' is a table, not a materialized view: CREATE OR REPLACE cannot replace it"
            )
        return None
    if row.kind != ObjectKind.MATERIALIZED_VIEW:
        raise ObjectExistsError(f"'{name}' is a table, not a materialized view: CREATE OR REPLACE cannot replace it")
    if row.state != RefreshState.IDLE:
        raise BusyError(f"cannot replace '{name}': {busy_message(row)}")
    return row.id


def _swap(
    rt: Runtime, name: ObjectName, hidden: ObjectName, old_id: int | None, scheme: RefreshScheme, plain_table: bool
) -> None:
    """Swap the built replacement ``hidden`` in as ``name`` in one catalog transaction; the
    old table (if any: an MV's, or with ``plain_table`` a plain Iceberg table) is retired.

    Raises:
        BusyError, ObjectExistsError, StorageError: the swap was refused (nothing changed).
    """
    from sparkmv.services.ddl import first_fire_time
    from sparkmv.storage.iceberg_swap import point_name_at, retirement

    replaces = old_id is not None or (plain_table and rt.iceberg.exists(name))  # not in the transaction: its lock
    with rt.catalog.transaction() as s:
        new_id = rt.catalog.objects.get(s, hidden, ObjectKind.MATERIALIZED_VIEW).id
        rt.catalog.objects.swap_in(
            s,
            old_id,
            new_id,
            name,
            refresh_scheme=scheme.text,
            schedule_start=scheme.start,
            schedule_every_seconds=scheme.every_seconds,
            next_fire_time=first_fire_time(scheme),
        )
        point_name_at(s, name, hidden, replaces_table=replaces, retire_as=retirement(name))
    log.info("swapped the new definition of %s in (it was built as %s)", name, hidden)


def _as_run_of(run: RefreshRun, hidden: ObjectName, name: ObjectName) -> RefreshRun:
    """Build run ``run`` of replacement ``hidden`` as the history of MV ``name`` shows it."""
    error = run.error.replace(hidden.display, name.display) if run.error else run.error
    return dataclasses.replace(run, name=name.display, error=error)
