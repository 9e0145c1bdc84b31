"""The one freshness rule (:mod:`sparkmv.refresh.freshness`) on real Parquet files and a real
catalog, without a SparkSession: status, the on-change trigger and the staleness metric use it."""

from __future__ import annotations

import os
from pathlib import Path

from sparkmv.catalog import ObjectKind
from sparkmv.catalog.versions import VersionEntry
from sparkmv.config import Settings
from sparkmv.names import ObjectName
from sparkmv.refresh.context import pin_all
from sparkmv.refresh.freshness import Freshness, freshness
from sparkmv.refresh.runtime import Runtime
from tests.helpers import write_partition

SCHEMA = '{"type":"struct","fields":[{"name":"k","type":"long","nullable":true,"metadata":{}}]}'


def test_changed_base_partitions_make_an_mv_stale_unless_excluded(tmp_path: Path) -> None:
    rt = Runtime(Settings.resolve(home=tmp_path / "home"))
    tables = {}
    for name in ("a", "b"):
        root = tmp_path / name
        write_partition(root, "d", "1", {"k": [1]})
        write_partition(root, "d", "2", {"k": [2]})
        tables[name] = root
    with rt.catalog.transaction() as s:
        for name, root in tables.items():
            rt.catalog.objects.insert(
                s,
                ObjectName("default", name),
                ObjectKind.EXTERNAL_TABLE,
                location=str(root),
                format="parquet",
                schema_json=SCHEMA,
                partition_columns=["d"],
            )
        mv = rt.catalog.objects.insert(s, ObjectName("default", "m"), ObjectKind.MATERIALIZED_VIEW, definition="x")
    bases = ["default.a", "default.b"]
    pinned = pin_all(rt.catalog, rt.iceberg, [ObjectName.parse(b) for b in bases])
    entries = [VersionEntry(t, path, v) for t, p in pinned.items() for path, v in p.versions().items()]
    with rt.catalog.transaction() as s:
        rt.catalog.versions.apply(s, mv.id, 1, entries, [], replace_all=True)

    assert freshness(rt.catalog, rt.iceberg, mv.id, bases) == Freshness()
    assert freshness(rt.catalog, rt.iceberg, mv.id, bases).is_fresh

    # An outside writer adds a file to a.d=2 and a new partition b.d=3.
    write_partition(tables["a"], "d", "2", {"k": [3]}, file="more.parquet")
    write_partition(tables["b"], "d", "3", {"k": [4]})
    # A partition changed when its newest file was written: pin those times down.
    for path in (tables["a"] / "d=2").iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))
    for path in (tables["b"] / "d=3").iterdir():
        os.utime(path, (1_700_000_030, 1_700_000_030))
    fresh = freshness(rt.catalog, rt.iceberg, mv.id, bases)
    assert fresh.changed == {"default.a": ["d=2"], "default.b": ["d=3"]}
    assert (fresh.is_fresh, fresh.stale_partitions, fresh.changed_tables) == (False, 2, ["default.a", "default.b"])
    assert fresh.oldest_change == 1_700_000_000.0
    assert fresh.staleness_seconds(now=1_700_000_060.0) == 60.0

    only_b = freshness(rt.catalog, rt.iceberg, mv.id, bases, excluded=["default.a"])
    assert only_b.changed == {"default.b": ["d=3"]} and only_b.stale_partitions == 1
    assert freshness(rt.catalog, rt.iceberg, mv.id, bases, excluded=bases) == Freshness()
    rt.close()
