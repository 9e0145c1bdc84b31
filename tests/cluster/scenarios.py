"""How the tests reach a Spark cluster or a Spark Connect server from sparkmv processes, the
Spark event log as the record of what ran there, and the cancel scenario both share.

Every sparkmv process on a cluster or a Connect server is a real subprocess: a Python process
holds one classic SparkContext (the test session's own ``local[2]`` one), and a Spark Connect
session switches pyspark's functions to Connect for the whole process. The test process itself
prepares and checks with the test session's local SparkSession, on the same files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkmv.names import ObjectName
from sparkmv.refresh.lifecycle import job_tag
from tests.helpers import rows_of
from tests.refresh.procs import mv_before_a_long_refresh, object_row, wait_for

SPARKMV = str(Path(sys.executable).with_name("sparkmv"))
WORKER = Path(__file__).with_name("worker.py")

# A self-join: with one key, every chunk of two partitions of 30,000 rows joins ~1.8e9 rows,
# minutes on one core; with 200 rows and 7 keys it is instant.


@dataclass(frozen=True)
class SparkTarget:
    """Where sparkmv processes compute: global CLI options (``--master URL --conf ...`` or
    ``--remote URL``), their environment, and the directory of the Spark event log that
    records the jobs (a driver's own log on a cluster, the server's through Connect)."""

    name: str
    options: list[str]
    env: dict[str, str]
    event_log_dir: Path
    driver_conf: dict[str, str] = field(default_factory=dict)

    def command(self, *args: str) -> list[str]:
        """``sparkmv`` with this target's options and the driver's own ``--conf`` settings."""
        conf = [item for key, value in self.driver_conf.items() for item in ("--conf", f"{key}={value}")]
        return [SPARKMV, *self.options, *conf, *args]

    def environ(self, home: Path, **extra: str) -> dict[str, str]:
        """The environment of a sparkmv process on ``home``."""
        return {**self.env, "SPARKMV_HOME": str(home), **extra}

    def cli(self, home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run one ``sparkmv`` command on this target to completion."""
        return subprocess.run(
            self.command(*args), env=self.environ(home), capture_output=True, text=True, timeout=timeout
        )

    def spawn(self, home: Path, args: list[str], log: Path, **extra: str) -> subprocess.Popen[bytes]:
        """Start ``sparkmv ARGS`` on this target in its own process group (output to ``log``)."""
        with log.open("ab") as out:
            return subprocess.Popen(
                self.command(*args),
                env=self.environ(home, **extra),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def worker(self, home: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
        """Run ``worker.py ARGS`` (the Python API) on this target; its JSON answer."""
        conf = [item for key, value in self.driver_conf.items() for item in ("--conf", f"{key}={value}")]
        done = subprocess.run(
            [sys.executable, str(WORKER), *args, *self.options, *conf],
            env=self.environ(home),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def cli_local(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A ``sparkmv`` command that needs no Spark (``cancel``, ``status``), on ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKMV_")}
    return subprocess.run([SPARKMV, "--home", str(home), *args], env=env, capture_output=True, text=True, timeout=60)


# -- the Spark event log ----------------------------------------------------------------------------
def job_events(directory: Path) -> list[dict[str, Any]]:
    """Job start and end events of every event log under ``directory`` (uncompressed, not
    rolled; Spark flushes these two events at once, so a running application's log has them),
    each with ``"log"``: the file it is in (job ids are per application)."""
    events: list[dict[str, Any]] = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        for line in path.read_text(errors="replace").splitlines():
            if '"SparkListenerJob' not in line:
                continue
            try:
                events.append({**json.loads(line), "log": str(path)})
            except ValueError:  # a line still being written
                continue
    return events


JobKey = tuple[str, int]
"""A job: its event log file and its id in that application."""


def started_jobs(directory: Path) -> set[JobKey]:
    """Every job started so far in the event logs under ``directory``."""
    return {(e["log"], int(e["Job ID"])) for e in job_events(directory) if e["Event"] == "SparkListenerJobStart"}


def carries(event: dict[str, Any], tag: str) -> bool:
    """True when a job start event carries ``tag``: as is (a classic SparkContext job tag) or
    as a Spark Connect session tag (``SparkConnect_SessionTag_..._Tag_<tag>``)."""
    tags = str((event.get("Properties") or {}).get("spark.job.tags") or "").split(",")
    return any(t == tag or t.endswith(f"_Tag_{tag}") for t in tags)


def tagged_jobs(directory: Path, tag: str, earlier: set[JobKey]) -> dict[JobKey, dict[str, Any] | None]:
    """Every job not in ``earlier`` that carries ``tag`` -> its result (``{"Result":
    "JobSucceeded"}``, or ``"JobFailed"`` with its ``"Exception"``), None while it runs."""
    events = job_events(directory)
    jobs: dict[JobKey, dict[str, Any] | None] = {}
    for e in events:
        key = (e["log"], int(e["Job ID"]))
        if e["Event"] == "SparkListenerJobStart" and key not in earlier and carries(e, tag):
            jobs[key] = None
    for e in events:
        key = (e["log"], int(e["Job ID"]))
        if e["Event"] == "SparkListenerJobEnd" and key in jobs:
            jobs[key] = e["Job Result"]
    return jobs


def event_log_conf(directory: Path) -> dict[str, str]:
    """Driver settings that write its Spark event log under ``directory`` as plain JSON lines."""
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{directory}",
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


# -- cancelling a running refresh -------------------------------------------------------------------
def cancel_a_running_refresh(target: SparkTarget, make_client: Any, tmp_path: Path) -> None:
    """A refresh on ``target`` whose Spark job runs long is cancelled from another process:
    its jobs there end cancelled, the run ends CANCELLED, the MV and its snapshot are unchanged.

    The MV is built on small data by the test session's own SparkSession; the data then grows
    so that the refresh's first chunk runs for minutes.
    """
    client, home, before, snapshot = mv_before_a_long_refresh(make_client, tmp_path)

    log = tmp_path / "refresh.log"
    earlier = started_jobs(target.event_log_dir)  # a Connect server's log holds other tests' jobs
    proc = target.spawn(home, ["sql", "REFRESH MATERIALIZED VIEW mv"], log)
    try:
        run_id = int(wait_for(lambda: _running_run(client, proc, log), 180, "the refresh to start").current_run_id)
        tag = job_tag(run_id)
        wait_for(lambda: _job_running(target, proc, log, tag, earlier), 180, f"a Spark job tagged {tag} to run")
        answer = cli_local(home, "cancel", "mv")
        cancelled = time.monotonic()
        assert answer.returncode == 0 and f"cancel requested for run {run_id}" in answer.stdout, answer.stderr
        wait_for(lambda: object_row(client).state == "IDLE", 60, "the run to end")
        elapsed = time.monotonic() - cancelled
        code = proc.wait(timeout=120)
    finally:
        _reap(proc)
    output = log.read_text(errors="replace")
    assert code == 1, output
    assert f"error: refresh run {run_id} of 'mv' CANCELLED: cancelled" in output, output
    assert elapsed < 20, f"the run ended {elapsed:.1f} s after the cancel"

    # A Connect server interrupts the operation at once and records its jobs' ends shortly after.
    jobs = wait_for(lambda: _ended(target, tag, earlier), 30, f"the jobs tagged {tag} to end")
    killed = [r for r in jobs.values() if r and r["Result"] == "JobFailed"]
    assert killed and all("SPARK_JOB_CANCELLED" in r["Exception"]["Message"] for r in killed), jobs

    run = next(r for r in client.runs("mv") if r.run_id == run_id)
    assert (run.state, run.chunks_done) == ("CANCELLED", 0), run
    assert client.runtime.iceberg.load(ObjectName.parse("mv")).current_snapshot().snapshot_id == snapshot
    assert rows_of(client.table("mv")) == before, "a cancelled refresh leaves the MV unchanged"
    location = client.runtime.iceberg.load(ObjectName.parse("mv")).location()
    staging = Path(location.removeprefix("file://")) / "data" / f"run-{run_id}"
    assert not staging.exists(), "a cancelled run's staging is discarded"


def _running_run(client: Any, proc: subprocess.Popen[bytes], log: Path) -> Any:
    _check_running(proc, log)
    row = object_row(client)
    return row if row.state != "IDLE" and row.current_run_id else None


LONG_JOB_SECONDS = 3.0
"""A tagged job still running this long after its submission is the refresh's long one: the
short jobs before it (the scans of the join's inputs under adaptive execution) end in well
under a second, and a cancel sent while one of them ran could land between jobs, with no
job left to kill."""


def _job_running(target: SparkTarget, proc: subprocess.Popen[bytes], log: Path, tag: str, earlier: set[JobKey]) -> bool:
    """True once a job tagged ``tag`` has been running for :data:`LONG_JOB_SECONDS` (by its
    own submission time in the event log)."""
    _check_running(proc, log)
    events = job_events(target.event_log_dir)
    ended = {(e["log"], int(e["Job ID"])) for e in events if e["Event"] == "SparkListenerJobEnd"}
    now_ms = time.time() * 1000
    return any(
        e["Event"] == "SparkListenerJobStart"
        and (e["log"], int(e["Job ID"])) not in earlier | ended
        and carries(e, tag)
        and now_ms - float(e.get("Submission Time") or now_ms) >= LONG_JOB_SECONDS * 1000
        for e in events
    )


def _ended(target: SparkTarget, tag: str, earlier: set[JobKey]) -> dict[JobKey, dict[str, Any] | None] | None:
    jobs = tagged_jobs(target.event_log_dir, tag, earlier)
    return jobs if jobs and all(result is not None for result in jobs.values()) else None


def _check_running(proc: subprocess.Popen[bytes], log: Path) -> None:
    if proc.poll() is not None:
        raise AssertionError(f"the refresh process exited with {proc.returncode}:\n{log.read_text(errors='replace')}")


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of a spawned process group (its driver JVM), then wait for it."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
