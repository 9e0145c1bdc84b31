"""One Spark standalone cluster and one Spark Connect server per test session, started from
the installed pyspark on 127.0.0.1 when a test first needs them and stopped at the end (by
their process ids, also when a test failed); see :mod:`tests.cluster.servers`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.scenarios import SparkTarget, event_log_conf
from tests.cluster.servers import ConnectServer, StandaloneCluster, server_env


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and one worker (2 cores, 1 GiB), ready: the master lists the worker ALIVE."""
    cluster = StandaloneCluster.start(tmp_path_factory.mktemp("spark-cluster"))
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A Spark Connect server on ``local[2]``, ready: its port accepts connections."""
    server = ConnectServer.start(tmp_path_factory.mktemp("spark-connect"))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cluster_target(spark_cluster: StandaloneCluster) -> SparkTarget:
    """sparkmv processes on the cluster: ``--master spark://...`` with 1-core executors, each
    driver's event log under the cluster's directory."""
    events = spark_cluster.root / "events"
    return SparkTarget(
        "cluster",
        ["--master", spark_cluster.master_url],
        server_env(spark_cluster.root),
        events,
        {**spark_cluster.app_conf(), **event_log_conf(events)},
    )


@pytest.fixture(scope="session")
def connect_target(connect_server: ConnectServer) -> SparkTarget:
    """sparkmv processes through the Connect server: ``--remote sc://...``."""
    return SparkTarget(
        "connect", ["--remote", connect_server.url], server_env(connect_server.root), connect_server.event_log_dir
    )
