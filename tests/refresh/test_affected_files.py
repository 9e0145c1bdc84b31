"""An INCREMENTAL refresh of an unpartitioned aggregate MV rewrites only the data files that
may hold a touched group key: the MV's files are clustered by the key (its Iceberg sort
order), each file's key range comes from its column statistics, and the publish replaces
exactly the chosen files. The file target is made tiny so a few hundred rows are several
files; contents are compared with DuckDB recomputing the query."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.names import ObjectName
from sparkmv.storage import files as staged_files
from sparkmv.storage.file_stats import FileRange, column_ranges
from tests.helpers import assert_mv_matches

pytestmark = [pytest.mark.spark]

QUERY = "SELECT k, sum(v) AS total, count(*) AS n FROM facts GROUP BY k"


def _write(root: Path, name: str, keys: list[int | None]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    rows = {"k": pa.array(keys, pa.int64()), "v": pa.array(range(len(keys)), pa.int64())}
    pq.write_table(pa.table(rows), root / name)


def _ranges(client: Any) -> list[FileRange]:
    table = client.runtime.iceberg.load(ObjectName.parse("mv"))
    ranges = column_ranges(table, table.current_snapshot().snapshot_id, "k")
    return sorted(ranges, key=lambda r: (r.lower is None, r.lower))


def _outcome(client: Any, run_id: int) -> dict[str, Any]:
    with client.runtime.catalog.read() as s:
        [chunk] = client.runtime.catalog.runs.chunks(s, run_id)
    return dict(chunk.outcome or {})


def test_an_incremental_refresh_rewrites_only_the_files_holding_touched_keys(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(staged_files, "TARGET_FILE_BYTES", 4096)  # a few hundred rows: several files
    data = tmp_path / "facts"
    _write(data, "f0.parquet", [None, *range(400), *range(0, 400, 3)])
    client = make_client(tmp_path / "home")
    client.sql(f"CREATE EXTERNAL TABLE facts USING parquet LOCATION '{data}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY}")
    assert client.refresh("mv").mode == "FULL"
    before = _ranges(client)
    assert len(before) >= 3, before
    # Clustered by k: consecutive, disjoint ranges, the NULL key in the first file only.
    assert [r.nulls for r in before] == [True] + [False] * (len(before) - 1)
    assert all(a.upper < b.lower for a, b in itertools.pairwise(before)), before
    assert before[0].lower == 0 and before[-1].upper == 399

    # Keys 250 and 251 are in one file; 1000 is new (in no file's range).
    _write(data, "f1.parquet", [250, 251, 251, 1000])
    run = client.refresh("mv")
    assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), run
    [hit] = [r for r in before if r.lower <= 250 <= r.upper]
    assert _outcome(client, run.run_id) == {"replace_files": [hit.path]}
    after = _ranges(client)
    kept = {r.path for r in before} - {hit.path}
    assert kept <= {r.path for r in after}, "every file without a touched key is kept as it is"
    [new] = [r for r in after if r.path not in kept]
    assert (new.lower, new.upper, new.record_count) == (hit.lower, 1000, hit.record_count + 1)
    table = client.runtime.iceberg.load(ObjectName.parse("mv"))
    summary = table.current_snapshot().summary
    assert (summary["deleted-data-files"], summary["added-data-files"]) == ("1", "1")
    assert_mv_matches(client, "mv", QUERY)
    reported = client.sql("SELECT run_id, files_written, files_replaced FROM sparkmv.task_runs").collect()
    assert sorted(tuple(r) for r in reported) == [(1, len(before), 0), (run.run_id, 1, 1)]

    # A NULL key touches the file holding NULLs; a key below every range touches none.
    _write(data, "f2.parquet", [None, -5])
    run = client.refresh("mv")
    assert run.mode == "INCREMENTAL", run
    [null_file] = [r for r in after if r.nulls]
    assert _outcome(client, run.run_id) == {"replace_files": [null_file.path]}
    assert {r.path for r in after if r is not null_file} <= {r.path for r in _ranges(client)}
    assert_mv_matches(client, "mv", QUERY)
