"""Storage: two writers creating the same namespace at once (the datasets of a pipeline run
refreshed concurrently, or two processes) both succeed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from sparkmv.names import ObjectName
from sparkmv.storage.iceberg import IcebergStore

SCHEMA = pa.schema([pa.field("k", pa.int64())])


def test_namespace_created_by_another_writer_between_check_and_insert(
    store: IcebergStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyiceberg checks that the namespace is missing, then inserts its row: when another
    writer inserts it in between, the insert fails on the unique key. That writer's
    namespace is the one wanted, so the table is created in it."""
    other = IcebergStore(f"sqlite:///{tmp_path}/catalog.db", tmp_path / "warehouse")
    store.create_table(ObjectName("shop", "a"), SCHEMA, None)  # the other writer won the race
    real = other.catalog.namespace_exists
    checks: list[str] = []

    def before_the_insert(namespace: str) -> bool:  # this writer's first check ran before it
        checks.append(namespace)
        return len(checks) > 1 and real(namespace)

    monkeypatch.setattr(other.catalog, "namespace_exists", before_the_insert)

    other.create_table(ObjectName("shop", "b"), SCHEMA, None)

    assert sorted(t for _, t in store.catalog.list_tables("shop")) == ["a", "b"]
    assert list(store.catalog.list_namespaces()) == [("shop",)]
