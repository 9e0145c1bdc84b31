"""Spark servers for the tests, started from the installed pyspark: a standalone cluster (one
master, one worker) and a Spark Connect server, all on 127.0.0.1 with free ports.

Each server is a JVM started in its own process group (``spark-class`` and ``spark-submit``
end in ``exec``, so the pid is the JVM's); :meth:`SparkServer.stop` ends that group by
its pid, with whatever it started (a worker's executors). Readiness is observed, never slept
for: the master's JSON (``/json/``) listing an ALIVE worker, the Connect server's port
accepting connections (it listens only once its SparkSession is up).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
# The JVMs of these tests live for seconds on tiny data: most of their CPU goes to the C2 JIT
# compiler. C1 alone and the serial collector halve it (a demo run: 66 -> 36 CPU-seconds).
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark package (``bin/``, ``jars/``)."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is not installed"
    return Path(spec.origin).parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection((HOST, port), timeout=1).close()
        return True
    except OSError:
        return False


def server_env(root: Path) -> dict[str, str]:
    """Environment of the servers and of sparkmv processes that use them: bind to 127.0.0.1
    (not the host's other addresses), no configuration from elsewhere, small daemons."""
    conf_dir = root / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARKMV_", "SPARK_", "PYSPARK_"))}
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_CONF_DIR=str(conf_dir),
        SPARK_LOCAL_IP=HOST,
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_DAEMON_JAVA_OPTS=JAVA_OPTIONS,
        PYSPARK_PYTHON=sys.executable,
    )
    return env


@dataclass
class SparkServer:
    """One server JVM: its process and log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, name: str, command: list[str], env: dict[str, str], log: Path) -> SparkServer:
        """Start ``command`` in its own process group, output to ``log``."""
        with log.open("ab") as out:
            proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return cls(name, proc, log)

    def check_alive(self) -> None:
        """Fail with the end of its log when the server has exited."""
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"the Spark {self.name} exited with code {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after 20 s; waits for the JVM to end."""
        for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 20.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # what the group started (executors) goes too, even when the JVM ended first
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, servers: list[SparkServer]) -> Any:
    """Poll ``predicate`` every 0.2 s until it returns something truthy; fail when a server
    exited or after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        for server in servers:
            server.check_alive()
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


@dataclass
class StandaloneCluster:
    """A Spark standalone master and one worker (``cores`` cores, ``memory`` for executors).

    Applications should take one core per executor and at most ``cores_per_app`` cores
    (:meth:`app_conf`), so two drivers fit at once (a killed one's executor may linger until
    the master notices, while the recovering one starts).
    """

    root: Path
    master_port: int
    webui_port: int
    worker_webui_port: int
    cores: int = 2
    memory: str = "1g"
    servers: list[SparkServer] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``."""
        return f"spark://{HOST}:{self.master_port}"

    @classmethod
    def start(cls, root: Path) -> StandaloneCluster:
        """Start the master and the worker (not waiting: see :meth:`wait_ready`)."""
        cluster = cls(root, free_port(), free_port(), free_port())
        env = server_env(root)
        work = root / "work"
        work.mkdir(parents=True, exist_ok=True)
        spark_class = ["bash", str(spark_home() / "bin" / "spark-class")]  # whatever the file mode
        master = [
            *spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            str(cluster.master_port),
            "--webui-port",
            str(cluster.webui_port),
        ]
        worker = [
            *spark_class,
            "org.apache.spark.deploy.worker.Worker",
            cluster.master_url,
            "--host",
            HOST,
            "--cores",
            str(cluster.cores),
            "--memory",
            cluster.memory,
            "--webui-port",
            str(cluster.worker_webui_port),
            "--work-dir",
            str(work),
        ]
        # The worker retries its registration until the master is up: both start at once.
        cluster.servers.append(SparkServer.start("master", master, env, root / "master.log"))
        cluster.servers.append(SparkServer.start("worker", worker, env, root / "worker.log"))
        return cluster

    def master_state(self) -> dict[str, Any] | None:
        """The master's JSON (``http://127.0.0.1:<webui>/json/``), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.webui_port}/json/", timeout=2) as answer:
                return dict(json.load(answer))
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> list[dict[str, Any]]:
        """The workers the master lists as ALIVE."""
        state = self.master_state() or {}
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def wait_ready(self, timeout: float = 180) -> None:
        """Wait until the master lists the worker as ALIVE."""
        wait_until(self.alive_workers, timeout, f"a worker to register with {self.master_url}", self.servers)

    def app_conf(self, cores_per_app: int = 1) -> dict[str, str]:
        """Spark configuration of a driver on this cluster: 1-core executors of 512 MiB, at
        most ``cores_per_app`` cores, the driver reachable on 127.0.0.1."""
        return {
            "spark.executor.cores": "1",
            "spark.cores.max": str(cores_per_app),
            "spark.executor.memory": "512m",
            "spark.driver.memory": "1g",
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.driver.extraJavaOptions": JAVA_OPTIONS,
            "spark.executor.extraJavaOptions": JAVA_OPTIONS,
            "spark.sql.shuffle.partitions": "2",
        }

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master."""
        for server in reversed(self.servers):
            server.stop()


@dataclass
class ConnectServer:
    """A Spark Connect server (``SparkConnectServer`` through ``spark-submit``) on
    ``local[2]``, on the same machine and so the same filesystem as the tests."""

    root: Path
    port: int
    server: SparkServer | None = None

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``."""
        return f"sc://{HOST}:{self.port}"

    @property
    def event_log_dir(self) -> Path:
        """Where the server's Spark event log is written (job starts and ends are flushed at once)."""
        return self.root / "events"

    @classmethod
    def start(cls, root: Path) -> ConnectServer:
        """Start the server (not waiting: see :meth:`wait_ready`)."""
        server = cls(root, free_port())
        server.event_log_dir.mkdir(parents=True, exist_ok=True)
        conf = {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(server.port),
            "spark.ui.enabled": "false",
            "spark.driver.host": HOST,
            "spark.driver.bindAddress": HOST,
            "spark.driver.extraJavaOptions": JAVA_OPTIONS,
            "spark.sql.shuffle.partitions": "2",
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{server.event_log_dir}",
            "spark.eventLog.compress": "false",
            "spark.eventLog.rolling.enabled": "false",
        }
        command = [
            "bash",
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            CONNECT_SERVER_CLASS,
            "--master",
            "local[2]",
            "--driver-memory",
            "1g",
            "--name",
            "sparkmv tests: Spark Connect",
        ]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        # spark-submit sizes this server's JVM as a daemon's: SPARK_DAEMON_MEMORY, not --driver-memory.
        env = {**server_env(root), "SPARK_DAEMON_MEMORY": "1g"}
        server.server = SparkServer.start("Connect server", command, env, root / "connect.log")
        return server

    def wait_ready(self, timeout: float = 180) -> None:
        """Wait until the server accepts connections on its port."""
        assert self.server is not None
        wait_until(lambda: listening(self.port), timeout, f"the Spark Connect server at {self.url}", [self.server])

    def stop(self) -> None:
        """Stop the server."""
        if self.server is not None:
            self.server.stop()
