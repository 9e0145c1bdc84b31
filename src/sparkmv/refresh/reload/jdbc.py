"""The JDBC connector of refreshable tables: driver jar, password, and the raw query rows.

The driver jar is never downloaded and never searched for in a build tool's cache. It comes,
in this order, from:

1. the table's ``jars`` option (paths separated by ``,`` or ``os.pathsep``);
2. Spark's own configuration: a ``spark.jars`` entry that is a PostgreSQL driver (for a
   ``jdbc:postgresql:`` URL) or any ``spark.jars`` at all (other databases);
3. ``SPARKMV_JDBC_JARS`` (read once into :attr:`sparkmv.config.Settings.jdbc_jars`; set but
   empty means "no driver jar");
4. the jar of Debian's ``libpostgresql-jdbc-java`` package, ``/usr/share/java/postgresql.jar``
   (``make install-dev`` installs it), for PostgreSQL URLs.

Without any, a PostgreSQL query is read with psycopg instead of Spark's JDBC source.

Passwords are never stored in the catalog: ``password_env`` names an environment variable
and ``password_file`` a file whose first line is the password; both are read when the
source is loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from sparkmv.errors import SourceError

DEBIAN_JDBC_JAR = Path("/usr/share/java/postgresql.jar")
POSTGRES_DRIVER = "org.postgresql.Driver"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_added_jars: set[str] = set()


def split_jars(text: str) -> list[str]:
    """``"a.jar,b.jar"`` or ``"a.jar:b.jar"`` -> ``["a.jar", "b.jar"]``.

    >>> split_jars("/x/a.jar, /y/b.jar")
    ['/x/a.jar', '/y/b.jar']
    """
    return [p.strip() for p in re.split(rf"[,{re.escape(os.pathsep)}]", text) if p.strip()]


def is_env_name(text: str) -> bool:
    """True when ``text`` can name an environment variable (``password_env``)."""
    return bool(_ENV_NAME.match(text))


def url_has_password(url: str) -> bool:
    """True when a JDBC URL carries a ``password`` parameter (clear text in the catalog).

    >>> url_has_password("jdbc:postgresql://h/db?user=u&password=secret")
    True
    >>> url_has_password("jdbc:postgresql://h/db?user=u")
    False
    """
    query = urlparse(url.removeprefix("jdbc:")).query
    return any(k.lower() == "password" for k in parse_qs(query))


def driver_jars(
    spark_jars: str, url: str, table_jars: Sequence[str], configured: Sequence[str] | None
) -> list[str] | None:
    """The jars to add to the session for a JDBC read of ``url`` (see the module docstring).

    Args:
        spark_jars: the session's ``spark.jars`` (comma-separated, may be empty).
        table_jars: the table's ``jars`` option, split.
        configured: :attr:`Settings.jdbc_jars` (None when ``SPARKMV_JDBC_JARS`` is unset).

    Returns:
        Jars to add (empty: the driver is already on Spark's class path), or None when no
        driver is available (PostgreSQL is then read with psycopg).

    >>> driver_jars("", "jdbc:postgresql://h/db", ["/t.jar"], ["/env.jar"])
    ['/t.jar']
    >>> driver_jars("/opt/postgresql-42.7.jar", "jdbc:postgresql://h/db", [], ["/env.jar"])
    []
    >>> driver_jars("", "jdbc:postgresql://h/db", [], [])  # SPARKMV_JDBC_JARS set to nothing
    """
    if table_jars:
        return list(table_jars)
    postgres = url.startswith("jdbc:postgresql:")
    from_spark = [j for j in spark_jars.split(",") if j.strip()]
    if (postgres and any("postgresql" in Path(j).name.lower() for j in from_spark)) or (from_spark and not postgres):
        return []
    if configured is not None:
        return list(configured) if configured or not postgres else None
    if postgres:
        return [str(DEBIAN_JDBC_JAR)] if DEBIAN_JDBC_JAR.is_file() else None
    return []


def password(options: dict[str, Any], table: str) -> str | None:
    """The password named by ``password_env`` or ``password_file``; None when neither is given.

    Raises:
        SourceError: when the variable is unset or the file cannot be read.
    """
    env = options.get("password_env")
    if env:
        value = os.environ.get(env)
        if value is None:
            raise SourceError(f"Table '{table}': password_env names environment variable '{env}', which is not set")
        return value
    path = options.get("password_file")
    if path:
        try:
            lines = Path(path).read_text().splitlines()
        except OSError as exc:
            raise SourceError(f"Table '{table}': cannot read password_file '{path}': {exc.strerror}") from exc
        return lines[0] if lines else ""
    return None


def read_query(spark: SparkSession, table: str, options: dict[str, Any], configured: Sequence[str] | None) -> DataFrame:
    """The rows of the JDBC ``query``, as the database returns them (Spark's JDBC source), or
    as strings (psycopg, when no PostgreSQL driver jar is available).

    Raises:
        SourceError: for a missing password variable or file.
    """
    url: str = options["url"]
    secret = password(options, table)
    # The session's configuration holds the SparkConf on a classic session and the server's on Connect.
    spark_jars = spark.conf.get("spark.jars", "") or ""
    jars = driver_jars(spark_jars, url, split_jars(options.get("jars") or ""), configured)
    if jars is None:
        return _read_postgres_psycopg(spark, url, options, secret)
    for jar in jars:
        if jar not in _added_jars:
            spark.sql(f"ADD JAR '{jar}'")
            _added_jars.add(jar)
    reader = spark.read.format("jdbc").option("url", url).option("query", options["query"])
    for key, value in (("user", options.get("user")), ("password", secret), ("driver", options.get("driver"))):
        if value:
            reader = reader.option(key, value)
    if not options.get("driver") and url.startswith("jdbc:postgresql:"):
        reader = reader.option("driver", POSTGRES_DRIVER)
    return reader.load()


def _read_postgres_psycopg(spark: SparkSession, url: str, opts: dict[str, Any], secret: str | None) -> DataFrame:
    """Without a driver jar: run the query with psycopg, hand the rows (as text) to Spark."""
    import psycopg

    parsed = urlparse(url.removeprefix("jdbc:"))
    params = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    conninfo: dict[str, Any] = {
        "host": parsed.hostname or "localhost",
        "port": parsed.port or 5432,
        "dbname": parsed.path.lstrip("/"),
        "user": opts.get("user") or params.get("user"),
        "password": secret,
    }
    kwargs: dict[str, Any] = {k: v for k, v in conninfo.items() if v is not None}
    with psycopg.connect(**kwargs) as conn:
        cur = conn.execute(opts["query"])
        names = [d.name for d in cur.description or []]
        rows = [tuple(None if v is None else str(v) for v in r) for r in cur.fetchall()]
    schema = StructType([StructField(n, StringType(), True) for n in names])
    return spark.createDataFrame(rows, schema)
