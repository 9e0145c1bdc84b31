"""The Parquet footer types the schema check of an external Parquet table compares: Arrow's
view string type (tpchgen-cli writes it) is Spark's STRING, not a missing column."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sparkmv.refresh.context import _file_types


def test_string_view_columns_are_strings(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    table = pa.table(
        {
            "l_returnflag": pa.array(["A", "N"], pa.string_view()),
            "l_comment": pa.array(["x", None], pa.large_string()),
            "l_quantity": pa.array([1, 2], pa.int64()),
        }
    )
    pq.write_table(table, path)
    assert _file_types(str(path)) == {"l_returnflag": "string", "l_comment": "string", "l_quantity": "bigint"}
