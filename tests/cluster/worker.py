"""A sparkmv process on a Spark cluster or a Spark Connect server, through the Python API.

Run as a script (home from ``SPARKMV_HOME``)::

    python worker.py demo DATA_DIR --master spark://HOST:PORT [--conf KEY=VALUE ...]
    python worker.py demo DATA_DIR --remote sc://HOST:PORT

``demo`` creates the TPC-H demo tables and MVs over ``DATA_DIR`` (prepared at SF 0.01 if it
is not), refreshes each MV and compares it with its query; it prints one JSON object:
``refreshes`` (name -> [state, mode, error]), ``differences`` (name -> how the MV differs from its query
computed by DuckDB, empty when equal), ``master`` (the session's ``spark.master``), ``connect`` and
``seconds`` (how long each part took, for the test log). With
``--master`` the client makes its own classic session (``Client(master=..., conf=...)``); with
``--remote`` the worker makes a Spark Connect session and hands it in (``Client(spark=...)``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

SCALE_FACTOR = 0.01


def _client(options: list[str]) -> Any:
    from sparkmv.client.client import Client

    if options[0] == "--remote":
        from pyspark.sql import SparkSession

        return Client(spark=SparkSession.builder.remote(options[1]).getOrCreate())
    conf = dict(options[i + 1].split("=", 1) for i in range(2, len(options), 2) if options[i] == "--conf")
    return Client(master=options[1], conf=conf)


def difference(client: Any, name: str, query: str) -> str:
    """How MV ``name`` differs from ``query`` computed by DuckDB (:func:`sparkmv.demo.run.difference`):
    empty when equal."""
    from sparkmv.demo.run import difference as compare

    return compare(client, name, query).describe()


def demo(data_dir: Path, options: list[str]) -> dict[str, Any]:
    """Create, refresh and check the demo MVs; the JSON described in the module docstring."""
    from sparkmv.demo.data import DEMO_MVS, prepare
    from sparkmv.demo.run import create_objects
    from sparkmv.storage.spark import is_connect

    started = time.monotonic()
    client = _client(options)
    layout = prepare(client.spark, data_dir, SCALE_FACTOR)
    create_objects(client, layout)
    created = time.monotonic()
    runs = {name: client.refresh(name) for name in DEMO_MVS}
    refreshed = time.monotonic()
    differences = {name: difference(client, name, query) for name, (_p, query, _r) in DEMO_MVS.items()}
    return {
        "refreshes": {name: [run.state, run.mode, run.error] for name, run in runs.items()},
        "differences": differences,
        "master": client.spark.conf.get("spark.master"),
        "connect": is_connect(client.spark),
        "seconds": {
            "session_and_create": round(created - started, 1),
            "refresh": {name: run.duration_seconds for name, run in runs.items()},
            "refresh_total": round(refreshed - created, 1),
            "check": round(time.monotonic() - refreshed, 1),
        },
    }


def main(argv: list[str]) -> int:
    """Worker entry point."""
    if argv[0] != "demo":
        raise SystemExit(f"unknown worker command {argv[0]!r}")
    print(json.dumps(demo(Path(argv[1]), argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
