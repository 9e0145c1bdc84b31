"""Python SDP constructs from Spark's own SDP tests and programming guide under ``sparkmv
pipeline run``: an append flow reading a materialized view and a streaming table of the
project as a stream (``spark.readStream.table``), sinks (``dp.create_sink``) in parquet,
json and delta, ``partition_cols`` / ``cluster_by`` / ``schema`` of a streaming table; each
over small generated JSON files, every new row appearing once after an append, and the
constructs sparkmv refuses named with their file:line."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest

from sparkmv.names import ObjectName
from sparkmv.pipeline.model import PipelineDefinitionError
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.pipelines.test_against_spark_pipelines import sdp_defaults
from tests.pipelines.test_pipeline_python_stream import batch, by_name, write_json
from tests.pipelines.test_pipeline_sql import states, write_project

pytestmark = [pytest.mark.spark]

DEFS = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
SCHEMA = "id INT, kind STRING, amount DOUBLE"


@dp.materialized_view
def b() -> DataFrame:
    return spark.read.format("json").schema(SCHEMA).load("{src1}")


dp.create_streaming_table("c")


@dp.append_flow(target="c")
def append_to_c() -> DataFrame:
    return spark.readStream.table("b")


@dp.table(partition_cols=["kind"], schema="id BIGINT, kind STRING, amount DOUBLE")
def s() -> DataFrame:
    return spark.readStream.format("json").schema(SCHEMA).load("{src2}")


@dp.table(cluster_by=["id"])
def d() -> DataFrame:
    return spark.readStream.table("s").where("amount > 1")


dp.create_sink("out", "parquet", {{"path": "{out}/parquet"}})
dp.create_sink("outj", "json", {{"path": "{out}/json"}})
dp.create_sink("outd", "delta", {{"path": "{out}/delta"}})


@dp.append_flow(target="out")
def to_out() -> DataFrame:
    return spark.readStream.table("s")


@dp.append_flow(target="outj")
def to_outj() -> DataFrame:
    return spark.readStream.format("json").schema(SCHEMA).load("{src1}")


@dp.append_flow(target="outd")
def to_outd() -> DataFrame:
    return spark.readStream.table("d")
"""
COLUMNS = ("id", "kind", "amount")


def rows(data: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in COLUMNS) for r in data)


def table_rows(client: Any, table: str) -> list[tuple[Any, ...]]:
    return rows(r.asDict() for r in client.table(table).collect())


def sink_rows(out: Path, fmt: str) -> list[tuple[Any, ...]]:
    if fmt == "json":
        return rows(json.loads(line) for f in glob.glob(f"{out}/json/*.json") for line in open(f))
    if fmt == "delta":
        from deltalake import DeltaTable

        return rows(DeltaTable(str(out / "delta")).to_pyarrow_table().to_pylist())
    data = pads.dataset(str(out / fmt), format=fmt, ignore_prefixes=["_", "."]).to_table()
    return rows(data.to_pylist())


def expected(data: list[dict[str, Any]], where: Any = lambda r: True) -> list[tuple[Any, ...]]:
    return rows(r for r in data if where(r))


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    src1, src2, out = tmp_path / "src1", tmp_path / "src2", tmp_path / "out"
    write_json(src1, "a.json", batch(0, 5))
    write_json(src2, "a.json", batch(0, 6))
    spec = write_project(tmp_path / "p", {"defs.py": DEFS.format(src1=src1, src2=src2, out=out)})
    return spec, src1, src2, out


def test_streams_of_datasets_sinks_and_layout_append_each_row_once(client: Any, project: Any) -> None:
    spec, src1, src2, out = project
    load = lambda: load_project(spec, lambda: client.spark)  # noqa: E731
    first = run_pipeline(client, load())
    assert first.state == "COMPLETED", [(r.name.name, r.reason) for r in first.results]
    assert table_rows(client, "b") == table_rows(client, "c") == expected(batch(0, 5))
    assert table_rows(client, "s") == expected(batch(0, 6))
    assert table_rows(client, "d") == expected(batch(0, 6), lambda r: r["amount"] > 1)
    assert sink_rows(out, "parquet") == expected(batch(0, 6))
    assert sink_rows(out, "json") == expected(batch(0, 5))
    assert sink_rows(out, "delta") == expected(batch(0, 6), lambda r: r["amount"] > 1)
    s = client.runtime.iceberg.load(ObjectName("default", "s"))
    assert client.runtime.iceberg.partition_column(s) == "kind"
    assert client.runtime.iceberg.sort_columns(client.runtime.iceberg.load(ObjectName("default", "d"))) == ["id"]
    assert str(s.schema().find_field("id").field_type) == "long"  # the declared type, not the source's INT
    assert by_name(first, "out").kind == "sink"

    # new files: every new row once; b (a view recomputed whole) gives c only its new rows
    write_json(src1, "b.json", batch(5, 3))
    write_json(src2, "b.json", batch(6, 3))
    second = run_pipeline(client, load())
    assert second.state == "COMPLETED", [(r.name.name, r.reason) for r in second.results]
    assert table_rows(client, "c") == expected(batch(0, 8))
    assert by_name(second, "c").reason == "flows append_to_c: appended 3 rows (append_to_c 3)"
    assert table_rows(client, "s") == expected(batch(0, 9))
    assert table_rows(client, "d") == expected(batch(0, 9), lambda r: r["amount"] > 1)
    assert sink_rows(out, "parquet") == expected(batch(0, 9))
    assert sink_rows(out, "json") == expected(batch(0, 8))
    assert sink_rows(out, "delta") == expected(batch(0, 9), lambda r: r["amount"] > 1)
    assert by_name(second, "out").reason.startswith("flows to_out: wrote 3 rows to ")

    third = run_pipeline(client, load())
    assert {n: st for n, st in states(third).items() if n in ("c", "out", "outj", "outd")} == {
        "c": ("SKIPPED", "SKIP"),
        "out": ("SKIPPED", "SKIP"),
        "outj": ("SKIPPED", "SKIP"),
        "outd": ("SKIPPED", "SKIP"),
    }
    assert sink_rows(out, "parquet") == expected(batch(0, 9))

    # a full refresh of c reads b from its start: no duplicate
    run_pipeline(client, load(), full_refresh={ObjectName("default", "c")})
    assert table_rows(client, "c") == expected(batch(0, 8))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '@dp.table(format="parquet")\ndef t():\n    return spark.readStream.format("rate").load()\n',
            "3: format 'parquet' is not supported by sparkmv pipeline: it keeps every table as an Iceberg table",
        ),
        (
            'dp.create_sink("k", "kafka", {"topic": "x"})\n',
            "3: sink k: format 'kafka' is not supported by sparkmv pipeline (sinks write parquet, json, csv, orc, "
            "delta files)",
        ),
        ('dp.create_sink("k", "json")\n', "3: sink k: give its directory as option 'path'"),
        (
            'dp.create_streaming_table("t", partition_cols=["a"], cluster_by=["b"])\n',
            "3: SPECIFY_CLUSTER_BY_WITH_PARTITIONED_BY_IS_NOT_ALLOWED",
        ),
        (
            '@dp.append_flow(target="t", once=True)\ndef f():\n    return spark.read.table("x")\n',
            "3: TypeError: append_flow() got an unexpected keyword argument 'once'",
        ),
        ('dp.create_streaming_table("t", schema="a INT,, b")\n', "3: schema 'a INT,, b': "),
    ],
)
def test_refused_constructs_name_file_and_line(client: Any, tmp_path: Path, text: str, message: str) -> None:
    head = "from pyspark import pipelines as dp\nspark = None\n"
    spec = write_project(tmp_path / "p", {"defs.py": head + text})
    with pytest.raises(PipelineDefinitionError) as err:
        load_project(spec, lambda: client.spark)
    assert str(err.value).startswith(f"{tmp_path / 'p' / 'transformations' / 'defs.py'}:{message}"), str(err.value)


SDP_TABLES = ("c", "s", "d")


@pytest.mark.long
def test_spark_pipelines_gives_the_same_tables_and_sinks(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spark-pipelines run`` on its own copy of the project and data: the same tables and
    sink contents after the first run, and after new files the streams of files and of
    streaming tables are the same (``c``, fed by a view recomputed whole, differs by design:
    spark-pipelines appends the view's whole new contents again, sparkmv its new rows only)."""
    from tests.pipelines.test_against_spark_pipelines import _sdp

    monkeypatch.setenv("SPARK_TESTING", "1")  # its Connect server on a free port, not 15002

    defs = DEFS.replace("BIGINT", "INT").replace('dp.create_sink("outd", "delta", {{"path": "{out}/delta"}})\n', "")
    defs = defs[: defs.index('\n\n@dp.append_flow(target="outd")')] + "\n"
    sdp_defaults(tmp_path)
    dirs = {}
    for tool in ("sdp", "sparkmv"):
        src1, src2, out = tmp_path / f"{tool}-src1", tmp_path / f"{tool}-src2", tmp_path / f"{tool}-out"
        write_json(src1, "a.json", batch(0, 5))
        write_json(src2, "a.json", batch(0, 6))
        spec_file = write_project(tmp_path / tool, {"defs.py": defs.format(src1=src1, src2=src2, out=out)})
        spec_file.write_text(spec_file.read_text().replace("storage: /", "storage: file:///"))  # SDP wants a URI
        dirs[tool] = (src1, src2, out)
    spec = tmp_path / "sparkmv" / "spark-pipeline.yml"

    def sdp_rows(table: str) -> list[tuple[Any, ...]]:
        data = pads.dataset(str(tmp_path / "warehouse" / table), format="parquet", partitioning="hive")
        return rows(data.to_table().to_pylist())

    def compare(tables: tuple[str, ...]) -> None:
        for table in tables:
            assert table_rows(client, table) == sdp_rows(table), table
        for fmt in ("parquet", "json"):
            assert sink_rows(dirs["sparkmv"][2], fmt) == sink_rows(dirs["sdp"][2], fmt), fmt

    _sdp(tmp_path, "spark-pipelines", "run", "--remote", "local[2]")
    assert run_pipeline(client, load_project(spec, lambda: client.spark)).state == "COMPLETED"
    compare(SDP_TABLES)

    for tool in ("sdp", "sparkmv"):
        write_json(dirs[tool][0], "b.json", batch(5, 3))
        write_json(dirs[tool][1], "b.json", batch(6, 3))
    _sdp(tmp_path, "spark-pipelines", "run", "--remote", "local[2]")
    assert run_pipeline(client, load_project(spec, lambda: client.spark)).state == "COMPLETED"
    compare(("s", "d"))
    assert table_rows(client, "c") == expected(batch(0, 8))
    assert sdp_rows("c") == sorted(expected(batch(0, 5)) + expected(batch(0, 8)))  # the difference, as found
