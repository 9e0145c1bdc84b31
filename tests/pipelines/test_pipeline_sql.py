"""``sparkmv pipeline run`` on a SQL project (a temporary view, two MVs, one reading the other)
and a Python project, in process with the session's SparkSession; the MVs are checked
against their queries computed by DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import RunResult, run_pipeline
from tests.helpers import monthly_sales, write_partition
from tests.oracle import assert_mv_matches

pytestmark = [pytest.mark.spark]

SPEC = """name: shop
storage: {storage}
libraries:
  - glob:
      include: transformations/**
"""
SQL = """-- the SDP project of the test
CREATE TEMPORARY VIEW big_sales AS SELECT m, id, amount FROM sales WHERE amount > 1;

CREATE MATERIALIZED VIEW by_month
  PARTITIONED BY (m)
  COMMENT 'sales per month'
  TBLPROPERTIES ('refresh_mode' = 'AUTO', 'quality' = 'gold')
AS SELECT m, sum(amount) AS total, count(*) AS n FROM big_sales GROUP BY m;
"""
SQL_TOP = """CREATE OR REFRESH MATERIALIZED VIEW busy_months AS
SELECT m, total FROM by_month WHERE n >= 2
"""
BY_MONTH = "SELECT m, sum(amount) AS total, count(*) AS n FROM sales WHERE amount > 1 GROUP BY m"
BUSY = f"SELECT m, total FROM ({BY_MONTH}) AS b WHERE n >= 2"


def write_project(root: Path, files: dict[str, str]) -> Path:
    """A project under ``root``: the spec and ``transformations/<file>`` for each entry."""
    (root / "transformations").mkdir(parents=True)
    (root / "spark-pipeline.yml").write_text(SPEC.format(storage=root / "storage"))
    for name, text in files.items():
        (root / "transformations" / name).write_text(text)
    return root / "spark-pipeline.yml"


def states(result: RunResult) -> dict[str, tuple[str, str | None]]:
    return {r.name.display: (r.state, r.technique) for r in result.results}


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    return monthly_sales(tmp_path / "sales", 3, 40)


def test_sql_project_runs_skips_and_refreshes_incrementally(client: Any, sales: Path, tmp_path: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"a_views.sql": SQL, "b_top.sql": SQL_TOP})
    project = load_project(spec)
    assert [d.name.display for d in project.materialized_views] == ["by_month", "busy_months"]

    first = run_pipeline(client, project)
    assert first.state == "COMPLETED"
    assert states(first) == {"by_month": ("SUCCESS", "FULL"), "busy_months": ("SUCCESS", "FULL")}
    assert "created" in (first.results[0].reason or "")
    assert_mv_matches(client, "by_month", BY_MONTH)
    assert_mv_matches(client, "busy_months", BUSY)

    second = run_pipeline(client, load_project(spec))
    assert states(second) == {"by_month": ("SKIPPED", "SKIP"), "busy_months": ("SKIPPED", "SKIP")}

    # an outside writer appends a file to one month: only that month is recomputed
    write_partition(sales, "m", "2024-02", {"id": [900, 901, 902], "amount": [5.0, 6.0, 0.5]}, "part-1.parquet")
    third = run_pipeline(client, load_project(spec))
    by_month, busy = third.results
    assert by_month.state == "SUCCESS" and by_month.technique in ("PCT", "INCREMENTAL"), by_month
    assert busy.state == "SUCCESS", busy
    assert_mv_matches(client, "by_month", BY_MONTH)
    assert_mv_matches(client, "busy_months", BUSY)

    forced = run_pipeline(client, load_project(spec), full_refresh={ObjectName("default", "busy_months")})
    assert states(forced) == {"by_month": ("EXCLUDED", None), "busy_months": ("SUCCESS", "FULL")}


PYTHON = """from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()

@dp.temporary_view
def priced() -> DataFrame:
    return spark.table("big")

@dp.materialized_view(comment="python totals")
def py_totals() -> DataFrame:
    return spark.table("priced").groupBy("m").agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
"""
# py_busy reads the Python MV; the Python MV reads (through its temporary view) the SQL MV big:
# an edge found only when its function runs (big is refreshed first)
SQL_OVER_PY = """CREATE MATERIALIZED VIEW py_busy AS SELECT m, total FROM py_totals WHERE n >= 2;
CREATE MATERIALIZED VIEW big PARTITIONED BY (m) AS SELECT m, id, amount FROM sales WHERE amount > 1"""


def test_python_project(client: Any, sales: Path, tmp_path: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "py", {"defs.py": PYTHON, "busy.sql": SQL_OVER_PY})
    first = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert [r.name.name for r in first.results] == ["big", "py_totals", "py_busy"]
    assert states(first) == {
        "big": ("SUCCESS", "FULL"),
        "py_totals": ("SUCCESS", "FULL"),
        "py_busy": ("SUCCESS", "FULL"),
    }
    expected = sorted((r["m"], r["total"], r["n"]) for r in client.sql(BY_MONTH).collect())
    got = sorted((r["m"], r["total"], r["n"]) for r in client.table("py_totals").collect())
    assert got == expected and len(got) == 3
    assert_mv_matches(client, "py_busy", "SELECT m, total FROM py_totals WHERE n >= 2")

    second = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert {r.state for r in second.results} == {"SKIPPED"}

    write_partition(sales, "m", "2024-04", {"id": [7, 8], "amount": [3.0, 4.0]})
    third = run_pipeline(client, load_project(spec, lambda: client.spark))
    # its plan translates to SQL over big: kept as a SQL MV, AUTO choosing how to refresh it
    assert third.results[1].state == "SUCCESS" and "py_totals" in {st.name for st in client.status()}
    assert (third.results[1].reason or "").startswith(f"{third.results[1].technique}: ")
    assert third.results[1].rows == 4
    assert_mv_matches(client, "py_totals", "SELECT m, sum(amount) AS total, count(*) AS n FROM big GROUP BY m")
    assert_mv_matches(client, "py_busy", "SELECT m, total FROM py_totals WHERE n >= 2")


def test_failed_dataset_is_isolated(client: Any, sales: Path, tmp_path: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    defs = {
        "good.sql": "CREATE MATERIALIZED VIEW good AS SELECT m, count(*) AS n FROM sales GROUP BY m",
        "bad.sql": "CREATE MATERIALIZED VIEW bad AS SELECT m, no_such_column FROM sales;\n"
        "CREATE MATERIALIZED VIEW after_bad AS SELECT m FROM bad",
    }
    spec = write_project(tmp_path / "f", defs)
    result = run_pipeline(client, load_project(spec))
    assert result.state == "FAILED"
    assert states(result) == {
        "bad": ("FAILED", None),
        "after_bad": ("NOT RUN", None),
        "good": ("SUCCESS", "FULL"),
    }
    # Results come in the order the datasets finished: good and bad run concurrently.
    bad = next(r for r in result.results if r.name.name == "bad")
    assert "no_such_column" in (bad.reason or "")
    assert [s.name for s in client.status()] == ["good"]  # the failed new MV was not left behind
    assert_mv_matches(client, "good", "SELECT m, count(*) AS n FROM sales GROUP BY m")

    # the definitions fixed and one query changed: the changed MV is created again, the rest built
    (tmp_path / "f" / "transformations" / "bad.sql").write_text(
        "CREATE MATERIALIZED VIEW bad AS SELECT m, id FROM sales;\n"
        "CREATE MATERIALIZED VIEW after_bad AS SELECT m FROM bad"
    )
    (tmp_path / "f" / "transformations" / "good.sql").write_text(
        "CREATE MATERIALIZED VIEW good AS SELECT m, max(id) AS top FROM sales GROUP BY m"
    )
    fixed = run_pipeline(client, load_project(spec))
    assert fixed.state == "COMPLETED"
    assert {r.name.name: r.state for r in fixed.results} == {
        "bad": "SUCCESS",
        "after_bad": "SUCCESS",
        "good": "SUCCESS",
    }
    good = next(r for r in fixed.results if r.name.name == "good")
    assert (good.reason or "").startswith("definition changed: replaced")
    assert_mv_matches(client, "good", "SELECT m, max(id) AS top FROM sales GROUP BY m")
    assert_mv_matches(client, "after_bad", "SELECT m FROM sales")


STREAMING = """CREATE STREAMING TABLE orders_feed PARTITIONED BY (m) TBLPROPERTIES ('refresh_mode' = 'INCREMENTAL') AS
SELECT m, id, amount FROM STREAM(sales) WHERE amount > 0;

CREATE FLOW returns_flow AS INSERT INTO orders_feed BY NAME
SELECT -amount AS amount, id, m FROM STREAM(returns);

CREATE MATERIALIZED VIEW feed_totals AS SELECT m, sum(amount) AS total FROM orders_feed GROUP BY m
"""
FEED = "SELECT m, id, amount FROM sales WHERE amount > 0 UNION ALL SELECT m, id, -amount AS amount FROM returns"


def test_streaming_table_appends_the_new_rows_of_each_flow_once(client: Any, sales: Path, tmp_path: Path) -> None:
    returns = tmp_path / "returns"
    write_partition(returns, "m", "2024-01", {"id": [1, 2], "amount": [2.5, 3.0]})
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE EXTERNAL TABLE returns USING parquet LOCATION '{returns}'")
    spec = write_project(tmp_path / "st", {"feed.sql": STREAMING})

    first = run_pipeline(client, load_project(spec))
    assert states(first) == {"orders_feed": ("SUCCESS", "FULL"), "feed_totals": ("SUCCESS", "FULL")}
    assert first.results[0].kind == "streaming table"
    assert (first.results[0].reason or "").startswith("flows orders_feed, returns_flow; created")
    assert first.results[0].rows == 103 + 2  # sales rows with amount > 0 (i % 7 != 0), two returns
    assert_mv_matches(client, "orders_feed", FEED)

    # new rows in both sources: each flow appends only its new rows, nothing recomputed
    write_partition(sales, "m", "2024-02", {"id": [900, 901], "amount": [5.0, 0.0]}, "part-1.parquet")
    write_partition(returns, "m", "2024-03", {"id": [7], "amount": [1.0]})
    second = run_pipeline(client, load_project(spec))
    assert states(second)["orders_feed"] == ("SUCCESS", "INCREMENTAL")
    assert second.results[1].state == "SUCCESS"  # AUTO: FULL is cheaper at this size
    assert second.results[0].rows == 105 + 2
    assert_mv_matches(client, "orders_feed", FEED)
    assert_mv_matches(client, "feed_totals", f"SELECT m, sum(amount) AS total FROM ({FEED}) AS f GROUP BY m")

    third = run_pipeline(client, load_project(spec))
    assert states(third) == {"orders_feed": ("SKIPPED", "SKIP"), "feed_totals": ("SKIPPED", "SKIP")}

    # the spec's sparkmv.refresh puts every dataset under the scheduler (not a Spark setting)
    scheduled = spec.read_text() + "configuration:\n  sparkmv.refresh: ASYNC EVERY (INTERVAL 2 HOURS)\n"
    spec.write_text(scheduled)
    project = load_project(spec)
    assert project.spec.spark_conf == {}
    run_pipeline(client, project)
    schemes = {s.name: s.refresh_scheme for s in client.status()}
    assert schemes == {"orders_feed": "ASYNC EVERY (INTERVAL 2 HOUR)", "feed_totals": "ASYNC EVERY (INTERVAL 2 HOUR)"}


VIEW_JOIN = """CREATE TEMPORARY VIEW clean AS SELECT m, id, amount FROM sales WHERE amount > 1;
CREATE TEMPORARY VIEW everything AS SELECT * FROM clean;
CREATE MATERIALIZED VIEW priced TBLPROPERTIES ('refresh_mode' = 'INCREMENTAL') AS
SELECT c.id, c.amount, r.rate FROM everything c JOIN rates r ON c.m = r.m;
"""
PRICED = "SELECT c.id, c.amount, r.rate FROM sales c JOIN rates r ON c.m = r.m WHERE c.amount > 1"


def test_temporary_views_joined_by_an_mv_are_maintained_incrementally(client: Any, sales: Path, tmp_path: Path) -> None:
    """A temporary view of unqualified columns, and one selecting ``*``, inlined under a join:
    resolved against the base tables' schemas, the MV is maintained by the delta rules (strict
    INCREMENTAL is accepted), and later runs see the same definition (no replace)."""
    import pyarrow as pa

    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    rates = pa.schema([("m", pa.string()), ("rate", pa.float64())])
    client.runtime.iceberg.create_table(ObjectName("default", "rates"), rates, None)
    client.runtime.iceberg.load(ObjectName("default", "rates")).append(
        pa.table({"m": ["2024-01", "2024-02", "2024-03"], "rate": [1.5, 2.0, 0.5]}, schema=rates)
    )
    spec = write_project(tmp_path / "shop", {"views.sql": VIEW_JOIN})
    assert states(run_pipeline(client, load_project(spec))) == {"priced": ("SUCCESS", "FULL")}
    assert_mv_matches(client, "priced", PRICED)
    second = run_pipeline(client, load_project(spec))
    assert states(second) == {"priced": ("SKIPPED", "SKIP")}, second.results

    write_partition(sales, "m", "2024-02", {"id": [900, 901], "amount": [5.0, 0.5]}, "part-1.parquet")
    third = run_pipeline(client, load_project(spec))
    [priced] = third.results
    assert (priced.state, priced.technique) == ("SUCCESS", "INCREMENTAL"), priced
    assert "definition changed" not in (priced.reason or ""), priced
    assert_mv_matches(client, "priced", PRICED)
