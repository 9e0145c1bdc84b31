"""The same SDP project run by pyspark's own ``spark-pipelines run`` and by ``sparkmv pipeline
run``, each on its own copy of the same data: the tables are equal; after an outside append and
an outside delete, sparkmv's run equals a fresh ``spark-pipelines run --full-refresh-all``.

``spark-pipelines`` runs as a subprocess against the local Spark Connect server it starts
(``--remote local[2]``), with a Derby Hive metastore in ``spark-defaults.conf`` (its default
in-memory catalog forgets tables between runs). Each of its runs starts a JVM (about a minute
for the whole sequence on 2 cores): one test, in ``make test``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest

from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

BIN = Path(sys.executable).parent
SPEC = "name: shop\nstorage: file://{storage}\nlibraries:\n  - glob:\n      include: transformations/**\n"
SQL = """CREATE TEMPORARY VIEW paid AS SELECT m, id, amount FROM sales WHERE amount > 1;

CREATE MATERIALIZED VIEW by_month PARTITIONED BY (m) AS
SELECT m, sum(amount) AS total, count(*) AS n FROM paid GROUP BY m;

CREATE MATERIALIZED VIEW big_months AS SELECT m, total FROM by_month WHERE n >= 20;

CREATE STREAMING TABLE sales_feed AS SELECT m, id, amount * 2 AS doubled FROM STREAM(sales) WHERE amount > 3;
"""
PYTHON = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
SCHEMA = "id BIGINT, kind STRING, amount DOUBLE"

dp.create_streaming_table("events")


@dp.append_flow(target="events")
def events_json() -> DataFrame:
    return spark.readStream.format("json").schema(SCHEMA).load("{src}")


@dp.table
def big_events() -> DataFrame:
    return spark.readStream.format("json").schema(SCHEMA).load("{src}").where("amount > 2").select("id", "amount")
"""
TABLES = {
    "by_month": ["m", "total", "n"],
    "big_months": ["m", "total"],
    "sales_feed": ["m", "id", "doubled"],
    "events": ["id", "kind", "amount"],
    "big_events": ["id", "amount"],
}


def _sales(root: Path) -> None:
    for k, month in enumerate(("2024-01", "2024-02", "2024-03")):
        ids = list(range(k * 100, k * 100 + 40))
        write_partition(root, "m", month, {"id": ids, "amount": [float(i % 9) for i in ids]})


def _events(directory: Path, name: str, ids: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rows = [json.dumps({"id": i, "kind": "ab"[i % 2], "amount": i * 0.5}) for i in ids]
    (directory / name).write_text("\n".join(rows) + "\n")


def _sdp(work: Path, *args: str) -> None:
    env = {**os.environ, "SPARK_CONF_DIR": str(work / "conf"), "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    out = subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=work / "sdp", env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]


def _sdp_rows(work: Path, table: str) -> list[tuple[Any, ...]]:
    data = pads.dataset(str(work / "warehouse" / table), format="parquet", partitioning="hive").to_table()
    return sorted(tuple(str(v) for v in (r[c] for c in TABLES[table])) for r in data.to_pylist())


def _mv_rows(client: Any, table: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(str(r[c]) for c in TABLES[table]) for r in client.table(table).collect())


def sdp_defaults(root: Path) -> None:
    """``root/conf/spark-defaults.conf`` for ``spark-pipelines`` (``SPARK_CONF_DIR=root/conf``):
    a Derby Hive metastore and warehouse under ``root``, so its tables outlive one run."""
    (root / "conf").mkdir()
    (root / "conf" / "spark-defaults.conf").write_text(
        "spark.sql.catalogImplementation hive\n"
        f"spark.sql.warehouse.dir {root / 'warehouse'}\n"
        f"spark.hadoop.javax.jdo.option.ConnectionURL jdbc:derby:;databaseName={root / 'metastore'};create=true\n"
        "spark.sql.shuffle.partitions 2\nspark.ui.enabled false\n"
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    sdp_defaults(tmp_path)
    for tool in ("sdp", "sparkmv"):
        _sales(tmp_path / f"{tool}-sales")
        (tmp_path / tool / "transformations").mkdir(parents=True)
        (tmp_path / tool / "spark-pipeline.yml").write_text(SPEC.format(storage=tmp_path / tool / "storage"))
        (tmp_path / tool / "transformations" / "shop.sql").write_text(SQL)
        _events(tmp_path / f"{tool}-events", "a.json", range(10))
        (tmp_path / tool / "transformations" / "events.py").write_text(
            PYTHON.replace("{src}", str(tmp_path / f"{tool}-events"))
        )
    return tmp_path


def _first_run(client: Any, work: Path) -> None:
    """Both tools build the project on their copy of the data: the tables are equal."""
    register = f"CREATE TABLE sales USING parquet LOCATION '{work / 'sdp-sales'}'; MSCK REPAIR TABLE sales"
    _sdp(work, "spark-sql", "-e", register)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{work / 'sparkmv-sales'}'")
    _sdp(work, "spark-pipelines", "run", "--remote", "local[2]")
    first = run_pipeline(client, load_project(work / "sparkmv" / "spark-pipeline.yml", lambda: client.spark))
    assert first.state == "COMPLETED"
    for table in TABLES:
        assert _mv_rows(client, table) == _sdp_rows(work, table), table


@pytest.mark.slow
def test_sparkmv_gives_the_tables_spark_pipelines_gives(client: Any, work: Path) -> None:
    _first_run(client, work)

    # an outside append to one month and an outside delete of another month's file, in both copies
    for tool in ("sdp", "sparkmv"):
        added = {"id": [500, 501], "amount": [8.0, 2.0]}
        write_partition(work / f"{tool}-sales", "m", "2024-02", added, "part-9.parquet")
        shutil.rmtree(work / f"{tool}-sales" / "m=2024-03")
        _events(work / f"{tool}-events", "b.json", range(10, 14))
    _sdp(work, "spark-sql", "-e", "MSCK REPAIR TABLE sales SYNC PARTITIONS")
    second = run_pipeline(client, load_project(work / "sparkmv" / "spark-pipeline.yml", lambda: client.spark))
    assert second.state == "COMPLETED"
    events = next(r for r in second.results if r.name.name == "events")
    assert (events.technique, events.reason) == ("INCREMENTAL", "flows events_json: appended 4 rows (events_json 4)")
    by_month = next(r for r in second.results if r.name.name == "by_month")
    assert by_month.technique in ("PCT", "INCREMENTAL"), by_month  # only what changed
    _sdp(work, "spark-pipelines", "run", "--remote", "local[2]", "--full-refresh-all")
    for table in TABLES:
        assert _mv_rows(client, table) == _sdp_rows(work, table), table
