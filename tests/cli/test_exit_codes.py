"""Exit codes of refreshes: a synchronous refresh that ends FAILED or CANCELLED exits 1
with one ``error:`` line; a script stops at it and says which statement; SKIPPED exits 0.
The Python API returns the run, or raises ``RefreshFailedError`` with ``raise_on_failure``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkmv.catalog import RunState
from sparkmv.client.client import Client
from sparkmv.errors import RefreshFailedError
from tests.cli.test_bad_input_matrix import SPARKMV, Outcome, assert_one_error, run_in_process
from tests.helpers import write_partition
from tests.refresh.procs import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MONTHS = [f"2024-0{m}" for m in range(1, 7)]
STRICT_1 = "PROPERTIES ('partition_refresh_strategy' = 'STRICT', 'partition_refresh_number' = '1')"


@pytest.fixture
def env(spark: Any, tmp_path: Path) -> Iterator[tuple[Client, Path, Path]]:
    """Six monthly partitions of ``sales``; MVs ``by_month`` and ``per_id`` over them."""
    sales = tmp_path / "sales"
    for i, month in enumerate(MONTHS):
        write_partition(sales, "m", month, {"id": [i, i + 10], "amount": [1.0 + i, 2.0]})
    home = tmp_path / "home"
    client = Client(home=home, spark=spark)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(
        f"CREATE MATERIALIZED VIEW by_month PARTITION BY m {STRICT_1} AS "
        "SELECT m, sum(amount) AS total FROM sales GROUP BY m"
    )
    client.sql("CREATE MATERIALIZED VIEW per_id AS SELECT id, sum(amount) AS total FROM sales GROUP BY id")
    yield client, home, sales
    client.close()


def sparkmv(home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> Outcome:
    return run_in_process(["--home", str(home), *args], monkeypatch, capsys)


def break_schema(sales: Path) -> None:
    """An outside writer rewrites a partition with ``amount`` as text."""
    write_partition(sales, "m", MONTHS[0], {"id": [1], "amount": ["lots"]}, "part-9.parquet")


def test_skipped_exits_0_and_failed_exits_1(
    env: tuple[Client, Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    client, home, sales = env
    outcome = sparkmv(home, monkeypatch, capsys, "sql", "REFRESH MATERIALIZED VIEW by_month WITH SYNC MODE")
    assert outcome.code == 0, outcome.err
    assert "SKIPPED" in outcome.out and outcome.err == ""

    break_schema(sales)
    outcome = sparkmv(home, monkeypatch, capsys, "sql", "REFRESH MATERIALIZED VIEW by_month WITH SYNC MODE")
    run = client.runs("by_month")[0]
    assert run.state == RunState.FAILED
    assert_one_error(outcome, 1, f"refresh run {run.run_id} of 'by_month' FAILED: ")
    assert "schema of base table 'default.sales' changed" in outcome.err


def test_script_stops_at_the_failing_refresh(
    env: tuple[Client, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    client, home, sales = env
    break_schema(sales)
    script = tmp_path / "nightly.sql"
    script.write_text("SELECT 1 AS a;\n\nREFRESH MATERIALIZED VIEW per_id;\nDROP MATERIALIZED VIEW per_id;\n")
    outcome = sparkmv(home, monkeypatch, capsys, "sql", "-f", str(script), "--format", "csv")
    run = client.runs("per_id")[0]
    assert run.state == RunState.FAILED
    assert_one_error(outcome, 1, f"statement 2 (line 3) failed: refresh run {run.run_id} of 'per_id' FAILED")
    assert outcome.out.splitlines() == ["a", "1"]  # statement 1 ran, statement 3 did not
    assert [s.name for s in client.status()] == ["by_month", "per_id"]


def test_cancelled_sync_refresh_exits_1(env: tuple[Client, Path, Path]) -> None:
    """``sparkmv sql "REFRESH ..."`` in its own process, cancelled by this one after its
    first of six chunks: it exits 1 with the CANCELLED run in its error line. (A real
    process: a cancel stops the Spark jobs of the process that runs the refresh.)"""
    client, home, _ = env
    environ = {**os.environ, "SPARKMV_SPARK_MASTER": "local[1]"}
    environ.pop("SPARKMV_CATALOG_URL", None)
    cmd = [SPARKMV, "--home", str(home), "sql", "REFRESH MATERIALIZED VIEW by_month FORCE"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ) as proc:

        def first_chunk_done() -> bool:
            runs = client.runs("by_month")
            return runs[0].state == RunState.RUNNING and any(c["is_completed"] for c in client.chunks(runs[0].run_id))

        try:
            wait_for(first_chunk_done, 240, "the first chunk")
            client.cancel("by_month")
            out, err = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
    run = client.runs("by_month")[0]
    assert run.state == RunState.CANCELLED, run
    assert_one_error(Outcome(proc.returncode, out, err, False), 1, f"refresh run {run.run_id} of 'by_month' CANCELLED")


def test_python_api_returns_the_run_or_raises_on_request(env: tuple[Client, Path, Path]) -> None:
    client, _, sales = env
    assert client.refresh("by_month", raise_on_failure=True).state == RunState.SKIPPED

    def cancel(done: int, _planned: int, _rows: int) -> None:
        if done == 1:
            client.cancel("by_month")

    with pytest.raises(RefreshFailedError, match=r"^refresh run \d+ of 'by_month' CANCELLED") as info:
        client.refresh("by_month", force=True, progress=cancel, raise_on_failure=True)
    assert info.value.run.state == RunState.CANCELLED and info.value.run.chunks_done == 1

    break_schema(sales)
    run = client.refresh("per_id")  # the default: the run is returned, whatever its state
    assert run.state == RunState.FAILED
    with pytest.raises(RefreshFailedError, match="FAILED") as failed:
        client.execute("REFRESH MATERIALIZED VIEW by_month", raise_on_failure=True)
    assert failed.value.run.state == RunState.FAILED
