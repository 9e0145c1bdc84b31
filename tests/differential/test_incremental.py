"""Differential tests of incremental refresh: after every refresh an MV created
with ``refresh_mode = 'INCREMENTAL'`` equals, as a multiset, DuckDB's result of the same
query over the current base files, and every refresh after the first build is INCREMENTAL.

Each case is a storage layout of the four base tables (all Parquet, all Iceberg, or mixed;
see :mod:`tests.differential.ivm_harness`) and a set of MV shapes (projection + WHERE,
UNION ALL, 2- and 3-table inner joins, GROUP BY with SUM / COUNT / AVG / MIN / MAX over
DECIMAL, BIGINT, DOUBLE, strings and dates, a global aggregate, join + GROUP BY, partitioned
and unpartitioned). Hypothesis generates the initial files and a sequence of append-only
steps (one base, several bases at once, new groups, new partitions, rarely no change);
after the first build and after every step each MV is refreshed and checked:

- its base tables changed: the run ends SUCCESS with mode :data:`EXPECT_MODE` (the first
  build: FULL); none changed: SKIPPED (or SUCCESS with :data:`EXPECT_MODE`);
- its visible columns have no ``__smv_*`` state column, and its rows equal the oracle's
  (DOUBLE within a relative 1e-9, everything else exact).

A second test makes one change that has no change log (a Parquet file rewritten or
removed, an Iceberg overwrite or row delete whose consumed snapshot was expired): the
strict INCREMENTAL MV's run ends FAILED and the MV keeps its rows; an AUTO MV over the
same query falls back to PCT or FULL with a reason, and is correct, also after a later
append.

Run: ``pytest tests/differential/test_incremental.py`` (fast profile, part of ``make
test``: one fixed seeded example per case, :mod:`tests.differential.ivm_examples`, with the
step kinds of ``IvmCase.steps``, and one per breaking change kind); ``SPARKMV_DIFF_PROFILE=slow``
(``make test-slow``): those and ten generated examples per case, every shape, three to five
steps. ``SPARKMV_IVM_REFRESH_MODE=FULL`` creates the MVs with that mode instead and expects
it: a check of the oracle side alone.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.differential.harness import profile_name, seeded_settings
from tests.differential.ivm_compare import compare
from tests.differential.ivm_examples import seeded_choose, seeded_ivm_scenario
from tests.differential.ivm_harness import (
    TABLES,
    IvmMv,
    IvmScenario,
    IvmWorld,
    Positions,
    Row,
    Step,
    arrow_rows,
    draw_rows,
    drawing,
    ivm_scenarios,
    mv_of,
    run_oracle,
)

pytestmark = [pytest.mark.spark, pytest.mark.differential]

# The mode every refresh after the first build must have (flip while incremental refresh is
# being built), and the refresh_mode the MVs are created with.
EXPECT_MODE = "INCREMENTAL"
REFRESH_MODE = "INCREMENTAL"
MODE_ENV = "SPARKMV_IVM_REFRESH_MODE"
if os.environ.get(MODE_ENV):  # e.g. FULL: the oracle side checked with full refreshes
    REFRESH_MODE = EXPECT_MODE = os.environ[MODE_ENV].strip().upper()
STRICT = REFRESH_MODE == "INCREMENTAL"


class IvmMismatch(AssertionError):
    """An MV differs from the oracle, or a refresh did not end as incremental refresh must."""


def _reason(run: Any) -> str | None:
    # The run's mode reason (RefreshRun.reason, or a `mode_reason` where a run has one).
    return getattr(run, "mode_reason", None) or getattr(run, "reason", None)


def run_text(run: Any) -> str:
    """One line describing a run: id, state, mode, reason, error."""
    text = f"run {run.run_id}: {run.state}, mode {run.mode} ({_reason(run)})"
    return text + (f", error: {run.error}" if run.error else "")


Expectation = Callable[[Any], str | None]


def expect_build(run: Any) -> str | None:
    """The first refresh: a full build."""
    ok = run.state == "SUCCESS" and run.mode == "FULL"
    return None if ok else f"first build expected SUCCESS with mode FULL, got {run_text(run)}"


def expect_mode(mode: str | None, changed: bool) -> Expectation:
    """A refresh after a step: ``changed`` (a base of the MV changed): SUCCESS with ``mode``
    (any mode when None, for AUTO); unchanged: SKIPPED, or SUCCESS with ``mode``."""

    def check(run: Any) -> str | None:
        if run.state == "SUCCESS" and (mode is None or run.mode == mode):
            return None
        if not changed and run.state == "SKIPPED":
            return None
        want = f"SUCCESS with mode {mode}" if mode else "SUCCESS"
        want += "" if changed else " (or SKIPPED: no base changed)"
        return f"expected {want}, got {run_text(run)}"

    return check


class IvmChecker:
    """Refreshes the MVs of one example and checks runs and contents against the oracle.

    Args:
        modes: MV name -> the ``refresh_mode`` it is created with.
        scenario: the generated input, printed in every failure report.
    """

    def __init__(
        self, client: Any, world: IvmWorld, mvs: list[IvmMv], modes: dict[str, str], case_id: str, scenario: str
    ) -> None:
        self.client, self.world, self.mvs, self.modes = client, world, mvs, modes
        self.case_id, self.scenario = case_id, scenario
        self.history: dict[str, list[str]] = {mv.name: [] for mv in mvs}
        self.last: dict[str, tuple[list[str], list[Row]]] = {}

    def create(self) -> None:
        """CREATE every MV (deferred).

        Raises:
            IvmMismatch: when a CREATE fails (with the report).
        """
        from sparkmv.errors import SparkMvError

        for mv in self.mvs:
            try:
                self.client.sql(mv.ddl(self.modes[mv.name]))
            except SparkMvError as exc:
                raise IvmMismatch(self.report("CREATE", {mv.name: [f"CREATE failed: {exc}"]})) from exc

    def report(self, step: str, problems: dict[str, list[str]]) -> str:
        """The failure report: problems, the MVs, the scenario, the writes and every run."""
        found = [f"MV {name}: {text}" for name, texts in problems.items() for text in texts]
        mvs = [f"  {m.ddl(self.modes[m.name])}\n    oracle (DuckDB): {m.duck_sql}" for m in self.mvs]
        runs = [f"  {name}: {'; '.join(texts)}" for name, texts in self.history.items()]
        return "\n".join(
            [
                f"case {self.case_id}, after {step}:",
                *found,
                f"base tables: {self.world.kinds}",
                "MVs:",
                *mvs,
                self.scenario,
                "writes applied:",
                *(f"  {i + 1}. {w}" for i, w in enumerate(self.world.log)),
                "refresh runs so far:",
                *runs,
            ]
        )

    def refresh(self, step: str, expectations: dict[str, Expectation], unchanged: Iterable[str] = ()) -> None:
        """Refresh the MVs named in ``expectations`` (in order), check each run, then compare
        each with the oracle (the MVs in ``unchanged``: with their previous contents).

        Raises:
            IvmMismatch: naming every MV whose run or contents are wrong.
        """
        problems: dict[str, list[str]] = {}
        for name, expect in expectations.items():
            run = self.client.refresh(name)
            self.history[name].append(f"{step}: {run_text(run)}")
            problem = expect(run)
            if problem:
                problems.setdefault(name, []).append(problem)
        relations = self.world.relations()
        with duckdb.connect() as con:
            for mv in self.mvs:
                if mv.name not in expectations:
                    continue
                if mv.name in unchanged:
                    columns, rows = self.last[mv.name]
                    problem = self.diff(mv, columns, rows, "its contents before the step (the run failed)")
                else:
                    columns, rows = run_oracle(con, mv.oracle_sql(relations))
                    problem = self.diff(mv, columns, rows, "the oracle")
                    self.last[mv.name] = (columns, rows)
                if problem:
                    problems.setdefault(mv.name, []).append(problem)
        if problems:
            raise IvmMismatch(self.report(step, problems))

    def diff(self, mv: IvmMv, columns: list[str], rows: list[Row], against: str) -> str | None:
        """None when MV ``mv`` shows exactly ``columns`` and holds ``rows``, else the diff."""
        df = self.client.table(mv.name)
        star = self.client.sql(f"SELECT * FROM {mv.name}")
        hidden = [c for c in [*df.columns, *star.columns] if c.lower().startswith("__smv_")]
        if hidden:
            return f"state columns visible: table() {df.columns}, SELECT * {star.columns}"
        text = compare(list(df.columns), [tuple(r) for r in df.collect()], columns, rows)
        return None if text is None else f"differs from {against}:\n{text}"


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IvmCase:
    """A storage layout of the base tables and the MV shapes maintained over it.

    ``fast``: the shapes of the fast profile (together, the fast cases cover every shape,
    each storage, and a mix); the slow profile runs ``shapes``. ``steps``: the step kinds
    (:data:`tests.differential.ivm_examples.STEP_KINDS`) of the case's fixed example, run in
    both profiles; together the cases append every step kind to every storage kind.
    """

    id: str
    kinds: tuple[tuple[str, str], ...]
    shapes: tuple[str, ...]
    fast: tuple[str, ...]
    steps: tuple[str, ...]
    seed: int

    def mvs(self) -> list[IvmMv]:
        return [mv_of(s) for s in (self.shapes if profile_name() == "slow" else self.fast)]


ALL_SHAPES = ("proj", "union", "join", "join3", "agg", "agg_by_k", "agg_by_p", "global", "join_agg")
P, ICE = "parquet", "iceberg"
IVM_CASES = [
    IvmCase("parquet", tuple((t, P) for t in TABLES), ALL_SHAPES, ("proj", "agg", "global"), ("fact", "all"), 16),
    IvmCase(
        "iceberg",
        tuple((t, ICE) for t in TABLES),
        ALL_SHAPES,
        ("agg_by_p", "join", "join_agg"),
        ("fact_new", "all", "none"),
        39,
    ),
    IvmCase(
        "mixed",
        (("fact", ICE), ("more", P), ("dim", P), ("reg", ICE)),
        ("union", "join", "join3", "join_agg", "agg_by_p"),
        ("union", "join3", "join_agg"),
        ("fact", "dim", "more_reg"),
        46,
    ),
    IvmCase(
        "mixed-parquet-fact",
        (("fact", P), ("more", ICE), ("dim", ICE), ("reg", P)),
        ("union", "join", "join3", "join_agg", "agg_by_k"),
        ("agg_by_k", "union", "join3"),
        ("fact_new", "dim", "more_reg"),
        50,
    ),
]


def open_world(client: Any, case_kinds: dict[str, str], scenario: IvmScenario, root: Path) -> IvmWorld:
    """The world of ``scenario`` under ``root``: every base table created with its initial files."""
    world = IvmWorld(root / "data", case_kinds, client)
    for table in TABLES:
        world.create(table, scenario.files(table))
    return world


def _after_step(mvs: list[IvmMv], step: Step, modes: dict[str, str]) -> dict[str, Expectation]:
    return {
        mv.name: expect_mode(EXPECT_MODE if modes[mv.name] == REFRESH_MODE else None, bool(mv.tables & step.tables))
        for mv in mvs
    }


def run_ivm_scenario(spark: Any, case: IvmCase, scenario: IvmScenario, root: Path) -> None:
    """Create the world and the MVs of ``case``, refresh and check after the first build and
    after every step of ``scenario``."""
    from sparkmv.client.client import Client

    mvs = case.mvs()
    modes = {mv.name: REFRESH_MODE for mv in mvs}
    with Client(home=root / "home", spark=spark) as client:
        world = open_world(client, dict(case.kinds), scenario, root)
        checker = IvmChecker(client, world, mvs, modes, case.id, scenario.describe())
        checker.create()
        checker.refresh("the first build", {mv.name: expect_build for mv in mvs})
        for i, step in enumerate(scenario.steps):
            for append in step.appends:
                world.append(append)
            if not step.appends:
                world.log.append("no change")
            checker.refresh(f"step {i + 1} ({step.describe()})", _after_step(mvs, step, modes))


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in IVM_CASES if c.mvs()])
def test_incremental_mv_equals_duckdb_after_every_refresh(spark: Any, case: IvmCase) -> None:
    @seeded_settings()
    @given(scenario=ivm_scenarios())
    @example(scenario=seeded_ivm_scenario(case.seed, case.steps))
    def check(scenario: IvmScenario) -> None:
        with tempfile.TemporaryDirectory(prefix="sparkmv-ivm-") as tmp:
            run_ivm_scenario(spark, case, scenario, Path(tmp))

    check()


# ---------------------------------------------------------------------------------------------
# a change that is not append-only
@dataclass(frozen=True)
class Breaking:
    """A change of ``fact`` that is not an append.

    Attributes:
        kind: ``rewrite`` (a Parquet file rewritten in place), ``remove`` (a Parquet file
            deleted), ``overwrite`` (Iceberg: every row replaced), ``delete`` (Iceberg: the
            rows of one id deleted); an Iceberg change also expires the snapshot the MVs
            consumed (a delete alone is a signed change, applied incrementally).
        pick: which file / id (modulo the number there are).
        rows: the new rows of ``rewrite`` and ``overwrite``.
    """

    kind: str
    pick: int
    rows: tuple[Row, ...]


BREAKING_KINDS = {"parquet": ("rewrite", "remove"), "iceberg": ("delete", "overwrite")}
# The seeds of the fixed examples (their initial files pass ivm_examples.missing_data).
BREAKING_SEEDS = {"rewrite": 60, "remove": 66, "delete": 71, "overwrite": 73}


def apply_breaking(world: IvmWorld, change: Breaking) -> None:
    """Apply ``change`` to ``fact`` as an outside writer, and log it."""
    if world.kinds["fact"] == "parquet":
        files = sorted((world.root / "fact").rglob("*.parquet"))
        path = files[change.pick % len(files)]
        if change.kind == "rewrite":
            pq.write_table(arrow_rows("fact", change.rows, None, with_p=False), path)
            world.log.append(f"rewrite {path.relative_to(world.root)} with {list(change.rows)}")
        else:
            path.unlink()
            world.log.append(f"remove {path.relative_to(world.root)}")
        return
    from pyiceberg.expressions import EqualTo

    from sparkmv.names import ObjectName

    table = world.client.runtime.iceberg.load(ObjectName("default", "fact"))
    consumed = table.current_snapshot()
    if change.kind == "overwrite":
        table.overwrite(arrow_rows("fact", change.rows, "p0", with_p=True))
        world.log.append(f"Iceberg overwrite of fact with p=p0 rows {list(change.rows)}")
    else:
        ids = sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())
        target = ids[change.pick % len(ids)]
        table.delete(EqualTo("id", target))
        world.log.append(f"Iceberg delete from fact where id = {target}")
    # Deletes and overwrites are signed changes; with the consumed snapshot
    # expired their retracted rows are no longer readable: no change log.
    if consumed is not None:
        table.maintenance.expire_snapshots().by_id(consumed.snapshot_id).commit()
        world.log.append(f"snapshot {consumed.snapshot_id} (consumed) expired")


@st.composite
def breaking_scenarios(draw: st.DrawFn, storage: str) -> tuple[IvmScenario, Breaking]:
    """A scenario of two steps, and the change made between them."""
    scenario = draw(ivm_scenarios(steps=(2, 2)))
    pos = Positions()
    pos.next["fact"] = 500  # ids apart from the generated ones
    rows = draw_rows(drawing(draw), "fact", pos, 1, 3)
    return scenario, Breaking(draw(st.sampled_from(BREAKING_KINDS[storage])), draw(st.integers(0, 9)), rows)


def run_breaking_scenario(spark: Any, storage: str, scenario: IvmScenario, change: Breaking, root: Path) -> None:
    """Build, step 1, the breaking change, step 2; check the strict and the AUTO MV."""
    from sparkmv.client.client import Client

    strict, auto = mv_of("agg_by_p", "strict_mv"), mv_of("agg_by_p", "auto_mv")
    modes = {strict.name: REFRESH_MODE, auto.name: "AUTO"}
    kinds = {t: storage for t in TABLES}
    with Client(home=root / "home", spark=spark) as client:
        world = open_world(client, kinds, scenario, root)
        text = f"{scenario.describe()}\nbetween steps 1 and 2: {change}"
        checker = IvmChecker(client, world, [strict, auto], modes, f"non-append-{storage}", text)
        checker.create()
        checker.refresh("the first build", {strict.name: expect_build, auto.name: expect_build})
        first, second = scenario.steps
        for append in first.appends:
            world.append(append)
        checker.refresh(f"step 1 ({first.describe()})", _after_step([strict, auto], first, modes))
        apply_breaking(world, change)
        fallback: dict[str, Expectation] = {auto.name: expect_fallback}
        if STRICT:
            checker.refresh("the change that is not an append", {strict.name: expect_failed}, [strict.name])
        else:
            fallback[strict.name] = expect_mode(EXPECT_MODE, True)
        checker.refresh("the change that is not an append", fallback)
        for append in second.appends:
            world.append(append)
        after = {auto.name: expect_mode(None, bool(auto.tables & second.tables))}
        if not STRICT:
            after[strict.name] = expect_mode(EXPECT_MODE, bool(strict.tables & second.tables))
        checker.refresh(f"step 2 ({second.describe()})", after)


def expect_failed(run: Any) -> str | None:
    """Strict INCREMENTAL after a change that is not an append: the run fails."""
    return None if run.state == "FAILED" else f"expected FAILED (change not append-only), got {run_text(run)}"


def expect_fallback(run: Any) -> str | None:
    """AUTO after a change that is not an append: PCT or FULL, saying why."""
    if run.state == "SUCCESS" and run.mode in ("PCT", "FULL") and _reason(run):
        return None
    return f"expected SUCCESS with mode PCT or FULL and a reason, got {run_text(run)}"


def seeded_breaking(kind: str, seed: int) -> tuple[IvmScenario, Breaking]:
    """The fixed example of breaking change ``kind``: an append to an existing ``fact``
    partition (``rewrite``, ``delete``) or no change (cheaper: ``remove``, ``overwrite``),
    the change, an append to a new partition."""
    choose = seeded_choose(seed + 100)
    pos = Positions()
    pos.next["fact"] = 500  # ids apart from the scenario's
    change = Breaking(kind, random.Random(seed).randrange(10), draw_rows(choose, "fact", pos, 2, 3))
    first = "fact" if kind in ("rewrite", "delete") else "none"
    return seeded_ivm_scenario(seed, (first, "fact_new")), change


@pytest.mark.parametrize("storage", ["parquet", "iceberg"])
def test_change_not_append_only_fails_incremental_and_auto_falls_back(spark: Any, storage: str) -> None:
    def check(generated: tuple[IvmScenario, Breaking]) -> None:
        with tempfile.TemporaryDirectory(prefix="sparkmv-ivm-") as tmp:
            run_breaking_scenario(spark, storage, *generated, Path(tmp))

    test = given(generated=breaking_scenarios(storage))(check)
    for kind in BREAKING_KINDS[storage]:  # every kind, in both profiles
        test = example(generated=seeded_breaking(kind, BREAKING_SEEDS[kind]))(test)
    seeded_settings()(test)()
