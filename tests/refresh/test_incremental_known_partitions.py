"""An incremental (delta-rule) refresh of a partitioned MV whose partitions map from its
base's partitions takes the partitions to rewrite from the appended files' partition
directories, without a Spark job collecting them from the delta rows (14 -> 8 jobs
in the one-partition pipeline refresh); the MV still equals its query. When a changed base
is not a reference table, the partitions are collected from the delta as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.analysis.lineage import IDENTITY, Lineage, PartitionMapping, Transform
from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import affected as affected_module
from sparkmv.refresh.incremental.affected import delta_partitions
from sparkmv.refresh.jobs import incremental as job
from sparkmv.sources.pinned import PinnedPartition, PinnedTable
from tests.helpers import assert_mv_matches, write_partition

DATE_SCHEMA = '{"type": "struct", "fields": [{"name": "d", "type": "date", "nullable": true, "metadata": {}}]}'
MONTH = Lineage({"db.t": PartitionMapping("db.t", "d", Transform("prefix", 7))}, complete=True)


def _delta(kind: str = "parquet", **parts: list[str]) -> PinnedTable:
    return PinnedTable(
        "db.t", kind, DATE_SCHEMA, ["d"], {f"d={p}": PinnedPartition(files, "v") for p, files in parts.items()}
    )


def test_partitions_of_the_appended_files_through_the_mapping() -> None:
    delta = PinnedTable(
        "db.t",
        "parquet",
        DATE_SCHEMA,
        ["d"],
        {
            "d=1995-06-14": PinnedPartition(["a.parquet"], "v"),
            "d=1995-06-15": PinnedPartition(["b.parquet"], "v"),
            "d=1995-01-02": PinnedPartition(["c.parquet"], "v"),
            "d=1996-01-01": PinnedPartition([], "v"),  # no appended file: not touched
        },
    )
    assert delta_partitions(MONTH, {"db.t": delta, "db.other": None}, "string") == ["1995-01", "1995-06"]


@pytest.mark.parametrize(
    ("lineage", "delta"),
    [
        (Lineage(MONTH.mappings, complete=False), PinnedTable("db.t", "parquet", DATE_SCHEMA, ["d"])),
        (MONTH, PinnedTable("db.t", "signed", DATE_SCHEMA, ["d"])),  # retractions
        (MONTH, PinnedTable("db.t", "changelog", DATE_SCHEMA, ["d"])),
        (MONTH, PinnedTable("db.t", "parquet", DATE_SCHEMA, ["e"])),  # not the mapped column
        (
            Lineage({"db.t": PartitionMapping("db.t", "d", IDENTITY)}, complete=True),
            PinnedTable(
                "db.t", "parquet", DATE_SCHEMA, ["d"], {"d=__HIVE_DEFAULT_PARTITION__": PinnedPartition(["n"], "v")}
            ),
        ),
    ],
    ids=["incomplete-lineage", "signed", "changelog", "other-column", "null-partition"],
)
def test_unknown_when_the_files_do_not_name_the_mv_partitions(lineage: Lineage, delta: PinnedTable) -> None:
    assert delta_partitions(lineage, {"db.t": delta}, "string") is None


def test_unknown_when_a_changed_table_is_no_reference_table() -> None:
    other = PinnedTable("db.u", "parquet", DATE_SCHEMA, [], {"": PinnedPartition(["x"], "v")})
    assert delta_partitions(MONTH, {"db.t": None, "db.u": other}, "string") is None


def _facts(root: Path, p: str, rows: list[tuple[str, int]], file: str) -> Path:
    return write_partition(root, "p", p, {"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, file)


AGG = "SELECT p, k, sum(v) AS total, count(*) AS n FROM facts WHERE v > 2 GROUP BY p, k"
JOIN_AGG = (
    "SELECT f.p, d.label, sum(f.v) AS total, count(*) AS n FROM facts f JOIN dims d ON f.k = d.k GROUP BY f.p, d.label"
)


def _built_mv(make_client: Any, home: Path, query: str, **tables: Path) -> Any:
    """A client whose strict INCREMENTAL MV ``mv`` (``PARTITION BY p``) over the external
    Parquet ``tables`` (name -> directory) was built by its first (FULL) refresh."""
    client = make_client(home)
    for name, directory in tables.items():
        client.sql(f"CREATE EXTERNAL TABLE {name} USING parquet LOCATION '{directory}'")
    client.sql(
        "CREATE MATERIALIZED VIEW mv PARTITION BY p REFRESH DEFERRED "
        f"PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}"
    )
    assert client.refresh("mv").mode == "FULL"
    return client


class _Collects:
    """Counts the calls of the Spark-job path (``affected_partitions``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = affected_module.affected_partitions

        def spy(*args: Any) -> Any:
            self.calls += 1
            return real(*args)

        monkeypatch.setattr(job, "affected_partitions", spy)


@pytest.mark.spark
def test_appends_to_reference_partitions_need_no_collect(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "facts"
    _facts(data, "a", [("x", 5), ("y", 7), ("x", 1)], "f0.parquet")
    _facts(data, "b", [("x", 10)], "f0.parquet")
    client = _built_mv(make_client, tmp_path / "home", AGG, facts=data)
    collects = _Collects(monkeypatch)
    # One partition changed, one new partition, and one whose new rows the WHERE drops (its
    # MV partition is read and rewritten as it was).
    _facts(data, "a", [("x", 3), ("z", 4)], "f1.parquet")
    _facts(data, "c", [("y", 9)], "f0.parquet")
    _facts(data, "b", [("x", 1)], "f1.parquet")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert collects.calls == 0, "the partitions came from the appended files"
    assert_mv_matches(client, "mv", AGG)
    summary = client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().summary
    assert summary["changed-partition-count"] == "3", "a, b (unchanged rows) and c"


@pytest.mark.spark
def test_a_change_of_a_non_reference_table_collects_the_partitions(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dims = tmp_path / "dims"
    dims.mkdir()
    pq.write_table(pa.table({"k": ["x", "y"], "label": ["ex", "why"]}), dims / "d0.parquet")
    data = tmp_path / "facts"
    _facts(data, "a", [("x", 5), ("y", 7), ("z", 1)], "f0.parquet")
    _facts(data, "b", [("x", 10)], "f0.parquet")
    client = _built_mv(make_client, tmp_path / "home", JOIN_AGG, dims=dims, facts=data)
    collects = _Collects(monkeypatch)
    pq.write_table(pa.table({"k": ["z"], "label": ["zed"]}), dims / "d1.parquet")
    _facts(data, "b", [("z", 2)], "f1.parquet")
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    assert collects.calls == 1, "dims is no reference table: its delta rows may touch any partition"
    assert_mv_matches(client, "mv", JOIN_AGG)
