"""Partition versions of an external Iceberg table (no Spark): dropping a whole data file of
a partition that keeps a newer file is a change of that partition (a case once missed:
Iceberg's last-updated snapshot of a partition counts live files only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo

from sparkmv.names import ObjectName
from sparkmv.sources import external_tables
from tests.sources.test_external_catalogs import batch, make_events

NAME = ObjectName.parse("lake.db.events")
DAY = "ts=2024-02-03 00:00:00"


def _events(tmp_path: Path) -> Any:
    (tmp_path / "wh").mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=(tmp_path / "wh").as_uri())
    return make_events(cat)


def test_dropping_one_whole_file_of_a_day_changes_its_version(tmp_path: Path) -> None:
    events = _events(tmp_path)
    events.append(batch([("2024-02-03 18:00:00", "z", 100)]))  # a second, newer file that day
    before = external_tables.pin(NAME, events, {})
    events.delete(EqualTo("amount", 4))  # the older file of the day, whole: no rewrite
    after = external_tables.pin(NAME, events, {})
    assert (before.partitions[DAY].rows, after.partitions[DAY].rows) == (2, 1)
    assert before.partitions[DAY].version != after.partitions[DAY].version
    # the other days are untouched
    others = {k: p.version for k, p in before.partitions.items() if k != DAY}
    assert others == {k: p.version for k, p in after.partitions.items() if k != DAY}
