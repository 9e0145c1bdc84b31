"""Refreshable tables: validation errors (clear, changing nothing), JDBC source."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkmv.errors import AnalysisError, InvalidPropertyError, ObjectNotFoundError, RefreshError
from sparkmv.names import ObjectName
from tests.refresh.reload_helpers import contents, refresh, run_counts, write_csv

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLS = "id int, v int"


def _nothing_created(client, name: str = "t") -> None:  # type: ignore[no-untyped-def]
    rt = client.runtime
    with rt.catalog.transaction() as s:
        assert rt.catalog.objects.find(s, ObjectName.parse(name)) is None
    assert not rt.iceberg.exists(ObjectName.parse(name))
    assert not rt.iceberg.exists(ObjectName.parse(name + "__changelog"))


@pytest.mark.parametrize(
    ("ddl", "error", "message"),
    [
        (
            f"CREATE TABLE t ({COLS}) WITH (connector = 'files', path = '{{src}}', format = 'csv', "
            "refresh_mode = 'FULL_RELOAD')",
            AnalysisError,
            "Table 't' has no primary key: a refreshable table needs PRIMARY KEY (column, ...)",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}', format = 'csv', "
            "refresh_mode = 'FULL_RELOAD', refresh_interval_sec = '0')",
            InvalidPropertyError,
            "Table 't': refresh_interval_sec must be an integer between 1 and 315360000, got '0'",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}', format = 'csv', "
            "refresh_mode = 'FULL_RELOAD', refresh_interval_sec = 'soon')",
            InvalidPropertyError,
            "Table 't': refresh_interval_sec must be an integer between 1 and 315360000, got 'soon'",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}', format = 'csv', "
            "refresh_interval_sec = '60')",
            InvalidPropertyError,
            "Table 't': refresh_interval_sec requires refresh_mode = 'FULL_RELOAD'",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'kafka', refresh_mode = 'FULL_RELOAD')",
            InvalidPropertyError,
            "Table 't': unknown connector 'kafka' (supported: files, jdbc)",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}', format = 'xml', "
            "refresh_mode = 'FULL_RELOAD')",
            InvalidPropertyError,
            "Table 't': unknown format 'xml' (supported: csv, parquet, json)",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}/nope', "
            "format = 'csv', refresh_mode = 'FULL_RELOAD')",
            InvalidPropertyError,
            "Table 't': path '{src}/nope' does not exist or is not a directory",
        ),
        (
            f"CREATE TABLE t ({COLS}, PRIMARY KEY (k)) WITH (connector = 'files', path = '{{src}}', format = 'csv', "
            "refresh_mode = 'FULL_RELOAD')",
            AnalysisError,
            "Table 't': primary key column 'k' is not a declared column",
        ),
        (
            f"CREATE TABLE t ({COLS}, sign int, PRIMARY KEY (id)) WITH (connector = 'files', path = '{{src}}', "
            "format = 'csv', refresh_mode = 'FULL_RELOAD')",
            AnalysisError,
            "Table 't': column name 'sign' is reserved for the changelog",
        ),
    ],
    ids=[
        "no-pk",
        "interval-zero",
        "interval-text",
        "interval-without-full-reload",
        "connector",
        "format",
        "path",
        "unknown-key",
        "reserved-sign",
    ],
)
def test_create_errors_change_nothing(client, tmp_path: Path, ddl: str, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    src.mkdir()
    with pytest.raises(error) as info:
        client.sql(ddl.format(src=src))
    assert str(info.value) == message.format(src=src)
    _nothing_created(client)


def _table(client, src: Path, name: str = "t") -> None:  # type: ignore[no-untyped-def]
    client.sql(
        f"CREATE TABLE {name} ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{src}', "
        f"format = 'csv', refresh_mode = 'FULL_RELOAD', vnode_count = '4', refresh_interval_sec = '30')"
    )


def test_bad_rows_fail_the_run_with_file_and_line(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    write_csv(src, "a.csv", [(1, 10), (2, 20)])
    _table(client, src)
    refresh(client, "t")
    snap = client.runtime.iceberg.load(ObjectName.parse("t")).current_snapshot().snapshot_id

    write_csv(src, "b.csv", [(3, 30), (4, "forty"), (5, 50)])
    run = client.execute("REFRESH TABLE t").run
    assert run.state == "FAILED"
    assert run.error == (
        "Table 't': source rows do not fit the declared types (id int, v int): file 'b.csv' line 3: '4,forty'"
    )
    assert contents(client, "SELECT * FROM t") == [(1, 10), (2, 20)]
    assert client.runtime.iceberg.load(ObjectName.parse("t")).current_snapshot().snapshot_id == snap

    write_csv(src, "b.csv", [(3, 30), (None, 40)])
    run = client.execute("REFRESH TABLE t").run
    assert run.state == "FAILED"
    assert run.error == "Table 't': key column 'id' is NULL in the source: file 'b.csv' line 3"
    assert contents(client, "SELECT * FROM t") == [(1, 10), (2, 20)]
    state = client.sql("SELECT * FROM sparkmv.refresh_table_state").collect()[0]
    assert state["current_status"] == "IDLE" and state["trigger_interval_secs"] == 30
    location = client.runtime.iceberg.load(ObjectName.parse("t")).location().removeprefix("file://")
    assert not (Path(location) / "data" / f"run-{run.run_id}").exists()  # staging removed


def test_refresh_errors(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client.sql("CREATE TABLE plain (id int, v int, PRIMARY KEY (id))")
    assert contents(client, "SELECT * FROM plain") == []
    with pytest.raises(RefreshError) as info:
        client.sql("REFRESH TABLE plain")
    assert str(info.value) == (
        "Table 'plain' is not refreshable: it has no associated source with refresh_mode FULL_RELOAD"
    )
    src = tmp_path / "src"
    src.mkdir()
    client.sql(
        f"CREATE TABLE nomode ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{src}', format = 'csv')"
    )
    with pytest.raises(RefreshError, match="Table 'nomode' is not refreshable: it has no associated source"):
        client.sql("REFRESH TABLE nomode")
    with pytest.raises(ObjectNotFoundError):
        client.sql("REFRESH TABLE missing")
    with client.runtime.catalog.transaction() as s:
        assert client.runtime.catalog.runs.list(s) == []


def test_parquet_and_json_sources(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pdir = tmp_path / "p"
    pdir.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "v": [10, 20]}), pdir / "x.parquet")
    pq.write_table(pa.table({"id": [2, 3], "v": [21, 30]}), pdir / "y.parquet")
    client.sql(
        f"CREATE TABLE pt ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{pdir}', "
        f"format = 'parquet', refresh_mode = 'FULL_RELOAD', vnode_count = '4')"
    )
    refresh(client, "pt")
    assert contents(client, "SELECT * FROM pt") == [(1, 10), (2, 21), (3, 30)]  # y.parquet after x.parquet

    jdir = tmp_path / "j"
    jdir.mkdir()
    (jdir / "a.json").write_text('{"id": 1, "v": 5}\n{"id": 2, "v": 6}\n')
    (jdir / "b.data").write_text('{"id": 3, "v": 7}\n')
    client.sql(
        f"CREATE TABLE jt ({COLS}, PRIMARY KEY (id)) WITH (connector = 'files', path = '{jdir}', format = 'json', "
        f"match_pattern = '*.json', refresh_mode = 'FULL_RELOAD', vnode_count = '4')"
    )
    refresh(client, "jt")
    assert contents(client, "SELECT * FROM jt") == [(1, 5), (2, 6)]

    sdir = tmp_path / "s"
    sdir.mkdir()
    (sdir / "a.txt").write_text("1;x\n2;y\n")
    client.sql(
        f"CREATE TABLE st (id int, v string, PRIMARY KEY (id)) WITH (connector = 'files', path = '{sdir}', "
        f"format = 'csv', csv.header = 'false', csv.delimiter = ';', refresh_mode = 'FULL_RELOAD', vnode_count = '2')"
    )
    refresh(client, "st")
    assert contents(client, "SELECT * FROM st") == [(1, "x"), (2, "y")]


@pytest.mark.postgres
@pytest.mark.parametrize("driver", ["jar", "psycopg"])
def test_jdbc_source_on_postgresql(
    client, pg_url: str, driver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """Through Spark's JDBC source with Debian's driver jar (``make install-dev`` installs it), and
    without any jar (psycopg); the password is named by a file, never stored."""
    import dataclasses

    import psycopg

    from sparkmv.refresh.reload import jdbc

    fallback_reads: list[str] = []
    psycopg_read = jdbc._read_postgres_psycopg
    monkeypatch.setattr(jdbc, "_added_jars", set())
    monkeypatch.setattr(jdbc, "_read_postgres_psycopg", lambda *a: fallback_reads.append("psycopg") or psycopg_read(*a))
    settings = client.runtime.settings
    if driver == "psycopg":  # SPARKMV_JDBC_JARS set to nothing: no driver jar
        client.runtime.settings = dataclasses.replace(settings, jdbc_jars=())
    else:
        assert jdbc.DEBIAN_JDBC_JAR.is_file(), "install the driver: apt-get install libpostgresql-jdbc-java"
        client.runtime.settings = dataclasses.replace(settings, jdbc_jars=None)
    secret = tmp_path / "pgpass"
    secret.write_text("unused-with-trust-auth\n")

    conninfo = pg_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE src (id int PRIMARY KEY, v int, note text)")
        conn.execute("INSERT INTO src VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')")
    rest = pg_url.split("@", 1)[1]
    user = pg_url.split("://", 1)[1].split("@", 1)[0]
    client.sql(
        f"CREATE TABLE jt ({COLS}, PRIMARY KEY (id)) WITH (connector = 'jdbc', "
        f"url = 'jdbc:postgresql://{rest}?user={user}', query = 'SELECT id, v FROM src', "
        f"password_file = '{secret}', refresh_mode = 'FULL_RELOAD', vnode_count = '4')"
    )
    with client.runtime.catalog.read() as s:
        stored = client.runtime.catalog.objects.find(s, ObjectName.parse("jt")).options
    assert "unused-with-trust-auth" not in str(stored) and stored["password_file"] == str(secret)
    refresh(client, "jt")
    assert jdbc._added_jars == ({str(jdbc.DEBIAN_JDBC_JAR)} if driver == "jar" else set())
    assert fallback_reads == ([] if driver == "jar" else ["psycopg"])
    assert contents(client, "SELECT * FROM jt") == [(1, 10), (2, 20), (3, 30)]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("UPDATE src SET v = 11 WHERE id = 1")
        conn.execute("DELETE FROM src WHERE id = 2")
        conn.execute("INSERT INTO src VALUES (4, 40, 'd')")
    run = refresh(client, "jt")
    assert contents(client, "SELECT * FROM jt") == [(1, 11), (3, 30), (4, 40)]
    assert run_counts(client, run.run_id) == (1, 1, 1)
