"""Moving a test catalog's schema to one Alembic revision, for the migration round-trip tests."""

from __future__ import annotations

from alembic import command

from sparkmv.catalog import migrate
from sparkmv.catalog.facade import Catalog


def migrate_to(cat: Catalog, revision: str, downgrade: bool) -> None:
    """Upgrade (or, with ``downgrade``, downgrade) ``cat``'s schema to ``revision``."""
    cfg = migrate._config()
    with cat.db.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        (command.downgrade if downgrade else command.upgrade)(cfg, revision)
