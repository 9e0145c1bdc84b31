"""Opening a SQLite catalog file: created only where none exists (atomically, once when
several open it at once), an empty, foreign or damaged file refused and left untouched."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from sparkmv.catalog import Catalog, migrate
from sparkmv.errors import CatalogError


def test_head_revision_is_alembics_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(migrate.MIGRATIONS_DIR))
    assert migrate.head_revision() == ScriptDirectory.from_config(cfg).get_current_head()


@pytest.mark.parametrize(
    "content",
    [b"", b"not a database at all\n", b"SQLite format 3\x00" + b"\xff" * 500],
    ids=["empty", "garbage", "damaged_page"],
)
def test_unusable_file_is_refused_and_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "catalog.db"
    path.write_bytes(content)
    with pytest.raises(CatalogError, match=r"^catalog .*catalog\.db is empty or damaged; restore it from a backup$"):
        Catalog.open(f"sqlite:///{path}")
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db"]


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path: Path, journal: str) -> None:
    """Also in WAL mode, where any reader makes ``-wal`` and ``-shm`` files beside it."""
    path = tmp_path / "catalog.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode={journal}")
    conn.execute("CREATE TABLE notes (x text)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(CatalogError, match="is empty or damaged"):
        Catalog.open(f"sqlite:///{path}")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.db"], "nothing is left beside it"


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite+pysqlite://"])
def test_an_in_memory_catalog_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(CatalogError) as refused:
        Catalog.open(url)
    assert str(refused.value) == (
        f"catalog URL '{url}' is an in-memory SQLite database, which loses every object when the process exits; "
        "give a file (sqlite:////path/catalog.db) or a PostgreSQL URL"
    )


def test_concurrent_first_opens_make_one_catalog(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/home/catalog.db"
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            Catalog.open(url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in (tmp_path / "home").iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "catalog.db"
    ]
    cat = Catalog.open(url)
    try:
        assert migrate.current_revision(cat.db.engine) == migrate.head_revision()
    finally:
        cat.close()


def test_unwritable_directory_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(CatalogError, match=r"^cannot create catalog directory .*/file: not a directory$"):
        Catalog.open(f"sqlite:///{tmp_path}/file/catalog.db")
    with pytest.raises(CatalogError, match=r"^cannot create catalog directory /proc/sparkmv: "):
        Catalog.open("sqlite:////proc/sparkmv/catalog.db")
