"""The incremental-refresh differential harness can fail: its comparison is exact for
DECIMAL and typed values and tolerant for DOUBLE only, its DuckDB AVG of a DECIMAL rounds as
Spark does, its simplest scenario holds what the fast profile relies on, and its checker
reports a wrong MV, a wrong refresh mode, and the scenario with both."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.differential.harness import diff_settings
from tests.differential.ivm_compare import compare
from tests.differential.ivm_harness import (
    TABLES,
    IvmMv,
    IvmScenario,
    avg_decimal,
    ivm_scenarios,
    mv_of,
    run_oracle,
)
from tests.differential.test_incremental import (
    IvmChecker,
    IvmMismatch,
    expect_build,
    expect_failed,
    expect_mode,
    open_world,
)

COLUMNS = ["k", "s"]


def test_compare_doubles_within_relative_tolerance_only() -> None:
    assert compare(COLUMNS, [("a", 0.1 + 0.2)], ["s", "k"], [(0.3, "a")]) is None
    assert compare(COLUMNS, [("a", 1e6 * (1 + 5e-10))], COLUMNS, [("a", 1e6)]) is None
    assert compare(COLUMNS, [("a", 0.1 + 0.2 - 0.3)], COLUMNS, [("a", 0.0)]) is None  # 5.6e-17: rounding
    assert compare(COLUMNS, [("a", 1000000.01)], COLUMNS, [("a", 1e6)]) == "\n".join(
        [
            "columns: ['k', 's']",
            "MV rows: 1, oracle rows: 1",
            "  missing from MV: ('a', 1000000.0)",
            "  extra in MV:     ('a', 1000000.01)",
        ]
    )


def test_compare_decimals_exactly_and_types_apart() -> None:
    assert compare(COLUMNS, [("a", Decimal("1.10"))], COLUMNS, [("a", Decimal("1.1"))]) is None
    assert compare(COLUMNS, [("a", Decimal("0.333333"))], COLUMNS, [("a", Decimal("0.333334"))]) is not None
    # A DOUBLE where a DECIMAL is due, or an integer, is a difference however close.
    assert compare(COLUMNS, [("a", 1.1)], COLUMNS, [("a", Decimal("1.1"))]) is not None
    assert compare(COLUMNS, [("a", 1)], COLUMNS, [("a", Decimal("1"))]) is not None


def test_compare_multiplicities_and_hidden_columns() -> None:
    text = compare(COLUMNS, [("a", 1.0), ("a", 1.0)], COLUMNS, [("a", 1.0), (None, 1.0)])
    assert text == "\n".join(
        [
            "columns: ['k', 's']",
            "MV rows: 2, oracle rows: 2",
            "  missing from MV: (None, 1.0)",
            "  extra in MV:     ('a', 1.0)",
        ]
    )
    assert compare([*COLUMNS, "__smv_count"], [], COLUMNS, []) == (
        "columns differ: MV ['k', 's', '__smv_count'], oracle ['k', 's']"
    )


cents = st.integers(-(10**11) + 1, 10**11 - 1)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(st.lists(st.one_of(cents, st.none()), max_size=40))
def test_duckdb_avg_of_decimal_rounds_half_up_like_spark(values: list[int | None]) -> None:
    amounts = [None if c is None else Decimal(c).scaleb(-2) for c in values]
    rows = ", ".join("(NULL)" if a is None else f"({a})" for a in amounts) or "(NULL)"
    sql = f"SELECT {avg_decimal('amt', 'duck')} FROM (SELECT CAST(a AS DECIMAL(12,2)) AS amt FROM (VALUES {rows}) t(a))"
    with duckdb.connect() as con:
        ((got,),) = con.sql(sql).fetchall()
    present = [a for a in amounts if a is not None]
    want = (sum(present) / len(present)).quantize(Decimal("0.000001"), ROUND_HALF_UP) if present else None
    assert got == want and (got is None or got.as_tuple().exponent == -6)


def first_example(steps: tuple[int, int]) -> IvmScenario:
    """The example the fast profile runs: the first one hypothesis generates (not ``find``'s
    shrunk one, which prefers fewer choices over the simplest ones)."""
    seen: list[IvmScenario] = []

    @settings(diff_settings(), max_examples=1)
    @given(ivm_scenarios(steps=steps))
    def grab(scenario: IvmScenario) -> None:
        seen.append(scenario)

    grab()
    return seen[0]


def test_simplest_scenario_has_null_keys_new_groups_and_both_join_sides() -> None:
    # Hypothesis starts from the simplest example: it already tests what matters.
    s = first_example((2, 2))
    fact = [r for _, rows in s.files("fact") for r in rows]
    assert None in [p for p, _ in s.files("fact")] and None in [r[1] for r in fact]
    assert None in [r[2] for r in fact] and None in [r[3] for r in fact]
    first, second = s.steps
    assert [a.table for a in first.appends] == ["fact"] and not first.appends[0].new_partition
    assert {a.table for a in second.appends} == set(TABLES) and second.appends[0].new_partition
    old_keys = {r[1] for r in fact}
    new_keys = {r[1] for st_ in s.steps for a in st_.appends if a.table == "fact" for r in a.rows}
    assert new_keys - old_keys and new_keys & old_keys  # new groups, and appends to old ones
    dim_new = {r[0] for a in second.appends if a.table == "dim" for r in a.rows}
    fact_new = {r[1] for a in second.appends if a.table == "fact" for r in a.rows}
    assert dim_new & fact_new and dim_new & old_keys  # new dim rows join new and old fact rows


def _dropping_first_row(mv: IvmMv) -> IvmMv:
    return IvmMv(mv.name, mv.partition_by, mv.spark_sql, f"SELECT * FROM ({mv.duck_sql}) q ORDER BY ALL OFFSET 1")


@pytest.mark.spark
def test_checker_reports_a_wrong_mv_and_a_wrong_mode(spark: Any, tmp_path: Path) -> None:
    from sparkmv.client.client import Client

    scenario = first_example((2, 2))
    good = mv_of("agg")
    with Client(home=tmp_path / "home", spark=spark) as client:
        world = open_world(client, dict.fromkeys(TABLES, "parquet"), scenario, tmp_path)
        checker = IvmChecker(client, world, [good], {good.name: "FULL"}, "self-test", scenario.describe())
        checker.create()
        checker.refresh("the first build", {good.name: expect_build})  # consistent: no error

        relations = world.relations()
        with duckdb.connect() as con:
            columns, rows = run_oracle(con, good.oracle_sql(relations))
            wrong_columns, wrong_rows = run_oracle(con, _dropping_first_row(good).oracle_sql(relations))
        assert checker.diff(good, columns, rows, "the oracle") is None
        assert len(wrong_rows) == len(rows) - 1 >= 3
        (dropped,) = set(rows) - set(wrong_rows)
        text = checker.diff(good, wrong_columns, wrong_rows, "a wrong oracle")
        assert text is not None and text.startswith("differs from a wrong oracle:\ncolumns: ")
        assert (
            f"MV rows: {len(rows)}, oracle rows: {len(wrong_rows)}" in text
            and f"extra in MV:     ({dropped[0]!r}, " in text
        )

        # refresh() raises with the scenario when the contents differ (the run itself is fine)...
        bad = IvmChecker(client, world, [_dropping_first_row(good)], {good.name: "FULL"}, "self-test", "SCENARIO")
        wrong = r"(?s)case self-test, after X:\nMV mv_agg: differs from the oracle:.*SCENARIO"
        with pytest.raises(IvmMismatch, match=wrong):
            bad.refresh("X", {good.name: expect_mode("FULL", changed=False)})

        # ... and when a run has another mode than expected (here FULL instead of INCREMENTAL).
        for append in scenario.steps[0].appends:
            world.append(append)
        with pytest.raises(IvmMismatch) as err:
            checker.refresh("step 1", {good.name: expect_mode("INCREMENTAL", changed=True)})
        lines = str(err.value).splitlines()
        assert lines[0] == "case self-test, after step 1:"
        assert re.match(
            r"MV mv_agg: expected SUCCESS with mode INCREMENTAL, got run \d+: SUCCESS, mode FULL ", lines[1]
        )
        assert "initial fact (id, k, v, amt, x, s, d, p):" in lines and "writes applied:" in lines

        # A run expected to fail that succeeds, and an MV expected unchanged that changed.
        for append in scenario.steps[1].appends:
            world.append(append)
        with pytest.raises(IvmMismatch) as err:
            checker.refresh("step 2", {good.name: expect_failed}, unchanged=[good.name])
        lines = str(err.value).splitlines()
        failed = r"MV mv_agg: expected FAILED \(change not append-only\), got run \d+: SUCCESS, mode FULL"
        assert re.match(failed, lines[1])
        assert lines[2] == "MV mv_agg: differs from its contents before the step (the run failed):"


def test_fast_examples_append_every_step_kind_to_every_storage_with_real_data() -> None:
    from tests.differential.ivm_examples import STEP_KINDS, missing_data, seeded_ivm_scenario
    from tests.differential.test_incremental import (
        ALL_SHAPES,
        BREAKING_KINDS,
        BREAKING_SEEDS,
        IVM_CASES,
        seeded_breaking,
    )

    covered: set[tuple[str, str, str]] = set()
    for case in IVM_CASES:
        s = seeded_ivm_scenario(case.seed, case.steps)
        assert missing_data(s) == [] and case.fast, case.id
        kinds = dict(case.kinds)
        for kind, step in zip(case.steps, s.steps, strict=True):
            tables, fresh = STEP_KINDS[kind]
            assert [a.table for a in step.appends] == list(tables)
            assert all(a.new_partition == fresh for a in step.appends if a.table == "fact" and fresh is not None)
            covered |= {(kind, t, kinds[t]) for t in tables}
    assert "none" in {k for case in IVM_CASES for k in case.steps}
    wanted = {(k, t, storage) for k, (ts, _) in STEP_KINDS.items() for t in ts for storage in ("parquet", "iceberg")}
    assert wanted - covered == set()
    assert {shape for case in IVM_CASES for shape in case.fast} == set(ALL_SHAPES)
    layouts = {tuple(sorted(set(dict(case.kinds).values()))) for case in IVM_CASES}
    assert layouts == {("parquet",), ("iceberg",), ("iceberg", "parquet")}
    for kinds in BREAKING_KINDS.values():
        for kind in kinds:
            scenario, change = seeded_breaking(kind, BREAKING_SEEDS[kind])
            assert missing_data(scenario) == [] and change.kind == kind and change.rows
