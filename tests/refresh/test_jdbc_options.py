"""JDBC sources without Spark: options validated at CREATE (no clear-text password), where the
driver jar comes from, and how the password is read at load time."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkmv.config import Settings
from sparkmv.errors import InvalidPropertyError, SourceError
from sparkmv.refresh.reload import jdbc
from sparkmv.refresh.reload.options import parse_with_options

URL = "jdbc:postgresql://127.0.0.1:5432/test?user=postgres"


def _jdbc(**extra: str) -> dict[str, str]:
    return {"connector": "jdbc", "url": URL, "query": "SELECT 1", "refresh_mode": "FULL_RELOAD", **extra}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"password": "s3cret"},
            "Table 't': option 'password' would be stored in clear text in the catalog; name an environment "
            "variable with password_env = 'VAR' or a file with password_file = '/path' instead",
        ),
        (
            {"url": URL + "&password=s3cret"},
            "Table 't': a password in the url would be stored in clear text in the catalog; name an environment "
            "variable with password_env = 'VAR' or a file with password_file = '/path' instead",
        ),
        (
            {"password_env": "PGPASS", "password_file": "/run/secrets/pg"},
            "Table 't': give password_env or password_file, not both",
        ),
        ({"password_env": "PG-PASS"}, "Table 't': password_env must name an environment variable, got 'PG-PASS'"),
        ({"password_file": "secrets/pg"}, "Table 't': password_file must be an absolute path, got 'secrets/pg'"),
        ({"jars": "/nowhere/postgresql.jar"}, "Table 't': jars: driver jar '/nowhere/postgresql.jar' does not exist"),
    ],
)
def test_bad_jdbc_options_are_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidPropertyError) as err:
        parse_with_options("t", _jdbc(**options))
    assert str(err.value) == message


def test_jdbc_options_store_where_the_password_is_not_the_password(tmp_path: Path) -> None:
    jar = tmp_path / "driver.jar"
    jar.write_bytes(b"")
    out = parse_with_options("t", _jdbc(password_env="PGPASS", user="app", jars=str(jar)))
    assert {k: out[k] for k in ("url", "user", "password_env", "password_file", "jars")} == {
        "url": URL,
        "user": "app",
        "password_env": "PGPASS",
        "password_file": None,
        "jars": str(jar),
    }
    assert "password" not in out


def test_the_driver_jar_comes_from_table_spark_settings_or_debian(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg, other = URL, "jdbc:mysql://h/db"
    # 1. the table's option wins
    assert jdbc.driver_jars("/s/postgresql.jar", pg, ["/t.jar"], ["/env.jar"]) == ["/t.jar"]
    # 2. a PostgreSQL driver in spark.jars is already on the class path
    assert jdbc.driver_jars("/a.jar,/s/postgresql-42.7.3.jar", pg, [], ["/env.jar"]) == []
    assert jdbc.driver_jars("/s/mysql.jar", other, [], None) == []
    # 3. SPARKMV_JDBC_JARS (Settings.jdbc_jars); set but empty means no jar: psycopg
    assert jdbc.driver_jars("/a.jar", pg, [], ["/env.jar"]) == ["/env.jar"]
    assert jdbc.driver_jars("", pg, [], []) is None
    # 4. Debian's package jar, when installed
    debian = tmp_path / "postgresql.jar"
    monkeypatch.setattr(jdbc, "DEBIAN_JDBC_JAR", debian)
    assert jdbc.driver_jars("", pg, [], None) is None
    debian.write_bytes(b"")
    assert jdbc.driver_jars("", pg, [], None) == [str(debian)]
    # The environment is read once, into Settings.
    assert Settings.resolve(home=tmp_path, env={"SPARKMV_JDBC_JARS": "/a.jar:/b.jar"}).jdbc_jars == ("/a.jar", "/b.jar")
    assert Settings.resolve(home=tmp_path, env={"SPARKMV_JDBC_JARS": ""}).jdbc_jars == ()
    assert Settings.resolve(home=tmp_path, env={}).jdbc_jars is None


def test_the_password_is_read_from_the_named_variable_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMV_TEST_PGPASS", "from-env")
    assert jdbc.password({"password_env": "SMV_TEST_PGPASS"}, "t") == "from-env"
    secret = tmp_path / "pg"
    secret.write_text("from-file\n")
    assert jdbc.password({"password_file": str(secret)}, "t") == "from-file"
    assert jdbc.password({}, "t") is None
    monkeypatch.delenv("SMV_TEST_PGPASS")
    with pytest.raises(SourceError) as err:
        jdbc.password({"password_env": "SMV_TEST_PGPASS"}, "t")
    assert str(err.value) == "Table 't': password_env names environment variable 'SMV_TEST_PGPASS', which is not set"
    with pytest.raises(SourceError) as err:
        jdbc.password({"password_file": str(tmp_path / "missing")}, "t")
    assert str(err.value) == f"Table 't': cannot read password_file '{tmp_path / 'missing'}': No such file or directory"
