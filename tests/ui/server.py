"""Start ``sparkmv ui`` as a real process on a free port (``--port 0``) and stop it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def sparkmv_argv(home: Path, *args: str) -> list[str]:
    """The command line of ``sparkmv --home HOME ARGS`` with this interpreter."""
    return [sys.executable, "-m", "sparkmv.cli.main", "--home", str(home), *args]


def env() -> dict[str, str]:
    """The environment of a sparkmv subprocess: this checkout's sources first."""
    out = dict(os.environ)
    out["PYTHONPATH"] = SRC + os.pathsep + out.get("PYTHONPATH", "")
    return out


@contextmanager
def running_ui(home: Path, *args: str) -> Iterator[tuple[str, str]]:
    """A running ``sparkmv ui --port 0 ARGS``: yields (base URL, first line it printed).

    Waits for the line that names the address (printed once the socket listens), so the
    caller can connect at once; stops the process with SIGINT afterwards.
    """
    proc = subprocess.Popen(
        sparkmv_argv(home, "ui", "--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://[^/ ]+/)", line)
        if match is None:
            proc.wait(timeout=30)
            raise AssertionError(f"sparkmv ui printed {line!r}, stderr {proc.stderr.read() if proc.stderr else ''!r}")
        yield match.group(1), line
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
