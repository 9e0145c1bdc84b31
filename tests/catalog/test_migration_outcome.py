"""Migration 0002: the merge counts of a reload's progress rows move from JSON text in
``position`` to the typed ``outcome`` column, and back on downgrade; rows written before
the upgrade stay readable."""

from __future__ import annotations

import json

from sqlalchemy import text

from sparkmv.catalog import Catalog, ObjectKind, Trigger, migrate
from sparkmv.names import ObjectName
from tests.catalog.migration_steps import migrate_to

COUNTS = {"I": 1, "U": 2, "D": 3, "changed": True, "rows": 4}


def test_outcome_round_trips_through_downgrade_and_upgrade(catalog_url: str) -> None:
    cat = Catalog.open(catalog_url)
    try:
        with cat.transaction() as s:
            row = cat.objects.insert(s, ObjectName("default", "t"), ObjectKind.REFRESHABLE_TABLE, options={})
            run_id = cat.runs.create(s, row.id, "t", Trigger.MANUAL).run_id
            cat.runs.add_chunks(s, run_id, [[0], [1]])
            cat.runs.complete_chunk(
                s, run_id, 0, files=[], processed_rows=4, bytes_written=0, duration_seconds=0.0, outcome=COUNTS
            )
            cat.runs.complete_chunk(
                s, run_id, 1, files=[], processed_rows=0, bytes_written=0, duration_seconds=0.0, position="12"
            )
        migrate_to(cat, "0001", downgrade=True)  # the layout of 0001: counts packed into position
        with cat.db.engine.connect() as conn:
            positions = conn.execute(
                text("SELECT chunk_id, position FROM smv_refresh_progress ORDER BY chunk_id")
            ).all()
        assert [(c, json.loads(p)) for c, p in positions] == [(0, COUNTS), (1, 12)]
        migrate_to(cat, "head", downgrade=False)
        with cat.read() as s:
            progress = cat.runs.chunks(s, run_id)
        assert [(p.outcome, p.position) for p in progress] == [(COUNTS, None), (None, "12")]
        assert migrate.current_revision(cat.db.engine) == migrate.head_revision()
    finally:
        cat.close()
