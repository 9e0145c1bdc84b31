"""AUTO CDC flows under ``sparkmv pipeline run``: a JSON change feed (inserts, updates,
deletes, late and out-of-order rows) applied as SCD type 1 and 2, from Python
(``dp.create_auto_cdc_flow``) and SQL (``CREATE FLOW ... AS AUTO CDC INTO``), over three runs
with a feed file appended before each; the tables equal the rows worked out by hand from
Spark's rules (:mod:`sparkmv.pipeline.auto_cdc`), each run touches only the new rows, and bad
definitions are refused with Spark's message and nothing written.

``spark-pipelines run`` itself cannot be the oracle here: Spark 4.3 runs AUTO CDC only into a
table whose connector supports MERGE (``AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE`` for its default
Parquet tables), and no such connector ships with pyspark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import RunResult, run_pipeline
from tests.pipelines.test_pipeline_sql import write_project

pytestmark = [pytest.mark.spark]
NEEDS_PYTHON_API = pytest.mark.skipif(
    not hasattr(__import__("pyspark.pipelines").pipelines, "create_auto_cdc_flow"),
    reason="dp.create_auto_cdc_flow is pyspark 4.3's (the SQL form runs on 4.1 too)",
)

SCHEMA = "id BIGINT, name STRING, city STRING, op STRING, seq BIGINT"
CHANGES = f'''from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.temporary_view
def changes() -> DataFrame:
    return spark.readStream.format("json").schema("{SCHEMA}").load("{{src}}")
'''
PYTHON = """
dp.create_streaming_table("people")
dp.create_auto_cdc_flow(
    target="people", source="changes", keys=["id"], sequence_by="seq",
    apply_as_deletes="op = 'D'", except_column_list=["op"], stored_as_scd_type=1,
)
dp.create_streaming_table("people_history")
dp.create_auto_cdc_flow(
    target="people_history", source="changes", keys=["id"], sequence_by="seq",
    apply_as_deletes="op = 'D'", except_column_list=["op", "seq"], stored_as_scd_type=2,
)
dp.create_streaming_table("people_moves")
dp.create_auto_cdc_flow(
    target="people_moves", source="changes", keys=["id"], sequence_by="seq", apply_as_deletes="op = 'D'",
    column_list=["id", "name", "city"], stored_as_scd_type="2", track_history_column_list=["city"],
)
"""
SQL = """CREATE STREAMING TABLE people;
CREATE FLOW people_cdc AS AUTO CDC INTO people FROM STREAM(changes) KEYS (id)
  APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (op) STORED AS SCD TYPE 1;

CREATE STREAMING TABLE people_history FLOW AUTO CDC FROM STREAM(changes) KEYS (id)
  APPLY AS DELETE WHEN op = 'D' SEQUENCE BY seq COLUMNS * EXCEPT (op, seq) STORED AS SCD TYPE 2;

CREATE OR REFRESH STREAMING TABLE people_moves;
CREATE FLOW moves AS AUTO CDC INTO people_moves FROM STREAM changes KEYS (id)
  SEQUENCE BY seq APPLY AS DELETE WHEN op = 'D' COLUMNS (id, name, city) STORED AS SCD TYPE 2
  TRACK HISTORY ON (city);
"""
FEED = [
    [
        (1, "a", "x", "U", 1),
        (2, "b", "y", "U", 1),
        (1, "a2", "x", "U", 3),
        (3, "c", "z", "U", 2),
        (4, "d", "w", "U", 1),
    ],
    # a delete, a late update of key 1 (seq 2 < 3), an update, a delete of a key never seen
    [(2, "b", "y", "D", 5), (1, "a1", "x", "U", 2), (3, "c", "z2", "U", 4), (5, "e", "v", "D", 3)],
    # late rows under the deletes of keys 2 and 5, an update, key 2 inserted again
    [(2, "b-late", "y", "U", 4), (5, "e-late", "v", "U", 2), (4, "d", "w2", "U", 6), (2, "b2", "y", "U", 7)],
]
# SCD1: per key the greatest sequence wins; a delete removes the key and keeps its late rows out
PEOPLE = [
    [(1, "a2", "x", 3), (2, "b", "y", 1), (3, "c", "z", 2), (4, "d", "w", 1)],
    [(1, "a2", "x", 3), (3, "c", "z2", 4), (4, "d", "w", 1)],
    [(1, "a2", "x", 3), (2, "b2", "y", 7), (3, "c", "z2", 4), (4, "d", "w2", 6)],
]
# SCD2 tracking name and city: one row per change, late rows placed by their sequence
HISTORY = [
    [
        (1, "a", "x", 1, 3),
        (1, "a2", "x", 3, None),
        (2, "b", "y", 1, None),
        (3, "c", "z", 2, None),
        (4, "d", "w", 1, None),
    ],
    [
        (1, "a", "x", 1, 2),
        (1, "a1", "x", 2, 3),
        (1, "a2", "x", 3, None),
        (2, "b", "y", 1, 5),
        (3, "c", "z", 2, 4),
        (3, "c", "z2", 4, None),
        (4, "d", "w", 1, None),
    ],
    [
        (1, "a", "x", 1, 2),
        (1, "a1", "x", 2, 3),
        (1, "a2", "x", 3, None),
        (2, "b", "y", 1, 4),
        (2, "b-late", "y", 4, 5),
        (2, "b2", "y", 7, None),
        (3, "c", "z", 2, 4),
        (3, "c", "z2", 4, None),
        (4, "d", "w", 1, 6),
        (4, "d", "w2", 6, None),
        (5, "e-late", "v", 2, 3),
    ],
]
# SCD2 tracking city only: a name change updates the current row in place (its latest values)
MOVES = [
    [(1, "a2", "x", 1, None), (2, "b", "y", 1, None), (3, "c", "z", 2, None), (4, "d", "w", 1, None)],
    [
        (1, "a2", "x", 1, None),
        (2, "b", "y", 1, 5),
        (3, "c", "z", 2, 4),
        (3, "c", "z2", 4, None),
        (4, "d", "w", 1, None),
    ],
    [
        (1, "a2", "x", 1, None),
        (2, "b-late", "y", 1, 5),
        (2, "b2", "y", 7, None),
        (3, "c", "z", 2, 4),
        (3, "c", "z2", 4, None),
        (4, "d", "w", 1, 6),
        (4, "d", "w2", 6, None),
        (5, "e-late", "v", 2, 3),
    ],
]


def write_feed(directory: Path, number: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    keys = ("id", "name", "city", "op", "seq")
    text = "".join(json.dumps(dict(zip(keys, row, strict=True))) + "\n" for row in FEED[number])
    (directory / f"part-{number}.json").write_text(text)


def rows(client: Any, table: str, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in columns) for r in client.table(table).collect()), key=repr)


def expect(data: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(data, key=repr)


def project_files(src: Path, language: str) -> dict[str, str]:
    changes = CHANGES.replace("{src}", str(src))
    if language == "python":
        return {"cdc.py": changes + PYTHON}
    return {"changes.py": changes, "cdc.sql": SQL}


def by_name(result: RunResult, name: str) -> Any:
    return next(r for r in result.results if r.name.name == name)


@pytest.mark.parametrize(
    "language",
    [
        pytest.param(
            "python",
            marks=[NEEDS_PYTHON_API, pytest.mark.long],  # the SQL form runs the same engine in make test
        ),
        "sql",
    ],
)
def test_auto_cdc_scd1_and_scd2_over_three_runs(client: Any, tmp_path: Path, language: str) -> None:
    src = tmp_path / "feed"
    spec = write_project(tmp_path / "cdc", project_files(src, language))
    history = ("id", "name", "city", "__START_AT", "__END_AT")
    for number in range(3):
        write_feed(src, number)
        result = run_pipeline(client, load_project(spec, lambda: client.spark))
        assert result.state == "COMPLETED", [(r.name.name, r.reason) for r in result.results]
        assert rows(client, "people", ("id", "name", "city", "seq")) == expect(PEOPLE[number]), number
        assert rows(client, "people_history", history) == expect(HISTORY[number]), number
        assert rows(client, "people_moves", history) == expect(MOVES[number]), number
        assert by_name(result, "people").technique == ("FULL" if number == 0 else "INCREMENTAL")
    assert client.table("people").columns == ["id", "name", "city", "seq", "__spark_autocdc_metadata"]
    assert client.table("people_history").columns == [
        "id",
        "name",
        "city",
        "__START_AT",
        "__END_AT",
        "__spark_autocdc_metadata",
    ]
    meta = {r["id"]: r["__spark_autocdc_metadata"].asDict() for r in client.table("people").collect()}
    assert meta[2] == {"deleteSequence": None, "upsertSequence": 7}
    again = run_pipeline(client, load_project(spec, lambda: client.spark))  # no new change row
    assert {r.name.name: r.state for r in again.results if r.kind == "streaming table"} == {
        "people": "SKIPPED",
        "people_history": "SKIPPED",
        "people_moves": "SKIPPED",
    }


@NEEDS_PYTHON_API
def test_bad_auto_cdc_definitions_are_refused_with_sparks_message(client: Any, tmp_path: Path) -> None:
    from sparkmv.pipeline.model import PipelineDefinitionError

    scd1_history = (
        "CREATE STREAMING TABLE t FLOW AUTO CDC FROM STREAM(changes) KEYS (id) SEQUENCE BY seq TRACK HISTORY ON (city);"
    )
    spec = write_project(tmp_path / "a", {"t.sql": scd1_history})
    with pytest.raises(PipelineDefinitionError) as err:
        load_project(spec, lambda: client.spark)
    assert str(err.value) == (
        f"{tmp_path / 'a' / 'transformations' / 't.sql'}: flow t: AutoCDC flow specifies `track_history_column_list` "
        "or `track_history_except_column_list` but is not stored as SCD Type 2; history-tracking columns are only "
        "supported for SCD Type 2 target tables. (statement 1, line 1)"
    )
    both = PYTHON.replace(
        'except_column_list=["op"], stored_as_scd_type=1', 'column_list=["id"], except_column_list=["op"]'
    )
    spec = write_project(tmp_path / "b", {"cdc.py": CHANGES.replace("{src}", str(tmp_path)) + both})
    with pytest.raises(PipelineDefinitionError) as err:
        load_project(spec, lambda: client.spark)
    assert str(err.value) == (
        f"{tmp_path / 'b' / 'transformations' / 'cdc.py'}: PySparkValueError: [CANNOT_SET_TOGETHER] column_list and "
        "except_column_list should not be set together."
    )


@NEEDS_PYTHON_API
def test_unknown_key_column_fails_the_flow_and_writes_nothing(client: Any, tmp_path: Path) -> None:
    src = tmp_path / "feed"
    write_feed(src, 0)
    bad = CHANGES.replace("{src}", str(src)) + PYTHON.replace('keys=["id"]', 'keys=["ident"]', 1)
    spec = write_project(tmp_path / "cdc", {"cdc.py": bad})
    result = run_pipeline(client, load_project(spec, lambda: client.spark))
    people = by_name(result, "people")
    assert people.state == "FAILED"
    assert people.reason == (
        f"{tmp_path / 'cdc' / 'transformations' / 'cdc.py'}:12: flow people: Using case-insensitive column name "
        "comparison, the AutoCDC key column `ident` is not present in the flow's selected source schema. AutoCDC "
        "requires every key column to be present in the source change-data feed and retained by any configured "
        "column selection."
    )
    assert not client.runtime.iceberg.exists(ObjectName("default", "people"))
    assert by_name(result, "people_history").state == "SUCCESS"
