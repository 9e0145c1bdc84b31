"""The ``sparkmv`` command as a real subprocess: query output as table/csv/json, errors
without tracebacks (unless --debug), ``status`` and ``runs``.

Each command that touches Spark starts a JVM (~8 s), so the Spark-using commands share one
home built by a module fixture and there are only a few of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import write_partition

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
SCRIPT = """
CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}';
-- the MV is built by CREATE (REFRESH IMMEDIATE is the default)
CREATE MATERIALIZED VIEW by_month PARTITION BY m
AS SELECT m, sum(amount) AS total, count(*) AS n FROM sales GROUP BY m;
SELECT m, total, n FROM by_month ORDER BY m
"""


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``sparkmv --home HOME ARGS`` with small Spark settings."""
    env = {**os.environ, "SPARKMV_SPARK_MASTER": "local[1]"}
    env.pop("SPARKMV_CATALOG_URL", None)
    cmd = [SPARKMV, "--home", str(home), "--conf", "spark.sql.shuffle.partitions=2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A home with external table ``sales`` and MV ``by_month``, made by ``sql -f ... --format csv``."""
    root = tmp_path_factory.mktemp("cli")
    sales = root / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "amount": [1.5, 2.0]})
    write_partition(sales, "m", "2024-02", {"id": [3], "amount": [10.0]})
    script = root / "setup.sql"
    script.write_text(SCRIPT.format(sales=sales))
    result = run(root / "home", "sql", "-f", str(script), "--format", "csv")
    return root / "home", result


def test_sql_file_and_csv_output(home: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, result = home
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "created external table 'sales' partitioned by m"
    assert lines[1].startswith("created materialized view 'by_month'; run 1: SUCCESS")
    assert lines[2:] == ["m,total,n", "2024-01,3.5,2", "2024-02,10,1"]
    assert "Traceback" not in result.stderr


def test_json_and_table_output(home: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    path, _ = home
    result = run(path, "sql", "--format", "json", "SELECT m, total, n FROM by_month ORDER BY m")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [
        {"m": "2024-01", "total": 3.5, "n": 2},
        {"m": "2024-02", "total": 10.0, "n": 1},
    ]
    result = run(path, "sql", "SELECT name, state, rows FROM sparkmv.materialized_views")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "by_month" in line]
    assert len(lines) == 1
    assert [cell.strip() for cell in lines[0].strip("│┃| ").split("│")] == ["by_month", "IDLE", "2"]
    assert "name" in result.stdout and "state" in result.stdout


def test_status_and_runs(home: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    path, _ = home
    result = run(path, "status", "--format", "csv")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "name,state,rows,partitions,last refresh,duration s,freshness"
    assert lines[1].startswith("by_month,IDLE,2,2,SUCCESS,")
    assert lines[1].endswith(",fresh")
    result = run(path, "runs", "by_month", "--format", "csv")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "run,trigger,mode,state,chunks,partitions,rows,files +/-,started,duration s,where the time went,reason / error"
    )
    assert lines[1].startswith("1,MANUAL,")
    assert ",SUCCESS," in lines[1] and ",2/2," in lines[1]
    assert all(f"{phase} " in lines[1] for phase in ("plan", "pin", "compute", "commit", "catalog")), lines[1]
    assert " Spark jobs " in lines[1], lines[1]
    assert "chunk,partitions,completed,rows,files,bytes,attempts,seconds,checkpoint" in lines
    # The default format is a table.
    result = run(path, "status")
    assert result.returncode == 0, result.stderr
    assert "materialized views" in result.stdout and "by_month" in result.stdout and "fresh" in result.stdout


@pytest.mark.long  # `make test-slow`: a CLI subprocess per query; rewrite itself is tested in tests/client
def test_no_rewrite_runs_queries_as_written(home: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    """``sql --no-rewrite``: the same rows, read from the base table (nothing in
    ``sparkmv.rewrite_log``); without it the query is answered from the MV and logged."""
    path, _ = home
    query = "SELECT m, sum(amount) AS total FROM sales GROUP BY m ORDER BY m"
    logged = "SELECT mv, rewrite_class, query, rejected FROM sparkmv.rewrite_log"
    assert json.loads(run(path, "sql", "--format", "json", logged).stdout) == []
    plain = run(path, "sql", "--no-rewrite", "--format", "csv", query)
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "m,total\n2024-01,3.5\n2024-02,10\n", "")
    assert json.loads(run(path, "sql", "--format", "json", logged).stdout) == []
    rewritten = run(path, "sql", "--format", "csv", query)
    assert (rewritten.returncode, rewritten.stdout) == (0, plain.stdout)
    assert json.loads(run(path, "sql", "--format", "json", logged).stdout) == [
        {"mv": "by_month", "rewrite_class": "exact", "query": query, "rejected": None}
    ]


def test_bad_statement_prints_error_and_exits_1(tmp_path: Path) -> None:
    result = run(tmp_path / "home", "sql", "SELECT 1 +")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "error: cannot parse SQL at line 1, column 10: Required keyword: 'expression' missing for "
        "<class 'sqlglot.expressions.core.Add'> near '+'"
    )
    assert "Traceback" not in result.stderr
    result = run(tmp_path / "home", "sql", "DROP TABLE `../x`")
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "error: invalid name '`../x`': use letters, digits and _ (optionally namespace.name)",
    )
    result = run(tmp_path / "home", "runs", "nope")
    assert (result.returncode, result.stderr.strip()) == (1, "error: table or view 'nope' does not exist")


def test_debug_shows_traceback(tmp_path: Path) -> None:
    result = run(tmp_path / "home", "--debug", "sql", "SELECT 1 +")
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert "ParseError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: cannot parse SQL at line 1, column 10")
