"""Apply the numbered Alembic migrations of ``catalog/migrations`` to a database.

Checking that a catalog is already at the newest revision is the common case (every
command does it), so it needs neither Alembic nor its script directory: the head is read
from the ``revision`` / ``down_revision`` lines of the migration files and the current
revision with one SELECT. Alembic is imported only when there is something to migrate.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSION_TABLE = "smv_alembic_version"
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*=\s*(?:None|['\"]([^'\"]+)['\"])\s*$", re.MULTILINE)


def _config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest migration revision shipped with this version of sparkmv: the one revision
    no migration file names as its ``down_revision``."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict((key, value) for key, value in _ASSIGNMENT.findall(path.read_text()))
        if found.get("revision"):
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(found["down_revision"])
    heads = revisions - parents
    assert len(heads) == 1, f"migrations must have one head, found {sorted(heads)}"
    return heads.pop()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return None
        rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return str(rows[0]) if len(rows) == 1 else None


def upgrade(engine: Engine) -> None:
    """Bring the database to the head revision; cheap when it is already there.

    Raises:
        alembic's errors: for a revision this version of sparkmv does not know.
    """
    if current_revision(engine) == head_revision():
        return
    from alembic import command

    cfg = _config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
