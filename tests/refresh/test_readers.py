"""A reader in another process reads the MV in a loop throughout a refresh of several
chunks: every read is exactly the old contents or exactly the new ones, never a mix."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_mv_matches
from tests.refresh.procs import (
    QUERY,
    STRICT_2,
    create_mv,
    read_log,
    reap,
    set_properties,
    spawn,
    wait_for,
    write_events,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _contents(client: Any) -> list[str]:
    return sorted(json.dumps(list(r), default=str) for r in client.table("mv").collect())


def _reads(out: Path) -> list[tuple[float, list[str]]]:
    """(time the read finished, rows) of every read so far."""
    if not out.exists():
        return []
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    return [(r["t"], r["rows"]) for r in records]


def test_reader_sees_old_or_new_never_a_mix(make_client: Any, tmp_path: Path) -> None:
    data = tmp_path / "events"
    write_events(data, 1)
    home = tmp_path / "home"
    client = make_client(home)
    create_mv(client, data, STRICT_2)
    old = _contents(client)
    # three chunks, at most one started every two seconds: the refresh lasts several seconds
    set_properties(client, throttle_chunks_per_minute="30")
    write_events(data, 2)

    stop, out, log = tmp_path / "stop", tmp_path / "reads.jsonl", tmp_path / "reader.log"
    reader = spawn(home, None, ["read", "mv", str(stop), str(out)], log)
    try:
        wait_for(lambda: len(_reads(out)) >= 2 or reader.poll() is not None, 180, "the reader to start reading")
        assert reader.poll() is None, read_log(log)
        began = time.time()
        run = client.refresh("mv")
        ended = time.time()
        assert run.state == "SUCCESS" and run.chunks_done == 3, run
        new = _contents(client)
        done = len(_reads(out))
        wait_for(lambda: len(_reads(out)) >= done + 2, 120, "reads after the refresh")
        stop.touch()
        assert reap(reader, timeout=120) == 0, read_log(log)
    finally:
        stop.touch()
        if reader.poll() is None:
            reap(reader, timeout=30)

    assert old != new
    reads = _reads(out)
    kinds = ["old" if rows == old else "new" if rows == new else "MIXED" for _t, rows in reads]
    assert "MIXED" not in kinds, kinds
    assert kinds[0] == "old" and kinds[-1] == "new", kinds
    assert kinds == sorted(kinds, key=lambda k: k == "new"), f"once new, always new: {kinds}"
    during = [k for (t, _rows), k in zip(reads, kinds, strict=True) if began < t < ended]
    assert len(during) >= 2, f"the reader must have read during the refresh: {kinds}"
    assert_mv_matches(client, "mv", QUERY)
