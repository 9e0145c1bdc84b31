"""``sparkmv pipeline init`` then ``run`` twice as real commands (a JVM each: left to
``make test-slow``): the skeleton's Python MV and SQL MV are built, then SKIPPED; a broken
definition fails alone with exit 1 and one ``error:`` line naming its file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.long]


def sparkmv(cwd: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "SPARKMV_SPARK_MASTER": "local[1]"}
    cmd = [sys.executable, "-m", "sparkmv.cli.main", "--home", str(home), "--conf", "spark.sql.shuffle.partitions=2"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300)


def test_init_run_twice_and_a_failure(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert sparkmv(tmp_path, home, "pipeline", "init", "demo").returncode == 0
    project = tmp_path / "demo"
    first = sparkmv(project, home, "pipeline", "run")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert "example_python_materialized_view (python)  SUCCESS  FULL  rows 10  created" in lines[1]
    assert "example_sql_materialized_view (sql)  SUCCESS  FULL  rows 5  created" in lines[2]
    assert lines[3] == "run is COMPLETED: 2 SUCCESS"

    (project / "transformations" / "broken.sql").write_text(
        "CREATE MATERIALIZED VIEW broken AS SELECT nope FROM example_python_materialized_view"
    )
    second = sparkmv(project, home, "pipeline", "run")
    assert second.returncode == 1
    assert second.stdout.splitlines()[-1] == "run is FAILED: 2 SKIPPED, 1 FAILED"
    error = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1
    assert error[0].startswith(
        f"error: pipeline demo FAILED: broken ({project / 'transformations' / 'broken.sql'}:1): [UNRESOLVED_COLUMN"
    )
