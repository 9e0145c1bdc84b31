"""PinnedTable's JSON form (stored in a run's plan and in consumed positions)."""

from __future__ import annotations

import json
from dataclasses import asdict

from sparkmv.sources.pinned import PinnedPartition, PinnedTable


def test_to_json_is_asdict_and_round_trips() -> None:
    stats = [[10, 1_700_000_000_000_000_000]]
    table = PinnedTable(
        "lake.db.events",
        "iceberg",
        '{"type": "struct", "fields": []}',
        ["ts"],
        {
            "ts=2024-01-05 00:00:00": PinnedPartition(["s3://b/f1.parquet"], "42", 1.5, 10, 3, stats, 1),
            "ts=2024-01-06 00:00:00": PinnedPartition(["/w/a.parquet", "/w/b.parquet"], "43"),
        },
        snapshot_id=43,
        partition_transforms=["day"],
        catalog_properties={"uri": "env:LAKE_URI"},
    )
    data = table.to_json()
    assert data == asdict(table)
    assert PinnedTable.from_json(json.loads(json.dumps(data))) == table
    # A copy: changing the JSON form changes nothing pinned.
    data["partitions"]["ts=2024-01-05 00:00:00"]["file_stats"][0][0] = 99
    data["catalog_properties"]["uri"] = "x"
    assert stats == [[10, 1_700_000_000_000_000_000]] and table.catalog_properties == {"uri": "env:LAKE_URI"}
