"""The kept state of decomposable inner stages (:mod:`sparkmv.refresh.incremental.stage_state`).

A Q17-shaped MV (a correlated ``2 * avg`` subquery decorrelated into a stage of ``AVG`` per
key under a global aggregate) and a Q15-shaped one (a grouped CTE joined and compared with
its MAX): the FULL build writes each stage's state beside the MV's table; INCREMENTAL runs
then merge the change into it (the reason says so) and stay equal to DuckDB's result
through appends, deletes and an update; a state that is gone or incomplete is not read (the
stage is recomputed over both inputs, still exact); the MV's Iceberg table holds no state.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sparkmv.names import ObjectName
from sparkmv.refresh.incremental.stage_state import MARKER, STATE_DIRECTORY
from sparkmv.storage import warehouse
from tests.differential.ivm_harness import IvmMv, arrow_schema
from tests.differential.test_signed import SEED, World, _steps, check
from tests.differential.test_stages import _DECORRELATED, _MAX_OF_CTE, _MAX_OF_CTE_DUCK

pytestmark = [pytest.mark.spark]

AVG = IvmMv("mv_state_avg", None, _DECORRELATED, _DECORRELATED)
MAX_OF_CTE = IvmMv("mv_state_max", None, _MAX_OF_CTE, _MAX_OF_CTE_DUCK)
KEPT = "merge their change into their kept state"
RECOMPUTED = "recompute their touched keys over the old and new input"


def _states(client: Any, mv: IvmMv) -> list[str]:
    """The complete state directories of the MV's stages (relative to its state root)."""
    location = client.runtime.iceberg.load(ObjectName("default", mv.name)).location()
    root = warehouse.join(location, STATE_DIRECTORY)
    found = []
    for stage in warehouse.list_dir(root):
        for entry in warehouse.list_dir(stage.path):
            if warehouse.exists(warehouse.join(entry.path, MARKER)):
                found.append(f"{stage.name}/{entry.name}")
    return sorted(found)


def _world(make_client: Any, tmp_path: Path) -> tuple[Any, World]:
    client = make_client(tmp_path / "home")
    store = client.runtime.iceberg
    for table in ("fact", "dim", "more"):  # the seeded steps change `more` too
        store.create_table(ObjectName("default", table), arrow_schema(table), "p" if table == "fact" else None)
    world = World(client, random.Random(SEED + 17), lambda t: store.load(ObjectName("default", t)))
    for table, n in (("fact", 16), ("fact", 12), ("dim", 6), ("more", 4)):
        world.append(table, n)
    return client, world


def test_stage_state_is_written_merged_and_exact(make_client: Any, tmp_path: Path) -> None:
    client, world = _world(make_client, tmp_path)
    for mv in (AVG, MAX_OF_CTE):
        client.sql(mv.ddl("INCREMENTAL"))
        check(client, world, mv, ["fact", "dim"], "FULL", "the first build")
        (first,) = _states(client, mv)
        assert first.startswith("__smv_stage_1/"), first
        columns = [f.name for f in client.runtime.iceberg.load(ObjectName("default", mv.name)).schema().fields]
        assert not any(c.startswith("__smv_k") or c.startswith("__smv_v") for c in columns), columns

    steps = dict(_steps(world))
    first_step, second_step, _ = steps.values()

    def appended() -> None:
        world.append("fact", 7)

    for step, change in [
        ("an append", appended),
        ("deletes of both sides and an update", first_step),
        ("groups emptied, MAX rows deleted, an append", second_step),
    ]:
        before = {mv.name: _states(client, mv) for mv in (AVG, MAX_OF_CTE)}
        change()
        for mv in (AVG, MAX_OF_CTE):
            run = check(client, world, mv, ["fact", "dim"], "INCREMENTAL", step)
            assert KEPT in (run.reason or ""), run.reason
            assert RECOMPUTED not in (run.reason or ""), run.reason
            after = _states(client, mv)
            # The state read is kept beside the new one (a failed run would read it again).
            assert before[mv.name][-1:] != after[-1:] or len(after) == 2, (before, after)
            assert 1 <= len(after) <= 2, after


def test_missing_or_incomplete_state_is_recomputed_exactly(make_client: Any, tmp_path: Path) -> None:
    client, world = _world(make_client, tmp_path)
    client.sql(AVG.ddl("INCREMENTAL"))
    check(client, world, AVG, ["fact", "dim"], "FULL", "the first build")
    location = client.runtime.iceberg.load(ObjectName("default", AVG.name)).location()
    (state,) = _states(client, AVG)
    warehouse.remove_file(warehouse.join(location, STATE_DIRECTORY, state, MARKER))  # a write cut short
    world.append("fact", 5)
    run = check(client, world, AVG, ["fact", "dim"], "INCREMENTAL", "an append after the state lost its marker")
    assert RECOMPUTED in (run.reason or "") and KEPT not in (run.reason or ""), run.reason

    warehouse.remove_tree(warehouse.join(location, STATE_DIRECTORY))
    world.append("fact", 4)
    run = check(client, world, AVG, ["fact", "dim"], "INCREMENTAL", "an append after the state was deleted")
    assert RECOMPUTED in (run.reason or ""), run.reason

    # A FULL refresh writes the state again; the next INCREMENTAL run reads it.
    run = client.refresh(AVG.name, force=True)
    assert run.state == "SUCCESS" and run.mode == "FULL", run
    assert len(_states(client, AVG)) == 1
    world.append("fact", 3)
    run = check(client, world, AVG, ["fact", "dim"], "INCREMENTAL", "an append after a FULL refresh")
    assert KEPT in (run.reason or ""), run.reason
