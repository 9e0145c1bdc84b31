"""Python streaming tables under ``sparkmv pipeline run``: ``dp.create_streaming_table`` fed by
``@dp.append_flow`` and ``@dp.table`` returning ``spark.readStream...``, each over real JSON and
Parquet files; every new row appended once, the old data files kept, a run with no new file
SKIPPED, ``--full-refresh`` rebuilding without duplicates, and the sources Spark cannot
stream here refused with the flow's file:line and nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import RunResult, run_pipeline
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import states, write_project

pytestmark = [pytest.mark.spark]

EVENTS = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()

dp.create_streaming_table("events", comment="raw events")


@dp.append_flow(target="events")
def from_json() -> DataFrame:
    return spark.readStream.format("json").schema("id INT, kind STRING, amount DOUBLE").load("{src}")


@dp.materialized_view
def per_kind() -> DataFrame:
    return spark.table("events").groupBy("kind").agg(F.count("*").alias("n"), F.sum("amount").alias("total"))
"""


def write_json(directory: Path, name: str, rows: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def rows_of(client: Any, table: str, columns: tuple[str, ...] = ("id", "kind", "amount")) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in client.table(table).collect())


def data_files(client: Any, table: str) -> set[str]:
    return {t.file.file_path for t in client.runtime.iceberg.load(ObjectName("default", table)).scan().plan_files()}


def batch(start: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "kind": "ab"[i % 2], "amount": i * 1.5} for i in range(start, start + count)]


def expected(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["kind"], r["amount"]) for r in rows)


def by_name(result: RunResult, name: str) -> Any:
    return next(r for r in result.results if r.name.name == name)


def test_append_flow_appends_each_new_row_once(client: Any, tmp_path: Path) -> None:
    src = tmp_path / "incoming"
    write_json(src, "f1.json", batch(0, 5))
    spec = write_project(tmp_path / "p", {"events.py": EVENTS.format(src=src)})
    load = lambda: load_project(spec, lambda: client.spark)  # noqa: E731
    per_kind = "SELECT kind, count(*) AS n, sum(amount) AS total FROM events GROUP BY kind"

    first = run_pipeline(client, load())
    assert [r.name.name for r in first.results] == ["events", "per_kind"]
    assert states(first) == {"events": ("SUCCESS", "FULL"), "per_kind": ("SUCCESS", "FULL")}
    events = by_name(first, "events")
    assert (events.kind, events.source, events.rows) == ("streaming table", "python", 5)
    assert events.reason == "flows from_json: created: every source read from its start"
    assert rows_of(client, "events") == expected(batch(0, 5))
    assert_mv_matches(client, "per_kind", per_kind)
    files = data_files(client, "events")

    # a new file: only its rows are appended, the table's old data files stay as they were
    write_json(src, "f2.json", batch(5, 3))
    second = run_pipeline(client, load())
    assert states(second) == {"events": ("SUCCESS", "INCREMENTAL"), "per_kind": ("SUCCESS", "FULL")}
    assert by_name(second, "events").reason == "flows from_json: appended 3 rows (from_json 3)"
    assert rows_of(client, "events") == expected(batch(0, 8))
    assert files < data_files(client, "events")
    assert_mv_matches(client, "per_kind", per_kind)

    third = run_pipeline(client, load())
    assert states(third) == {"events": ("SKIPPED", "SKIP"), "per_kind": ("SKIPPED", "SKIP")}
    assert by_name(third, "events").reason == "flows from_json: no new input"
    assert by_name(third, "events").rows == 8

    forced = run_pipeline(client, load(), full_refresh={ObjectName("default", "events")})
    assert states(forced) == {"events": ("SUCCESS", "FULL"), "per_kind": ("EXCLUDED", None)}
    assert (
        by_name(forced, "events").reason == "flows from_json: full refresh requested: every source read from its start"
    )
    assert rows_of(client, "events") == expected(batch(0, 8))  # rebuilt, no duplicates
    assert not files & data_files(client, "events")
    assert len(list((tmp_path / "p" / "storage" / "_checkpoints" / "default.events").iterdir())) == 1

    # after the rebuild the new checkpoints go on from where it stopped
    write_json(src, "f3.json", batch(8, 2))
    fourth = run_pipeline(client, load())
    assert states(fourth) == {"events": ("SUCCESS", "INCREMENTAL"), "per_kind": ("SUCCESS", "FULL")}
    assert rows_of(client, "events") == expected(batch(0, 10))
    assert_mv_matches(client, "per_kind", per_kind)


TABLE = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.table(comment="orders from two feeds")
def orders() -> DataFrame:
    return spark.readStream.format("parquet").schema("id BIGINT, amount DOUBLE").load("{parquet}")


@dp.append_flow(target="orders", name="json_feed")
def more_orders() -> DataFrame:
    reader = spark.readStream.format("json").schema("amount DOUBLE, id BIGINT")
    return reader.option("mode", "{mode}").load("{json}").select("id", "amount")
"""
TOTALS = "CREATE MATERIALIZED VIEW order_totals AS SELECT count(*) AS n, sum(amount) AS total FROM orders"


def test_table_with_two_flows_and_a_failed_flow_committed_once(client: Any, tmp_path: Path) -> None:
    parquet, feed = tmp_path / "parquet", tmp_path / "json"
    parquet.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "amount": [1.0, 2.0, 3.0]}), parquet / "a.parquet")
    write_json(feed, "a.json", [{"id": 10, "amount": 10.0}])
    write_json(feed, "b.json", [{"id": 11, "amount": "not a number"}])
    root = tmp_path / "p"
    spec = write_project(
        root, {"orders.py": TABLE.format(parquet=parquet, json=feed, mode="FAILFAST"), "t.sql": TOTALS}
    )
    load = lambda: load_project(spec, lambda: client.spark)  # noqa: E731

    # the JSON flow fails in its stream: the new table is dropped, as if the run never happened
    failed = run_pipeline(client, load())
    assert states(failed) == {"orders": ("FAILED", None), "order_totals": ("NOT RUN", None)}
    assert (by_name(failed, "orders").reason or "").startswith(
        f"{root / 'transformations' / 'orders.py'}:12: flow json_feed: "
    )
    assert not client.runtime.iceberg.exists(ObjectName("default", "orders"))

    # fixed (PERMISSIVE: the bad amount is NULL): both flows committed once, in one snapshot
    (root / "transformations" / "orders.py").write_text(TABLE.format(parquet=parquet, json=feed, mode="PERMISSIVE"))
    fixed = run_pipeline(client, load())
    assert states(fixed) == {"orders": ("SUCCESS", "FULL"), "order_totals": ("SUCCESS", "FULL")}
    assert by_name(fixed, "orders").reason == "flows orders, json_feed: created: every source read from its start"
    assert rows_of(client, "orders", ("id", "amount")) == [(1, 1.0), (2, 2.0), (3, 3.0), (10, 10.0), (11, None)]
    assert_mv_matches(client, "order_totals", "SELECT count(*) AS n, sum(amount) AS total FROM orders")

    pq.write_table(pa.table({"id": pa.array([4], pa.int64()), "amount": [4.0]}), parquet / "b.parquet")
    more = run_pipeline(client, load())
    assert states(more)["orders"] == ("SUCCESS", "INCREMENTAL")
    assert by_name(more, "orders").reason == "flows orders, json_feed: appended 1 rows (orders 1, json_feed 0)"
    assert by_name(more, "order_totals").state == "SUCCESS"
    assert_mv_matches(client, "order_totals", "SELECT count(*) AS n, sum(amount) AS total FROM orders")
    assert len(rows_of(client, "orders", ("id", "amount"))) == 6

    # a run that fails after one flow staged its batch: the table is unchanged; the next run
    # commits that batch once, with the other flow's replayed one
    pq.write_table(pa.table({"id": pa.array([5], pa.int64()), "amount": [5.0]}), parquet / "c.parquet")
    write_json(feed, "c.json", [{"id": 12, "amount": "bad"}, {"id": 13, "amount": 13.0}])
    (root / "transformations" / "orders.py").write_text(TABLE.format(parquet=parquet, json=feed, mode="FAILFAST"))
    assert states(run_pipeline(client, load()))["orders"] == ("FAILED", None)
    assert len(rows_of(client, "orders", ("id", "amount"))) == 6
    (root / "transformations" / "orders.py").write_text(TABLE.format(parquet=parquet, json=feed, mode="PERMISSIVE"))
    again = run_pipeline(client, load())
    assert by_name(again, "orders").reason == "flows orders, json_feed: appended 3 rows (orders 1, json_feed 2)"
    assert rows_of(client, "orders", ("id", "amount")) == [
        *[(i, float(i)) for i in range(1, 6)],
        *[(10, 10.0), (11, None), (12, None), (13, 13.0)],
    ]
    assert states(run_pipeline(client, load()))["orders"] == ("SKIPPED", "SKIP")


BAD = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.materialized_view
def base() -> DataFrame:
    return spark.range(3)


@dp.table
def from_table() -> DataFrame:
    return spark.readStream.table("base")


@dp.table
def from_iceberg() -> DataFrame:
    return spark.readStream.format("iceberg").load("db.t")


dp.create_streaming_table("from_batch")


@dp.append_flow(target="from_batch")
def batch_flow() -> DataFrame:
    return spark.range(2)
"""


def test_sources_that_cannot_stream_fail_with_the_flows_place(client: Any, tmp_path: Path) -> None:
    spec = write_project(tmp_path / "bad", {"bad.py": BAD})
    where = tmp_path / "bad" / "transformations" / "bad.py"
    result = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(result) == {
        "base": ("SUCCESS", "FULL"),
        "from_table": ("SUCCESS", "FULL"),  # a pipeline dataset read as a stream: its rows (python_feeds)
        "from_iceberg": ("FAILED", None),
        "from_batch": ("FAILED", None),
    }
    hint = (
        'sparkmv reads streams from files (spark.readStream.format("json"|"parquet"|"csv"|"orc"|"text")'
        ".schema(...).load(dir)) and Spark's built-in sources; this Spark has no Iceberg or Delta streaming "
        "source (read a table with spark.read.table in a materialized view)"
    )
    assert sorted(r["id"] for r in client.table("from_table").collect()) == [0, 1, 2]
    iceberg = by_name(result, "from_iceberg").reason or ""
    assert iceberg.startswith(
        f"{where}:17: flow from_iceberg: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: iceberg."
    )
    assert iceberg.endswith(f"; {hint}")
    assert by_name(result, "from_batch").reason == (
        f"{where}:25: flow batch_flow: Streaming tables may only be defined by streaming relations, but the flow "
        "batch_flow attempts to write a batch relation to the streaming table from_batch "
        "(return spark.readStream...; or define a @dp.materialized_view)"
    )
    for name in ("from_iceberg", "from_batch"):  # nothing written
        assert not client.runtime.iceberg.exists(ObjectName("default", name))
        assert not (tmp_path / "bad" / "storage" / "_checkpoints" / f"default.{name}").exists()


def test_python_streaming_definitions_checked_when_loaded(tmp_path: Path) -> None:
    head = "from pyspark import pipelines as dp\n"
    cases = {
        "dp.create_streaming_table('events')\n": "2: streaming table events has no flow",
        "dp.create_sink('out', format='json')\n": "2: sink out: give its directory as option 'path'",
        "@dp.append_flow(target='nowhere')\ndef f():\n    return None\n": (
            "2: flow f writes to nowhere, which is not a streaming table of the pipeline"
        ),
    }
    for k, (code, message) in enumerate(cases.items()):
        spec = write_project(tmp_path / str(k), {"s.py": head + code})
        with pytest.raises(SparkMvError) as info:
            load_project(spec)
        assert str(info.value).startswith(f"{spec.parent / 'transformations' / 's.py'}:{message}"), info.value


def test_sql_and_python_flows_into_one_table_refused(tmp_path: Path) -> None:
    sql = "CREATE STREAMING TABLE t AS SELECT id FROM STREAM(src)"
    py = "from pyspark import pipelines as dp\n@dp.append_flow(target='t')\ndef more():\n    return None\n"
    spec = write_project(tmp_path / "mix", {"a.sql": sql, "b.py": py})
    with pytest.raises(SparkMvError) as info:
        load_project(spec)
    defs = tmp_path / "mix" / "transformations"
    assert str(info.value) == (
        f"{defs / 'b.py'}:2: streaming table t is fed by SQL ({defs / 'a.sql'}:1) and by Python flow more: "
        "sparkmv runs the flows of one streaming table in one language"
    )


BATCH_TABLE = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.table
def squares() -> DataFrame:
    return spark.range(4).selectExpr("id", "id * id AS sq")


@dp.materialized_view
def streamed() -> DataFrame:
    return spark.readStream.format("json").schema("id INT").load("{src}")
"""


def test_table_returning_a_batch_dataframe_is_a_python_mv(client: Any, tmp_path: Path) -> None:
    write_json(tmp_path / "src", "a.json", [{"id": 1}])
    spec = write_project(tmp_path / "b", {"b.py": BATCH_TABLE.format(src=tmp_path / "src")})
    first = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(first) == {"squares": ("SUCCESS", "FULL"), "streamed": ("FAILED", None)}
    assert (by_name(first, "squares").kind, by_name(first, "squares").rows) == ("materialized view", 4)
    assert rows_of(client, "squares", ("id", "sq")) == [(0, 0), (1, 1), (2, 4), (3, 9)]
    assert by_name(first, "streamed").reason == (
        "streamed: Materialized views may only be defined by a batch relation, but the flow streamed attempts to "
        "write a streaming relation to the materialized view streamed (a streaming DataFrame feeds a streaming "
        "table: @dp.table or @dp.append_flow)"
    )
    second = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(second)["squares"] == ("SKIPPED", "SKIP")
