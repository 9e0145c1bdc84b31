"""A SQL MV whose query changes between two ``sparkmv pipeline run``s is replaced atomically:
its new definition is built hidden while the old MV stays readable, then swapped in; a new
definition whose build fails leaves the old MV as it was (rows and definition), the run
FAILED (exit 1), and nothing hidden behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sparkmv.refresh.run_now
from sparkmv.names import ObjectName, is_replacement
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.run import run_pipeline
from sparkmv.refresh.vacuum import drop_retired
from tests.helpers import monthly_sales
from tests.oracle import assert_mv_matches
from tests.pipelines.test_pipeline_sql import states, write_project

pytestmark = [pytest.mark.spark]

OLD = "SELECT m, count(*) AS n FROM sales GROUP BY m"
NEW = "SELECT m, max(id) AS top, count(*) AS n FROM sales GROUP BY m"
# fails while it runs (an ANSI cast of text that is no number), not while it is analysed
FAILING = "SELECT m, CAST(concat('id ', id) AS INT) AS top, count(*) AS n FROM sales GROUP BY m, id"
READER = "CREATE MATERIALIZED VIEW busy AS SELECT m, n FROM counts WHERE n > 1"


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    return monthly_sales(tmp_path / "sales", 2, 5, lambda i: 1.0)


def _define(spec: Path, query: str) -> None:
    (spec.parent / "transformations" / "counts.sql").write_text(f"CREATE MATERIALIZED VIEW counts AS {query}")


def _rows(client: Any, name: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in client.table(name).collect())


def _definition(client: Any, name: str) -> str | None:
    with client.runtime.catalog.read() as s:
        return client.runtime.catalog.objects.get(s, ObjectName.parse(name)).definition


def _hidden(client: Any) -> list[str]:
    rt = client.runtime
    with rt.catalog.read() as s:
        rows = [r.name for r in rt.catalog.objects.list(s, hidden=True) if is_replacement(r.name)]
    return rows + [t.name for t in rt.iceberg.list_tables() if is_replacement(t.name)]


def test_changed_query_is_swapped_in_and_a_failing_one_leaves_the_mv(
    client: Any, sales: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "p", {"counts.sql": "", "reader.sql": READER})
    _define(spec, OLD)
    first = run_pipeline(client, load_project(spec))
    assert states(first) == {"counts": ("SUCCESS", "FULL"), "busy": ("SUCCESS", "FULL")}
    old_rows, old_definition = _rows(client, "counts"), _definition(client, "counts")
    assert old_rows == sorted(tuple(r) for r in client.sql(OLD).collect())

    # the build of the new definition ends before the swap: the old MV is readable until then
    build = sparkmv.refresh.run_now.refresh_mv
    seen: list[Any] = []

    def watched_build(rt: Any, name: ObjectName, *args: Any) -> Any:
        hidden = is_replacement(name.name)
        if hidden:
            seen.append((_rows(client, "counts"), _definition(client, "counts"), _hidden(client)))
        run = build(rt, name, *args)
        if hidden:
            seen.append((_rows(client, "counts"), _definition(client, "counts"), _hidden(client)))
        return run

    monkeypatch.setattr(sparkmv.refresh.run_now, "refresh_mv", watched_build)
    _define(spec, NEW)
    second = run_pipeline(client, load_project(spec))
    assert second.state == "COMPLETED"
    assert states(second) == {"counts": ("SUCCESS", "FULL"), "busy": ("SUCCESS", "FULL")}
    assert (second.results[0].reason or "").startswith("definition changed: replaced; ")
    assert second.results[0].rows == 2
    assert len(seen) == 2 and all(rows == old_rows and d == old_definition and len(h) == 2 for rows, d, h in seen)
    assert _rows(client, "counts") == sorted(tuple(r) for r in client.sql(NEW).collect())
    assert_mv_matches(client, "counts", NEW)
    assert_mv_matches(client, "busy", "SELECT m, n FROM counts WHERE n > 1")
    assert [m.name for m in client.status()] == ["busy", "counts"] and _hidden(client) == []
    monkeypatch.undo()

    # a new definition that fails while it is built: the MV as it was, the run FAILED
    replaced_rows, replaced_definition = _rows(client, "counts"), _definition(client, "counts")
    assert replaced_definition != old_definition
    _define(spec, FAILING)
    third = run_pipeline(client, load_project(spec))
    assert third.state == "FAILED"
    assert states(third) == {"counts": ("FAILED", "FULL"), "busy": ("NOT RUN", None)}
    reason = third.results[0].reason or ""
    assert reason.startswith("definition changed: not replaced, the MV is left as it was; ")
    assert "CAST_INVALID_INPUT" in reason
    assert _rows(client, "counts") == replaced_rows and _definition(client, "counts") == replaced_definition
    assert _hidden(client) == [] and [m.name for m in client.status()] == ["busy", "counts"]
    assert client.runs("counts")[0].run_id == third.results[0].run_id  # the failed build, in its history
    assert client.refresh("counts").state == "SKIPPED"  # still fresh: nothing of it changed


@pytest.mark.slow
def test_failing_replacement_exits_1_from_the_command(make_client: Any, sales: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    client = make_client(home=home)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "p", {"counts.sql": ""})
    _define(spec, OLD)
    assert run_pipeline(client, load_project(spec)).state == "COMPLETED"
    before, definition = _rows(client, "counts"), _definition(client, "counts")

    _define(spec, FAILING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "SPARKMV_SPARK_MASTER": "local[1]"}
    cmd = [sys.executable, "-m", "sparkmv.cli.main", "--home", str(home), "pipeline", "run"]
    done = subprocess.run(cmd, cwd=spec.parent, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith(
        f"error: pipeline shop FAILED: counts ({spec.parent / 'transformations' / 'counts.sql'}:1): "
        "definition changed: not replaced, the MV is left as it was; "
    )
    assert _rows(client, "counts") == before and _definition(client, "counts") == definition
    assert _hidden(client) == []


# The LIMIT (above every row) keeps the plan from translating to SQL, so these tests exercise
# the plain-table kind of Python MV (a translatable plan is kept as a SQL MV).
PY_OLD = """from pyspark import pipelines as dp
from pyspark.sql import SparkSession, functions as F

@dp.materialized_view
def py_counts():
    return SparkSession.active().table("sales").groupBy("m").agg(F.count("*").alias("n")).limit(1000000)
"""
PY_NEW = PY_OLD.replace('F.count("*").alias("n")', 'F.max("id").alias("top"), F.count("*").alias("n")')
PY_READER = "CREATE MATERIALIZED VIEW py_reader AS SELECT m, n FROM py_counts WHERE n > 1"


def test_python_mv_whose_columns_change_is_swapped_in(
    client: Any, sales: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sparkmv.pipeline.python_mv as python_mv

    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "py", {"counts.py": PY_OLD, "reader.sql": PY_READER})
    first = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(first) == {"py_counts": ("SUCCESS", "FULL"), "py_reader": ("SUCCESS", "FULL")}
    old_rows = _rows(client, "py_counts")
    old_location = client.runtime.iceberg.load(ObjectName.parse("py_counts")).location()
    assert old_rows == sorted(tuple(r) for r in client.sql("SELECT m, count(*) FROM sales GROUP BY m").collect())

    # while the new columns are written, readers still see the old table, whole
    write = python_mv._write
    seen: list[Any] = []

    def watched_write(df: Any, directory: str, *rest: Any) -> list[str]:
        seen.append((client.table("py_counts").columns, _rows(client, "py_counts"), _hidden(client)))
        return write(df, directory, *rest)

    monkeypatch.setattr(python_mv, "_write", watched_write)
    (spec.parent / "transformations" / "counts.py").write_text(PY_NEW)
    second = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(second) == {"py_counts": ("SUCCESS", "FULL"), "py_reader": ("SUCCESS", "FULL")}
    assert second.results[0].reason == "its columns changed: table replaced atomically"
    assert len(seen) == 1 and seen[0][:2] == (["m", "n"], old_rows) and len(seen[0][2]) == 1
    assert client.table("py_counts").columns == ["m", "top", "n"]
    expected = "SELECT m, max(id) AS top, count(*) AS n FROM sales GROUP BY m"
    assert _rows(client, "py_counts") == sorted(tuple(r) for r in client.sql(expected).collect())
    assert_mv_matches(client, "py_reader", "SELECT m, n FROM py_counts WHERE n > 1")
    assert _hidden(client) == []
    # the old table is kept for its readers until vacuum (24 hours; here: retired 0 hours)
    old_dir = Path(old_location.removeprefix("file://"))
    assert old_dir.is_dir()
    (dropped,) = drop_retired(client.runtime, lambda _owner: 0)
    assert dropped.name.startswith("__smv_retired_py_counts_")
    assert not old_dir.exists()
    monkeypatch.undo()
    third = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert {r.state for r in third.results} == {"SKIPPED"}


PY_PARTITIONED = PY_OLD.replace("@dp.materialized_view", '@dp.materialized_view(partition_cols=["m"])')


def test_python_mv_partition_cols_partition_its_table(client: Any, sales: Path, tmp_path: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    spec = write_project(tmp_path / "py", {"counts.py": PY_PARTITIONED})
    store, name = client.runtime.iceberg, ObjectName.parse("py_counts")
    first = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert states(first) == {"py_counts": ("SUCCESS", "FULL")}
    table = store.load(name)
    assert store.partition_column(table) == "m"
    files = store.data_files(table)
    # one file per month, each holding the rows of its month only (the column kept inside)
    assert sorted(f.partition or "" for f in files) == ["2024-01", "2024-02"]
    expected = sorted(tuple(r) for r in client.sql("SELECT m, count(*) FROM sales GROUP BY m").collect())
    assert _rows(client, "py_counts") == expected
    assert {r.state for r in run_pipeline(client, load_project(spec, lambda: client.spark)).results} == {"SKIPPED"}

    # partition_cols dropped: the table is replaced by an unpartitioned one, atomically
    (spec.parent / "transformations" / "counts.py").write_text(PY_OLD)
    second = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert second.results[0].reason == "its partition column changed: table replaced atomically"
    assert store.partition_column(store.load(name)) is None and _rows(client, "py_counts") == expected

    # a partition column the DataFrame lacks fails the dataset, naming it; the table is kept
    (spec.parent / "transformations" / "counts.py").write_text(
        PY_OLD.replace("@dp.materialized_view", '@dp.materialized_view(partition_cols=["month"])')
    )
    third = run_pipeline(client, load_project(spec, lambda: client.spark))
    assert third.state == "FAILED" and states(third) == {"py_counts": ("FAILED", None)}
    assert "py_counts: partition column 'month' is not a column of its DataFrame (columns: m, n)" in (
        third.results[0].reason or ""
    )
    assert _rows(client, "py_counts") == expected


def test_python_mv_with_two_partition_cols_is_partitioned_by_the_first(
    client: Any, sales: Path, tmp_path: Path
) -> None:
    """As a SQL ``PARTITIONED BY (a, b)``: partitioned by the first column, the same rows."""
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    two = PY_OLD.replace("@dp.materialized_view", '@dp.materialized_view(partition_cols=["m", "n"])')
    spec = write_project(tmp_path / "py", {"counts.py": two})
    assert states(run_pipeline(client, load_project(spec, lambda: client.spark))) == {"py_counts": ("SUCCESS", "FULL")}
    store = client.runtime.iceberg
    assert store.partition_column(store.load(ObjectName.parse("py_counts"))) == "m"
    expected = sorted(tuple(r) for r in client.sql("SELECT m, count(*) FROM sales GROUP BY m").collect())
    assert _rows(client, "py_counts") == expected
