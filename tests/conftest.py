"""Shared fixtures: one SparkSession per test session, catalog URLs for SQLite and
PostgreSQL, and a Client factory on a fresh home directory."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PG_URL = os.environ.get("SPARKMV_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() == "true"
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "2g",
    # Test JVMs live for seconds to minutes over tiny data: the C1 compiler and the serial
    # collector halve their CPU time (measured on the cluster tests' demo check). C1 alone
    # sizes the code cache at 48 MiB, which a long session can fill: ask for Java's default.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC",
    # Over tests' tiny inputs, compiling each query's generated Java (Janino) costs more than
    # running it interpreted: both off, the JVM's CPU time of tests/differential/test_stages.py
    # fell from 80 to 45 s (bench/RESULTS.md, "Test suite time"). Results are the same
    # (Spark's interpreted evaluation is its codegen's fallback).
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


_SERVER_FIXTURES = {"spark_cluster", "connect_server", "cluster_target", "connect_target"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``: ``-n 2 --dist loadgroup``) the tests of the
    session's Spark standalone cluster and Connect server run on one worker, which starts
    them once; spread over both, each worker would start its own."""
    for item in items:
        if _SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("spark-servers"))


def _pg_unreachable_reason() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=3):
            return None
    except Exception as exc:
        return f"PostgreSQL at {PG_URL} unreachable: {exc}"


@pytest.fixture(scope="session")
def pg_server() -> str:
    """The PostgreSQL server URL; skips (fails under CI=true) when unreachable."""
    reason = _pg_unreachable_reason()
    if reason:
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return PG_URL


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    import psycopg

    name = f"smv_{uuid.uuid4().hex[:12]}"
    admin = pg_server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    base = pg_server.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    from sqlalchemy import create_engine  # noqa: F401 - engines are disposed by the tests

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def catalog_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A catalog URL, once for SQLite and once for PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/catalog.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """The one SparkSession of the test session."""
    from sparkmv.storage.spark import get_spark

    session = get_spark("local[2]", SPARK_CONF)
    yield session
    session.stop()


TPCH_SCALE_FACTOR = 0.01


@pytest.fixture(scope="session")
def tpch(spark, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """TPC-H SF 0.01 as Hive-partitioned Parquet (:func:`sparkmv.demo.data.prepare`), generated
    once per test session; tests may add files to it, never remove any."""
    from sparkmv.demo.data import prepare

    return prepare(spark, tmp_path_factory.mktemp("tpch"), TPCH_SCALE_FACTOR)


ClientFactory = Callable[..., "object"]


@pytest.fixture
def make_client(spark, tmp_path: Path) -> Iterator[Callable[..., object]]:  # type: ignore[no-untyped-def]
    """Build Clients on a fresh home (``catalog_url`` optional) sharing the SparkSession.

    Query rewrite is off unless asked for: tests compare an MV with its query run over the
    base tables, which rewrite would answer from the MV itself."""
    from sparkmv.client.client import Client

    made: list[Client] = []

    def factory(home: Path | None = None, catalog_url: str | None = None, rewrite: bool = False) -> Client:
        c = Client(home=home or tmp_path / "home", catalog_url=catalog_url, spark=spark, rewrite=rewrite)
        made.append(c)
        return c

    yield factory
    for c in made:
        c.close()


@pytest.fixture
def client(make_client):  # type: ignore[no-untyped-def]
    """A Client on a fresh SQLite home."""
    return make_client()
