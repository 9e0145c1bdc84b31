"""What a pipeline run will do, from metadata (``sparkmv.pipeline.pending``): whether it needs
Spark, and the bound of what it reads that picks a quickly started driver JVM; and the run's
concurrency (``spark.sql.pipelines.execution.maxConcurrentFlows``, SDP's setting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.pipeline.model import PipelineDefinitionError
from sparkmv.pipeline.pending import QUICK_START_MAX_BYTES, PendingWork, pending_work
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from tests.helpers import monthly_sales, write_partition
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import BUSY, BY_MONTH, SQL, SQL_TOP, write_project

pytestmark = [pytest.mark.spark]

TOTAL_SQL = "CREATE MATERIALIZED VIEW total AS SELECT count(*) AS n, sum(amount) AS s FROM sales"


def _bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*.parquet"))


def test_pending_work_bounds_what_a_run_reads(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 40)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"a_views.sql": SQL, "b_top.sql": SQL_TOP})
    project = load_project(spec)
    assert pending_work(client, project) == PendingWork(True)  # nothing built yet
    run_pipeline(client, project)
    assert pending_work(client, load_project(spec)) == PendingWork(False, 0)

    write_partition(sales, "m", "2024-02", {"id": [901, 902], "amount": [3.0, 5.0]}, file="part-1.parquet")
    pending = pending_work(client, load_project(spec))
    # by_month (partitioned by m) reads its changed partition only; busy_months reads
    # by_month, which has not changed yet.
    assert pending == PendingWork(True, _bytes(sales / "m=2024-02"))
    assert pending.quick_start
    assert pending_work(client, load_project(spec), full_refresh_all=True) == PendingWork(True)
    assert not PendingWork(True, QUICK_START_MAX_BYTES + 1).quick_start


def test_pending_work_counts_a_table_whole_without_partition_lineage(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 40)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"total.sql": TOTAL_SQL})
    run_pipeline(client, load_project(spec))
    write_partition(sales, "m", "2024-03", {"id": [990], "amount": [1.0]}, file="part-1.parquet")
    assert pending_work(client, load_project(spec)) == PendingWork(True, _bytes(sales))


def test_independent_datasets_refresh_concurrently_in_dependency_order(client: Any, tmp_path: Path) -> None:
    sales = monthly_sales(tmp_path / "sales", 3, 40)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"a_views.sql": SQL, "b_top.sql": SQL_TOP, "total.sql": TOTAL_SQL})
    (spec.parent / "spark-pipeline.yml").write_text(
        spec.read_text() + 'configuration:\n  spark.sql.pipelines.execution.maxConcurrentFlows: "2"\n'
    )
    for step in range(2):
        result = run_pipeline(client, load_project(spec))
        assert result.state == "COMPLETED"
        by_name = {r.name.name: r for r in result.results}
        assert set(by_name) == {"by_month", "busy_months", "total"}
        started, finished = by_name["busy_months"].started, by_name["by_month"].finished
        assert started is not None and finished is not None and started >= finished
        assert_mv_matches(client, "by_month", BY_MONTH)
        assert_mv_matches(client, "busy_months", BUSY)
        assert_mv_matches(client, "total", "SELECT count(*) AS n, sum(amount) AS s FROM sales")
        write_partition(sales, "m", "2024-01", {"id": [950 + step], "amount": [9.0]}, file=f"more-{step}.parquet")


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_concurrency_setting_is_refused_before_anything_is_written(
    client: Any, tmp_path: Path, value: str
) -> None:
    sales = monthly_sales(tmp_path / "sales", 1, 5)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "shop", {"total.sql": TOTAL_SQL})
    spec.write_text(
        spec.read_text() + f'configuration:\n  spark.sql.pipelines.execution.maxConcurrentFlows: "{value}"\n'
    )
    with pytest.raises(PipelineDefinitionError) as err:
        run_pipeline(client, load_project(spec))
    assert str(err.value) == (
        f"{spec}: configuration spark.sql.pipelines.execution.maxConcurrentFlows: "
        f"must be a positive integer, not {value!r}"
    )
    assert not client.runtime.iceberg.exists(ObjectName("default", "total"))
