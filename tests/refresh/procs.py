"""Real processes for the fault, concurrency, cancel, lease and reader tests.

Imported, it offers helpers: hand-made daily partitions, an MV over them cut into several
STRICT chunks with a short lease, spawning workers and the ``sparkmv`` CLI, waiting for a
lease to expire. Run as a script it is the worker (its own JVM, same home and catalog)::

    python procs.py refresh NAME [--force] [--go FILE]   # exit 0 done, 3 busy, 1 error
    python procs.py reload NAME                           # REFRESH TABLE NAME (same exit codes)
    python procs.py read NAME STOP_FILE OUT_FILE          # read the MV until STOP_FILE exists

Home and catalog come from ``SPARKMV_HOME`` / ``SPARKMV_CATALOG_URL``; fault injection
from ``SPARKMV_FAULT`` / ``SPARKMV_FAULT_MODE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PYTHON = sys.executable
SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
HERE = Path(__file__).resolve()
WORKER_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    # Test JVMs live for seconds to minutes over tiny data: the C1 compiler and the serial
    # collector halve their CPU time (measured on the cluster tests' demo check).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
QUERY = "SELECT day, k, sum(v) AS s, count(*) AS n FROM events GROUP BY day, k"
DAYS = [f"2024-01-0{d}" for d in range(1, 7)]
FAST_LEASE = {"lease_timeout_seconds": "2", "lease_renew_seconds": "1"}
GO_DEADLINE_SECONDS = 300
STRICT_2 = {"partition_refresh_strategy": "STRICT", "partition_refresh_number": "2", **FAST_LEASE}


def write_events(root: Path, version: int, days: list[str] = DAYS, rows: int = 200, keys: int = 7) -> None:
    """(Re)write one Parquet file per daily partition of ``root`` (``rows`` rows, ``keys``
    distinct ``k``); values depend on ``version``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i, day in enumerate(days):
        directory = root / f"day={day}"
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.table(
            {"k": [j % keys for j in range(rows)], "v": [version * 1000 + i * 100 + j for j in range(rows)]}
        )
        tmp = directory / ".part-0.parquet.tmp"
        pq.write_table(table, tmp)
        tmp.replace(directory / "part-0.parquet")
        time.sleep(0.01)  # distinct modification times per partition version


def create_mv(client: Any, data: Path, props: dict[str, str], name: str = "mv", query: str = QUERY) -> None:
    """``events`` over ``data`` and MV ``name`` partitioned by ``day`` (refreshed once)."""
    client.sql(f"CREATE EXTERNAL TABLE IF NOT EXISTS events USING parquet LOCATION '{data}'")
    text = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    client.sql(f"CREATE MATERIALIZED VIEW {name} PARTITION BY day PROPERTIES ({text}) AS {query}")


def worker_env(home: Path, catalog_url: str | None, **extra: str) -> dict[str, str]:
    """Environment of a worker or CLI process on ``home`` / ``catalog_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMV_")}
    env["SPARKMV_HOME"] = str(home)
    if catalog_url:
        env["SPARKMV_CATALOG_URL"] = catalog_url
    env["SPARKMV_SPARK_MASTER"] = "local[1]"
    env.update(extra)
    return env


def spawn(
    home: Path,
    catalog_url: str | None,
    args: list[str],
    log: Path,
    fault: str | None = None,
    mode: str = "exit",
    cli: bool = False,
) -> subprocess.Popen[bytes]:
    """Start a worker (or, with ``cli``, the ``sparkmv`` CLI) in its own process group."""
    extra = {"SPARKMV_FAULT": fault, "SPARKMV_FAULT_MODE": mode} if fault else {}
    command = [SPARKMV, *args] if cli else [PYTHON, str(HERE), *args]
    out = log.open("ab")
    return subprocess.Popen(
        command,
        env=worker_env(home, catalog_url, **extra),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def cli(home: Path, catalog_url: str | None, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one ``sparkmv`` CLI command to completion."""
    return subprocess.run(
        [SPARKMV, *args], env=worker_env(home, catalog_url), capture_output=True, text=True, timeout=timeout
    )


def set_properties(client: Any, name: str = "mv", **props: str) -> None:
    """Change MV properties in the catalog (as ``ALTER ... SET`` does), also while it runs."""
    from sparkmv.names import ObjectName

    with client.runtime.catalog.transaction() as s:
        row = client.runtime.catalog.objects.get(s, ObjectName.parse(name))
        client.runtime.catalog.objects.set_fields(s, row.id, properties={**(row.properties or {}), **props})


def object_row(client: Any, name: str = "mv") -> Any:
    """The catalog row of ``name`` as it is now."""
    from sparkmv.names import ObjectName

    with client.runtime.catalog.transaction() as s:
        return client.runtime.catalog.objects.get(s, ObjectName.parse(name))


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def wait_lease_expired(client: Any, name: str = "mv", timeout: float = 30) -> Any:
    """Wait until ``name`` is non-IDLE with an expired lease; returns its row."""
    from sparkmv.catalog.clock import utcnow

    def expired() -> Any:
        row = object_row(client, name)
        ok = row.state != "IDLE" and row.lease_expires is not None and row.lease_expires < utcnow()
        return row if ok else None

    return wait_for(expired, timeout, f"the lease of {name} to expire")


def reap(proc: subprocess.Popen[bytes], timeout: float = 180) -> int:
    """Wait for a spawned process, then kill what is left of its process group (its JVM)."""
    import signal

    try:
        rc = proc.wait(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    return rc


def read_log(log: Path) -> str:
    """Text of a worker's log."""
    return log.read_text(errors="replace") if log.exists() else ""


# -- the worker --------------------------------------------------------------------------------
def _client() -> Any:
    from sparkmv.client.client import Client

    return Client(conf=WORKER_CONF)


def _refresh(argv: list[str]) -> int:
    from sparkmv.errors import BusyError, SparkMvError

    name, force, table = argv[0], "--force" in argv, "--table" in argv
    go = Path(argv[argv.index("--go") + 1]) if "--go" in argv else None
    client = _client()
    if go is not None:  # a start line across processes: poll the go file, 10 ms apart
        # Import the refresh path first: the time to a refusal is then the claim's, not the
        # seconds eight interpreters take to import modules on two cores.
        import sparkmv.refresh.context
        import sparkmv.refresh.jobs.mv
        import sparkmv.refresh.jobs.reload
        import sparkmv.refresh.run_now  # noqa: F401

        Path(f"{go}.ready.{os.getpid()}").touch()
        end = time.monotonic() + GO_DEADLINE_SECONDS
        while not go.exists():
            if time.monotonic() > end:
                print(json.dumps({"error": f"no go file {go} within {GO_DEADLINE_SECONDS} s"}))
                return 1
            time.sleep(0.01)
    started = time.monotonic()
    try:
        run = client.refresh_table(name) if table else client.refresh(name, force=force)
    except BusyError as exc:
        print(json.dumps({"busy": str(exc), "seconds": time.monotonic() - started, "spark": client.runtime.has_spark}))
        return 3
    except SparkMvError as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps({"run_id": run.run_id, "state": run.state, "error": run.error}))
    return 0


def _read(argv: list[str]) -> int:
    name, stop, out = argv[0], Path(argv[1]), Path(argv[2])
    client = _client()
    last = False
    with out.open("a") as f:
        while not last:
            last = stop.exists()  # one more read after the stop signal
            rows = sorted(json.dumps(list(r), default=str) for r in client.table(name).collect())
            f.write(json.dumps({"t": time.time(), "rows": rows}) + "\n")
            f.flush()
    return 0


def main(argv: list[str]) -> int:
    """Worker entry point."""
    command, rest = argv[0], argv[1:]
    if command == "refresh":
        return _refresh(rest)
    if command == "reload":
        return _refresh([*rest, "--table"])
    if command == "read":
        return _read(rest)
    raise SystemExit(f"unknown worker command {command!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


SLOW_QUERY = (
    "SELECT a.day, count(*) AS n, sum(a.v + b.v) AS s FROM events a JOIN events b ON a.day = b.day AND a.k = b.k "
    "GROUP BY a.day"
)
"""A self-join whose first chunk runs for minutes once :func:`grow_for_a_long_refresh` ran."""


def mv_before_a_long_refresh(make_client: Any, tmp_path: Path) -> tuple[Any, Path, list[tuple[Any, ...]], int]:
    """An MV of :data:`SLOW_QUERY` built on small data, whose data then grows so that the
    next refresh's first chunk runs for minutes (to be cancelled while it runs).

    Returns:
        (client, home, the MV's rows, its snapshot id) as built.
    """
    from sparkmv.names import ObjectName
    from tests.helpers import rows_of

    data, home = tmp_path / "events", tmp_path / "home"
    write_events(data, 1, rows=200, keys=7)
    client = make_client(home)
    create_mv(client, data, STRICT_2, query=SLOW_QUERY)
    before = rows_of(client.table("mv"))
    snapshot = client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id
    write_events(data, 2, rows=30_000, keys=1)
    return client, home, before, snapshot
