"""The rewrite log store (``smv_rewrite_log``) and migration 0004, on SQLite and PostgreSQL:
rows round-trip newest first, the log keeps the last ``keep`` rows, text is truncated, and
the migration downgrades to 0003 (table gone, other rows kept) and upgrades back."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import inspect

from sparkmv.catalog import Catalog, ObjectKind, migrate
from sparkmv.catalog.rewrite_log import QUERY_CHARS, RewriteLogEntry, RewriteLogStore
from sparkmv.names import ObjectName
from tests.catalog.migration_steps import migrate_to

T0 = dt.datetime(2026, 11, 23, 12, 0, 0)


def _entry(i: int, mv: str | None = "q1", query: str = "SELECT 1") -> RewriteLogEntry:
    return RewriteLogEntry(
        T0 + dt.timedelta(seconds=i), f"{i:016x}", query, mv, "rollup" if mv else None, 1.5 * i, None
    )


def test_record_and_list_newest_first_and_bounded(catalog_url: str) -> None:
    cat = Catalog.open(catalog_url)
    try:
        assert cat.rewrite_log.list() == []
        cat.rewrite_log.record([_entry(1), _entry(1, mv="seg")])
        cat.rewrite_log.record([_entry(2, mv=None, query="x" * 5000)])
        rows = cat.rewrite_log.list()
        assert [(r.mv, r.rewrite_class, r.analysis_ms) for r in rows] == [
            (None, None, 3.0),
            ("seg", "rollup", 1.5),
            ("q1", "rollup", 1.5),
        ]
        assert rows[0].query == "x" * (QUERY_CHARS - 3) + "..."
        assert rows[1] == _entry(1, mv="seg")
        assert cat.rewrite_log.list(limit=1) == rows[:1]

        small = RewriteLogStore(cat.db, keep=3)
        for i in range(3, 8):
            small.record([_entry(i)])
        assert [r.fingerprint for r in small.list()] == [f"{i:016x}" for i in (7, 6, 5)]
    finally:
        cat.close()


def test_migration_0004_round_trips(catalog_url: str) -> None:
    cat = Catalog.open(catalog_url)
    try:
        with cat.transaction() as s:
            cat.objects.insert(s, ObjectName("default", "t"), ObjectKind.EXTERNAL_TABLE)
        cat.rewrite_log.record([_entry(1)])
        migrate_to(cat, "0003", downgrade=True)
        assert "smv_rewrite_log" not in inspect(cat.db.engine).get_table_names()
        assert migrate.current_revision(cat.db.engine) == "0003"
        migrate_to(cat, "0004", downgrade=False)
        assert migrate.current_revision(cat.db.engine) == "0004"
        assert cat.rewrite_log.list() == []  # the log itself is not kept across a downgrade
        cat.rewrite_log.record([_entry(2)])
        assert cat.rewrite_log.list() == [_entry(2)]
        with cat.read() as s:
            assert [r.name for r in cat.objects.list(s)] == ["t"]
    finally:
        cat.close()
