"""The fast profile's fixed examples catch a planted bug of each class: a dropped partition,
a stale file, a wrong join side, a SUM off by one row. Each test plants one bug, runs one
fast case's example with the fewest writes that expose it, and expects the checker's
:class:`Mismatch` naming the MV. (Hypothesis's first generated example, which the fast
profile ran before, caught none of the stale file, the RIGHT JOIN and the SUM bug: all its
values are 0, its dimension is empty and every partition has one file.)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.differential import test_differential
from tests.differential.examples import Scenario, fast_example
from tests.differential.harness import MvSpec, render, tables_of
from tests.differential.test_differential import CASES, Case, Mismatch, run_scenario

pytestmark = [pytest.mark.spark, pytest.mark.differential]

NAMES_THE_MV = r"(?m)^MV mv: "


def example_of(case_id: str, writes: int) -> tuple[Case, Scenario]:
    """Case ``case_id`` and its fast example cut to its first ``writes`` writes."""
    case = next(c for c in CASES if c.id == case_id)
    scenario = fast_example(case.id, case.ptype, tables_of(render(case.shape, case.expr)))
    assert scenario is not None, f"{case_id} is not a fast case"
    return case, dataclasses.replace(scenario, steps=scenario.steps[:writes])


def plant_in_query(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    """Make the MV's Spark SQL say ``new`` where it says ``old``; the oracle keeps ``old``."""

    def planted(shape: str, expr: str) -> MvSpec:
        spec = render(shape, expr)
        assert old in spec.spark_sql
        return dataclasses.replace(spec, spark_sql=spec.spark_sql.replace(old, new))

    monkeypatch.setattr(test_differential, "render", planted)


def test_a_dropped_partition_is_caught(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The planner forgets the last MV partition of a refresh of several: the dimension's
    # rewrite changes every partition of the join MV.
    from sparkmv.refresh import planner

    select = planner._select

    def dropping(*args: Any) -> list[Any]:
        chosen = select(*args)
        return chosen[:-1] if len(chosen) > 1 else chosen

    monkeypatch.setattr(planner, "_select", dropping)
    case, scenario = example_of("date-identity-join", writes=1)
    assert scenario.steps[0].kind == "dim_rewrite"
    with pytest.raises(Mismatch, match=NAMES_THE_MV):
        run_scenario(spark, case, scenario, tmp_path)


def test_a_stale_file_is_caught(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pinning a Parquet table leaves out the newest file of a partition of several files
    # (the fast examples start with two files in one partition).
    from sparkmv.sources import parquet

    pin = parquet.pin

    def stale(*args: Any) -> Any:
        pinned = pin(*args)
        for key, part in list(pinned.partitions.items()):
            if len(part.files) > 1 and part.file_stats:
                newest = max(range(len(part.files)), key=lambda i: part.file_stats[i][1])  # type: ignore[index]
                files = [f for i, f in enumerate(part.files) if i != newest]
                stats = [s for i, s in enumerate(part.file_stats) if i != newest]
                pinned.partitions[key] = dataclasses.replace(part, files=files, file_stats=stats)
        return pinned

    monkeypatch.setattr(parquet, "pin", stale)
    case, scenario = example_of("int-identity-agg", writes=0)
    with pytest.raises(Mismatch, match=NAMES_THE_MV):
        run_scenario(spark, case, scenario, tmp_path)


def test_a_wrong_join_side_is_caught(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The MV's query keeps the dimension rows no fact row matches (a LEFT JOIN, keeping the
    # unmatched fact rows, is caught the same way: the example has both from its first build).
    plant_in_query(monkeypatch, " JOIN dim d", " RIGHT JOIN dim d")
    case, scenario = example_of("date-identity-join", writes=0)
    with pytest.raises(Mismatch, match=NAMES_THE_MV):
        run_scenario(spark, case, scenario, tmp_path)


def test_a_sum_off_by_one_row_is_caught(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The MV's SUM leaves out one row of each group (its smallest value).
    plant_in_query(monkeypatch, "sum(f.v) AS sv", "sum(f.v) - min(f.v) AS sv")
    case, scenario = example_of("int-identity-agg", writes=0)
    with pytest.raises(Mismatch, match=NAMES_THE_MV):
        run_scenario(spark, case, scenario, tmp_path)
