"""Every bad input through the ``sparkmv`` command: the exit code, exactly one ``error:``
line, no traceback (Python or Java), and nothing changed: catalog rows, the MV's Iceberg
files, the base files. Cases that need no Spark must not start one.

The module builds one home (external table ``sales``, MV ``by_month``) with the session's
SparkSession. Most cases run the command in this process (``main()`` with ``sys.argv``),
which shares that session and lets the test see whether the command started Spark; the
few that are about processes (a JVM not started, the terminal free of Spark's log) run
``sparkmv`` as a subprocess. Destructive cases work on a copy of the home.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkmv.cli import main as cli
from sparkmv.client.client import Client
from sparkmv.storage.spark import QUERY_CONTEXT_LOGGERS
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
MV = "CREATE MATERIALIZED VIEW by_month PARTITION BY m AS SELECT m, sum(amount) AS total FROM sales GROUP BY m"
TRACEBACK_MARKS = ("Traceback", "Exception in thread", "\tat org.", "at org.apache", "py4j", '{"ts"')


@dataclass
class Env:
    root: Path
    home: Path
    sales: Path


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    started_spark: bool


@pytest.fixture(scope="module")
def env(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """A home with external table ``sales`` (two partitions) and MV ``by_month``, plus inputs."""
    root = tmp_path_factory.mktemp("matrix")
    sales = root / "data" / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "amount": [1.5, 2.0]})
    write_partition(sales, "m", "2024-02", {"id": [3], "amount": [10.0]})
    (root / "data" / "csv").mkdir()
    for i in range(3):
        (root / "data" / "csv" / f"part-{i}.csv").write_text("id,amount\n1,2.0\n")
    (root / "data" / "empty").mkdir()
    (root / "a_file").write_text("not a directory\n")
    (root / "empty.sql").write_text("-- nothing but a comment\n\n")
    home = root / "home"
    with Client(home=home, spark=spark) as client:
        client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
        client.sql(MV)
    yield Env(root, home, sales)


def run_in_process(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Outcome:
    """``sparkmv ARGV`` in this process (the session's SparkSession is the active one)."""
    monkeypatch.delenv("SPARKMV_CATALOG_URL", raising=False)
    monkeypatch.setattr(sys, "argv", ["sparkmv", *argv])
    from pyspark.logger import PySparkLogger

    for name in QUERY_CONTEXT_LOGGERS:  # the CLI's own session sends these to its log file
        # PySparkLogger.getLogger: a plain logging.Logger made first under this name would
        # break pyspark's own error logging (it passes errorClass=...) for the whole session.
        monkeypatch.setattr(PySparkLogger.getLogger(name), "disabled", True)
    cli.state._client = None
    capsys.readouterr()
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    client = cli.state._client
    cli.state._client = None
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, client is not None and client.runtime.has_spark)


def run_subprocess(argv: list[str]) -> Outcome:
    """``sparkmv ARGV`` as a real process."""
    env = {**os.environ, "SPARKMV_SPARK_MASTER": "local[1]"}
    env.pop("SPARKMV_CATALOG_URL", None)
    done = subprocess.run([SPARKMV, *argv], capture_output=True, text=True, env=env, timeout=300, check=False)
    return Outcome(done.returncode, done.stdout, done.stderr, False)


def state_of(home: Path, sales: Path) -> dict[str, Any]:
    """Catalog rows (read-only), the hashes of every warehouse file and base file."""
    out: dict[str, Any] = {}
    catalog = home / "catalog.db"
    if catalog.is_file() and catalog.stat().st_size:
        conn = sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]
            for table in tables:
                out[table] = sorted(map(repr, conn.execute(f'SELECT * FROM "{table}"')))
        finally:
            conn.close()
    out["warehouse"] = _hashes(home / "warehouse")
    out["base"] = _hashes(sales)
    return out


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def assert_one_error(outcome: Outcome, code: int, message: str) -> None:
    """Exit ``code``, one ``error:`` line containing ``message``, no traceback anywhere."""
    text = outcome.out + outcome.err
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert outcome.code == code, text
    assert len(errors) == 1, text
    assert message in errors[0], errors[0]
    assert not any(mark in text for mark in TRACEBACK_MARKS), text


def _args(env: Env, argv: list[str]) -> list[str]:
    return [a.format(root=env.root, home=env.home, sales=env.sales) for a in argv]


# (id, argv after --home HOME, exit code, part of the error line, needs Spark)
CASES: list[tuple[str, list[str], int, str, bool]] = [
    # 1. command-line mistakes: usage line + error, exit 2
    ("unknown_option", ["--remotely", "sc://x", "sql", "SELECT 1"], 2, "No such option: --remotely", False),
    (
        "master_and_remote",
        ["--master", "local[1]", "--remote", "sc://127.0.0.1:15002", "status"],
        2,
        "Invalid value for '--remote': give --master or --remote, not both",
        False,
    ),
    ("unknown_command", ["nocmd"], 2, "No such command 'nocmd'", False),
    ("missing_option_value", ["runs", "--limit"], 2, "Option '--limit' requires an argument", False),
    ("limit_out_of_range", ["runs", "by_month", "--limit", "0"], 2, "Invalid value for '--limit'", False),
    ("missing_argument", ["runs"], 2, "Missing argument", False),
    ("conf_without_value", ["--conf", "novalue", "status"], 2, "--conf expects key=value, got 'novalue'", False),
    ("bad_format_status", ["status", "--format", "xml"], 2, "'xml' is not one of 'table', 'csv', 'json'", False),
    ("bad_format_sql", ["sql", "--format", "yaml", "SELECT 1"], 2, "'yaml' is not one of", False),
    # 2. files and directories
    ("script_missing", ["sql", "-f", "{root}/missing.sql"], 1, "cannot read script {root}/missing.sql: No such", False),
    ("script_directory", ["sql", "-f", "{root}"], 1, "cannot read script {root}: Is a directory", False),
    (
        "script_binary",
        ["sql", "-f", "{sales}/m=2024-01/part-0.parquet"],
        1,
        "cannot read script {sales}/m=2024-01/part-0.parquet: not a UTF-8 text file",
        False,
    ),
    ("statement_and_file", ["sql", "-f", "{root}/empty.sql", "SELECT 1"], 1, "give one statement or -f FILE", False),
    # 3. numbers out of range and rules between properties
    (
        "every_overflow",
        ["sql", "ALTER MATERIALIZED VIEW by_month REFRESH ASYNC EVERY (INTERVAL 99999999999 DAY)"],
        1,
        "EVERY (INTERVAL 99999999999 DAY) is out of range: the interval must be from 1 SECOND to 3650 DAY",
        False,
    ),
    (
        "lease_renew_not_below_timeout",
        ["sql", "ALTER MATERIALIZED VIEW by_month SET PROPERTIES ('lease_renew_seconds' = '120')"],
        1,
        "lease_renew_seconds (120) must be less than lease_timeout_seconds (60)",
        False,
    ),
    (
        "property_out_of_range",
        ["sql", "ALTER MATERIALIZED VIEW by_month SET PROPERTIES ('task_priority' = '101')"],
        1,
        "property 'task_priority' must be an integer from 0 to 100, not '101'",
        False,
    ),
    (
        "incremental_ratio_negative",
        ["sql", "ALTER MATERIALIZED VIEW by_month SET PROPERTIES ('incremental_max_change_ratio' = '-1')"],
        1,
        "property 'incremental_max_change_ratio' must be a number from 0 to 1e+09, not '-1'",
        False,
    ),
    (
        "table_interval_overflow",
        [
            "sql",
            "CREATE TABLE rt (id int, PRIMARY KEY (id)) WITH ('connector' = 'files', 'path' = '{root}', "
            "'format' = 'csv', 'refresh_mode' = 'FULL_RELOAD', 'refresh_interval_sec' = '99999999999999')",
        ],
        1,
        "refresh_interval_sec must be an integer between 1 and 315360000",
        False,
    ),
    # 4. empty input
    ("empty_statement", ["sql", ""], 1, "no statement to run", False),
    ("comment_only_script", ["sql", "-f", "{root}/empty.sql"], 1, "no statement to run in {root}/empty.sql", False),
    # 7. checks that need no Spark
    ("parse_error", ["sql", "SELECT m FROM sales WHERE"], 1, "cannot parse SQL at line 1, column 25", False),
    (
        "missing_location",
        ["sql", "CREATE EXTERNAL TABLE t USING parquet LOCATION '{root}/nope'"],
        1,
        "LOCATION '{root}/nope' does not exist",
        False,
    ),
    (
        "relative_location",
        ["sql", "CREATE EXTERNAL TABLE t USING parquet LOCATION 'data/sales'"],
        1,
        "LOCATION 'data/sales' is a relative path: give an absolute path",
        False,
    ),
    (
        "file_location",
        ["sql", "CREATE EXTERNAL TABLE t USING parquet LOCATION '{root}/a_file'"],
        1,
        "LOCATION '{root}/a_file' is a file, not a directory of Parquet files",
        False,
    ),
    (
        "empty_location",
        ["sql", "CREATE EXTERNAL TABLE t USING parquet LOCATION '{root}/data/empty'"],
        1,
        "LOCATION '{root}/data/empty' holds no data files",
        False,
    ),
    # 6. what Spark would have failed on, in sparkmv's words
    (
        "csv_as_parquet",
        ["sql", "CREATE EXTERNAL TABLE t USING parquet LOCATION '{root}/data/csv'"],
        1,
        "LOCATION '{root}/data/csv' holds no Parquet files (found 3 .csv files)",
        False,
    ),
    ("unknown_column", ["sql", "SELECT nope FROM by_month"], 1, "`nope` cannot be resolved", True),
    # 8. scripts: parsed whole first, stop at the first failure
    (
        "script_syntax_error_late",
        ["sql", "DROP MATERIALIZED VIEW by_month;\nSELECT 1;\nSELEC 2"],
        1,
        "(statement 3)",
        False,
    ),
    (
        "script_stops_at_failure",
        ["sql", "CANCEL REFRESH MATERIALIZED VIEW by_month;\nDROP MATERIALIZED VIEW by_month"],
        1,
        "statement 1 (line 1) failed: 'by_month' is not being refreshed",
        False,
    ),
    ("unknown_object", ["runs", "nope"], 1, "table or view 'nope' does not exist", False),
]


@pytest.mark.parametrize(("argv", "code", "message", "needs_spark"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input(
    env: Env,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
    needs_spark: bool,
) -> None:
    before = state_of(env.home, env.sales)
    outcome = run_in_process(["--home", str(env.home), *_args(env, argv)], monkeypatch, capsys)
    assert_one_error(outcome, code, _args(env, [message])[0])
    if code == 2:
        assert outcome.err.startswith("Usage: sparkmv"), outcome.err
    assert outcome.started_spark == needs_spark
    assert state_of(env.home, env.sales) == before


HOME_CASES: list[tuple[str, list[str], str]] = [
    ("home_is_a_file", ["--home", "{root}/a_file", "status"], "cannot create catalog directory {root}/a_file"),
    ("home_cannot_be_created", ["--home", "/proc/sparkmv/home", "status"], "cannot create catalog directory /proc"),
    (
        "catalog_url_cannot_be_created",
        ["--catalog-url", "sqlite:////proc/sparkmv/catalog.db", "status"],
        "cannot create catalog directory /proc/sparkmv: No such file or directory",
    ),
    (
        "catalog_url_in_memory",
        ["--catalog-url", "sqlite://", "status"],
        "catalog URL 'sqlite://' is an in-memory SQLite database, which loses every object when the process exits; "
        "give a file (sqlite:////path/catalog.db) or a PostgreSQL URL",
    ),
]


@pytest.mark.parametrize(("argv", "message"), [c[1:] for c in HOME_CASES], ids=[c[0] for c in HOME_CASES])
def test_unusable_home_or_catalog_path(
    env: Env, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    outcome = run_in_process(_args(env, argv), monkeypatch, capsys)
    assert_one_error(outcome, 1, _args(env, [message])[0])
    assert (env.root / "a_file").read_text() == "not a directory\n"


@pytest.mark.parametrize("content", [b"", b"garbage that is not SQLite\n", b"SQLite format 3\x00" + b"\x00" * 200])
@pytest.mark.parametrize("command", [["status"], ["runs", "by_month"], ["sql", "SHOW MATERIALIZED VIEWS"]])
def test_empty_or_damaged_catalog_is_refused(
    env: Env,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes,
    command: list[str],
) -> None:
    """A truncated or foreign catalog file next to a built MV: refused, nothing written."""
    home = tmp_path / "home"
    shutil.copytree(env.home, home)
    (home / "catalog.db").write_bytes(content)
    for leftover in ("catalog.db-wal", "catalog.db-shm"):
        (home / leftover).unlink(missing_ok=True)
    before = _hashes(home)
    outcome = run_in_process(["--home", str(home), *command], monkeypatch, capsys)
    assert_one_error(outcome, 1, f"catalog {home}/catalog.db is empty or damaged; restore it from a backup")
    assert not outcome.started_spark
    assert _hashes(home) == before  # catalog file and the MV's data byte for byte


def test_foreign_sqlite_file_is_refused(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SQLite database that is not a sparkmv catalog is not migrated into one."""
    home = tmp_path / "home"
    home.mkdir()
    conn = sqlite3.connect(home / "catalog.db")
    conn.execute("CREATE TABLE notes (x text)")
    conn.commit()
    conn.close()
    before = _hashes(home)
    outcome = run_in_process(["--home", str(home), "status"], monkeypatch, capsys)
    assert_one_error(outcome, 1, f"catalog {home}/catalog.db is empty or damaged")
    assert _hashes(home) == before


# -- as real processes: no JVM for what needs no Spark, and Spark's log never on the terminal --------
def test_parse_error_and_bad_master_start_no_jvm(env: Env) -> None:
    before = state_of(env.home, env.sales)
    log = env.home / "logs" / "spark.log"
    existed = log.exists()
    outcome = run_subprocess(["--home", str(env.home), "sql", "SELECT m FROM sales WHERE"])
    assert_one_error(outcome, 1, "cannot parse SQL at line 1, column 25")
    outcome = run_subprocess(["--home", str(env.home), "--master", "nonsense://x", "sql", "SELECT 1"])
    assert_one_error(outcome, 1, "Spark master 'nonsense://x' is not valid")
    outcome = run_subprocess(["--home", str(env.home), "--master", "sc://127.0.0.1:15002", "sql", "SELECT 1"])
    assert_one_error(outcome, 1, "Spark master 'sc://127.0.0.1:15002' is a Spark Connect URL: give it as the remote")
    outcome = run_subprocess(["--home", str(env.home), "--remote", "http://127.0.0.1:15002", "sql", "SELECT 1"])
    assert_one_error(outcome, 1, "Spark Connect URL 'http://127.0.0.1:15002' is not valid: use sc://HOST:PORT")
    with socket.socket() as sock:  # a port nothing listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        remote = f"sc://127.0.0.1:{sock.getsockname()[1]}"
        outcome = run_subprocess(["--home", str(env.home), "--remote", remote, "sql", "SELECT 1"])
    assert_one_error(outcome, 1, f"cannot reach the Spark Connect server at {remote}: Connection refused")
    assert log.exists() == existed, "no JVM was started, so it wrote no log"
    assert state_of(env.home, env.sales) == before


def test_spark_error_is_one_line_and_the_log_goes_to_the_home(env: Env, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(env.home, home)
    outcome = run_subprocess(["--home", str(home), "sql", "SELECT nope FROM by_month"])
    assert_one_error(outcome, 1, "`nope` cannot be resolved")
    log = home / "logs" / "spark.log"
    assert f"Spark's log: {log}" in outcome.err
    assert len(outcome.err.splitlines()) == 2, outcome.err  # the error and where the log is
    assert "UNRESOLVED_COLUMN" in log.read_text()  # the details are in the log


def test_version_prints_the_installed_version(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sparkmv --version``: the distribution's version (``sparkmv.__version__``), exit 0."""
    from importlib.metadata import version

    import sparkmv

    monkeypatch.setattr(sys, "argv", ["sparkmv", "--version"])
    try:
        cli.main()
    except SystemExit as done:
        assert done.code in (0, None), done.code
    assert capsys.readouterr().out == f"sparkmv {version('sparkmv')}\n"
    assert sparkmv.__version__ == version("sparkmv")
