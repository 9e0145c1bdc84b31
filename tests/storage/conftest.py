"""Fixtures of the storage tests: an IcebergStore on a fresh SQLite catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkmv.catalog import Catalog
from sparkmv.storage.iceberg import IcebergStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[IcebergStore]:
    """An IcebergStore on a fresh SQLite catalog (sharing the catalog's engine)."""
    url = f"sqlite:///{tmp_path}/catalog.db"
    cat = Catalog.open(url)
    yield IcebergStore(url, tmp_path / "warehouse", cat.db.engine)
    cat.close()
