"""Replacements of an MV left behind (:mod:`sparkmv.services.replace`): a process that died
while building a new definition under its hidden name leaves a catalog row, an Iceberg
table or both; they are dropped by the next replacement of the MV and by its DROP."""

from __future__ import annotations

import logging

from sparkmv.catalog import RefreshState
from sparkmv.errors import BusyError
from sparkmv.names import ObjectName, is_replacement_of
from sparkmv.refresh.runtime import Runtime

log = logging.getLogger("sparkmv.replace")


def discard(rt: Runtime, hidden: ObjectName, name: ObjectName, old_id: int | None = None) -> None:
    """Drop replacement ``hidden`` of MV ``name`` (row and table); its runs join the history
    of the MV when ``old_id`` is given and still the MV's id. Never raises: a replacement
    that cannot be dropped now is a leftover, dropped later (:func:`drop_leftovers`)."""
    try:
        with rt.catalog.transaction() as s:
            row = rt.catalog.objects.find(s, hidden)
            current = rt.catalog.objects.find(s, name)
            if row is not None:
                if old_id is not None and current is not None and current.id == old_id:
                    rt.catalog.runs.reassign(s, row.id, old_id, name.display, renamed=hidden.display)
                rt.catalog.objects.delete(s, row)
        rt.iceberg.drop_table(hidden)
    except Exception as exc:
        log.warning("could not drop the replacement %s of %s: %s", hidden, name, exc)


def drop_leftovers(rt: Runtime, name: ObjectName) -> None:
    """Drop every replacement of MV ``name`` left behind (by a process that died while
    building it): rows that are IDLE or whose lease expired, and Iceberg tables without a
    row.

    Raises:
        BusyError: a replacement of ``name`` is being built by a live process.
    """
    from sparkmv.catalog.clock import utcnow

    with rt.catalog.read() as s:
        rows = [
            r
            for r in rt.catalog.objects.list(s, hidden=True)
            if is_replacement_of(ObjectName(r.namespace, r.name), name)
        ]
    now = utcnow()
    for row in rows:
        if row.state != RefreshState.IDLE and row.lease_expires is not None and row.lease_expires >= now:
            raise BusyError(
                f"cannot replace '{name}': a new definition of it is being built (run {row.current_run_id})"
            )
    known = {ObjectName(r.namespace, r.name) for r in rows}
    tables = {t for t in rt.iceberg.list_tables() if is_replacement_of(t, name)}
    for left in sorted(known | tables):
        log.info("dropping %s, a replacement of %s left behind", left, name)
        discard(rt, left, name)
