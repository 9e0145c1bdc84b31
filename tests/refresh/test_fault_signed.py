"""Kill -9 during an INCREMENTAL refresh that applies retractions: the run is
resumed or redone exactly once.

An Iceberg base table of sparkmv's catalog, an MV with ``refresh_mode = 'INCREMENTAL'``
(SUM, COUNT and MAX per group) built once, then an outside writer's copy-on-write delete
(a group's MAX row and a row of another group) and update (that group's last row
moved into a third group, emptying it) with pyiceberg. A
subprocess refresh (its own JVM) SIGKILLs itself at a fault point: after its publish
commit landed but before the catalog commit, or after staging its chunk but before
recording it. Both cases run side by side (one JVM start of wall time). The lease is left
to expire, recovery runs in this process, and then: the run is SUCCESS and INCREMENTAL,
exactly one snapshot of the MV is tagged with its run id, the MV equals its query computed
by DuckDB, and the next refresh is SKIPPED (the consumed snapshot advanced with the run, so
the retractions are never applied twice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import EqualTo, In

from sparkmv.names import ObjectName
from sparkmv.storage.iceberg import RUN_ID_PROPERTY
from tests.helpers import assert_mv_matches
from tests.refresh.procs import FAST_LEASE, object_row, read_log, reap, spawn, wait_lease_expired

pytestmark = [pytest.mark.slow, pytest.mark.spark]

QUERY = "SELECT k, sum(v) AS s, count(*) AS n, max(v) AS mx FROM fact GROUP BY k"
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64())])
ROWS = [(1, "a", 10), (2, "a", 30), (3, "b", 5), (4, "b", 7), (5, "c", 1), (6, "c", 2)]
# fault point, chunks recorded before the kill
CASES = [("after_publish", {0}), ("after_chunk_staged", set())]


def _setup(make_client: Any, case_dir: Path) -> tuple[Any, Path]:
    """Base table and MV built once, then a copy-on-write delete and an update; returns
    (client, home)."""
    home = case_dir / "home"
    client = make_client(home)
    fact = client.runtime.iceberg.create_table(ObjectName("default", "fact"), SCHEMA, None)
    fact.append(pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in ROWS], schema=SCHEMA))
    props = ", ".join(f"'{k}' = '{v}'" for k, v in {"refresh_mode": "INCREMENTAL", **FAST_LEASE}.items())
    client.sql(f"CREATE MATERIALIZED VIEW mv PROPERTIES ({props}) AS {QUERY}")
    assert_mv_matches(client, "mv", QUERY)
    fact = client.runtime.iceberg.load(ObjectName("default", "fact"))
    fact.delete(In("id", [2, 4]))  # group a loses its MAX (30), b keeps only id 3
    moved = pa.Table.from_pylist([{"id": 3, "k": "c", "v": 50}], schema=SCHEMA)
    fact.overwrite(moved, EqualTo("id", 3))  # b -> c: b disappears, c has a new MAX
    return client, home


def _tagged(client: Any, run_id: int) -> list[Any]:
    table = client.runtime.iceberg.load(ObjectName.parse("mv"))
    return [s for s in table.snapshots() if s.summary is not None and s.summary.get(RUN_ID_PROPERTY) == str(run_id)]


def test_killed_incremental_run_with_retractions_recovers_exactly_once(make_client: Any, tmp_path: Path) -> None:
    running = []
    for fault, before_kill in CASES:
        case_dir = tmp_path / fault
        client, home = _setup(make_client, case_dir)
        log = case_dir / "refresh.log"
        running.append((fault, before_kill, client, spawn(home, None, ["refresh", "mv"], log, fault, "kill"), log))
    for fault, _before, _client, proc, log in running:
        assert reap(proc) == -9, f"{fault}: {read_log(log)}"

    for fault, before_kill, client, _proc, _log in running:
        row = object_row(client, "mv")
        assert row.state != "IDLE", f"{fault}: the killed refresh must leave its run behind"
        run_id = int(row.current_run_id)
        assert {c["chunk_id"] for c in client.chunks(run_id) if c["is_completed"]} == before_kill, fault
        assert len(_tagged(client, run_id)) == (1 if fault == "after_publish" else 0), fault
        wait_lease_expired(client, "mv")
        outcomes = client.recover()
        assert [(o.run_id, o.action) for o in outcomes if o.action != "cleaned"] == [(run_id, "resumed")], fault
        run = next(r for r in client.runs("mv") if r.run_id == run_id)
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), f"{fault}: {run}"
        assert object_row(client, "mv").state == "IDLE", fault
        assert len(_tagged(client, run_id)) == 1, f"{fault}: one publish of the run, never two"
        assert_mv_matches(client, "mv", QUERY)
        assert sorted(tuple(r) for r in client.table("mv").collect()) == [("a", 10, 1, 10), ("c", 53, 3, 50)]
        again = client.refresh("mv")
        assert again.state == "SKIPPED", f"{fault}: the retractions must be applied once: {again}"
