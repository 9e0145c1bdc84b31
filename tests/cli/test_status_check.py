"""Freshness alerts: ``freshness_warn_after`` / ``freshness_error_after`` flag a stale MV in
``sparkmv status`` and ``sparkmv.materialized_views``, and ``sparkmv status --check`` exits 1
when one is past its error threshold (catalog-only: no JVM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkmv.client.client import Client
from sparkmv.errors import InvalidPropertyError
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
QUERY = "SELECT m, sum(amount) AS t FROM sales GROUP BY m"


def status(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    env.pop("SPARKMV_CATALOG_URL", None)
    cmd = [SPARKMV, "--home", str(home), "status", "--format", "csv", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_status_flags_and_check_fails_past_the_error_threshold(spark: Any, tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "amount": [1.5, 2.0]})
    home = tmp_path / "home"
    with Client(home=home, spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        client.sql(
            "CREATE MATERIALIZED VIEW watched PROPERTIES ('freshness_warn_after' = '0 SECONDS', "
            f"'freshness_error_after' = '1 WEEK') AS {QUERY}"
        )
    done = status(home, "--check")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].endswith(",fresh"), done.stdout

    write_partition(sales, "m", "2024-02", {"id": [3], "amount": [10.0]})  # stale, past 0 s
    done = status(home, "--check")
    assert done.returncode == 0, done.stderr  # WARN only
    assert "; WARN: past freshness_warn_after" in done.stdout.splitlines()[1], done.stdout

    with Client(home=home, spark=spark) as client:
        client.sql(
            "CREATE MATERIALIZED VIEW late REFRESH DEFERRED PROPERTIES ('freshness_error_after' = "
            f"'INTERVAL 0 SECONDS') AS {QUERY}"
        )
        alerts = dict(client.sql("SELECT name, freshness_alert FROM sparkmv.materialized_views").collect())
    assert alerts == {"late": "ERROR", "watched": "WARN"}
    done = status(home, "--check")
    assert done.returncode == 1
    assert done.stderr.strip() == "error: 1 materialized view(s) past freshness_error_after: late (never refreshed)"
    assert "never refreshed; ERROR: past freshness_error_after" in done.stdout
    done = status(home)  # without --check: the same flags, exit 0
    assert done.returncode == 0 and "ERROR: past freshness_error_after" in done.stdout


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            "'freshness_error_after' = 'soon'",
            "property 'freshness_error_after' must look like '<n> SECOND|MINUTE|HOUR|DAY|WEEK', not 'soon'",
        ),
        (
            "'freshness_warn_after' = '2 DAYS', 'freshness_error_after' = '1 DAY'",
            "freshness_warn_after (2 DAYS) must not exceed freshness_error_after (1 DAY)",
        ),
    ],
)
def test_bad_thresholds_are_refused_and_nothing_is_created(
    spark: Any, tmp_path: Path, props: str, message: str
) -> None:
    sales = tmp_path / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1], "amount": [1.0]})
    with Client(home=tmp_path / "home", spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        with pytest.raises(InvalidPropertyError) as info:
            client.sql(f"CREATE MATERIALIZED VIEW bad REFRESH DEFERRED PROPERTIES ({props}) AS {QUERY}")
        assert str(info.value) == message
        assert client.status() == []
