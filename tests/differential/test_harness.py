"""The differential harness can fail: its comparison reports wrong rows, wrong types,
wrong multiplicities and unsuccessful runs, and it catches an MV that differs from its
query (a stale MV, a wrong oracle)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.differential.harness import (
    World,
    compare,
    duck_relation,
    oracle_sql,
    render,
    run_oracle,
    run_problem,
    tables_of,
)
from tests.differential.test_differential import Case, Checker, Mismatch, Scenario

COLUMNS = ["pk", "n"]


def test_compare_equal_multisets_in_any_order_and_column_order() -> None:
    actual = [(date(2024, 1, 2), 1), (None, 2), (None, 2)]
    expected = [(2, None), (1, date(2024, 1, 2)), (2, None)]
    assert compare(COLUMNS, actual, ["n", "pk"], expected) is None


def test_compare_reports_missing_extra_and_multiplicity() -> None:
    text = compare(COLUMNS, [("a", 1), ("a", 1), ("b", 2)], COLUMNS, [("a", 1), ("c", 3)])
    assert text == "\n".join(
        [
            "columns: ['pk', 'n']",
            "MV rows: 3, oracle rows: 2",
            "  missing from MV: ('c', 3)",
            "  extra in MV:     ('a', 1)",
            "  extra in MV:     ('b', 2)",
        ]
    )


def test_compare_keeps_types_apart_and_normalizes_numbers() -> None:
    # A DATE is not a midnight TIMESTAMP; Decimal and float agree after rounding.
    text = compare(COLUMNS, [(date(2024, 1, 2), 1)], COLUMNS, [(datetime(2024, 1, 2), 1)])
    assert text is not None and "missing from MV: (('timestamp', '2024-01-02 00:00:00'), 1)" in text
    assert compare(COLUMNS, [("x", Decimal("1.10"))], COLUMNS, [("x", 1.1000000001)]) is None
    assert compare(COLUMNS, [("x", 1)], ["pk", "other"], [("x", 1)]) == (
        "columns differ: MV ['pk', 'n'], oracle ['pk', 'other']"
    )


@dataclass
class FakeRun:
    run_id: int
    state: str
    error: str | None


def test_run_problem_names_a_failed_run_with_its_error() -> None:
    assert run_problem(FakeRun(1, "SUCCESS", None)) is None
    assert run_problem(FakeRun(2, "SKIPPED", None)) is None
    assert run_problem(FakeRun(3, "FAILED", "boom")) == "refresh run 3 ended FAILED: boom"


def test_oracle_reads_hive_partitions_with_registered_types_and_nulls(tmp_path: Path) -> None:
    world = World(tmp_path, "timestamp")
    world.write_fact(datetime(2024, 1, 2, 3, 4, 5), [(1, "a", 2, 0.5)])
    world.write_fact(None, [(2, None, None, None)])
    columns = [("id", "bigint"), ("k", "string"), ("v", "bigint"), ("amt", "double"), ("p", "timestamp")]
    relation = duck_relation(world.files("fact"), columns, ["p"])
    spec = render("agg", "hour")
    names, rows = run_oracle(oracle_sql(spec, {"fact": relation}))
    assert names == ["pk", "k", "n", "sv", "mn", "mx"]
    assert sorted(rows, key=repr) == sorted(
        [(datetime(2024, 1, 2, 3), "a", 1, 2, 0.5, 1), (None, None, 1, None, None, 2)], key=repr
    )
    empty = duck_relation([], columns, ["p"])
    assert run_oracle(oracle_sql(spec, {"fact": empty}))[1] == []


@pytest.mark.spark
def test_checker_reports_a_stale_mv_and_a_wrong_oracle(spark: Any, tmp_path: Path) -> None:
    from sparkmv.client.client import Client

    case = Case("string", "identity", "agg")
    spec = render(case.shape, case.expr)
    scenario = Scenario(partitions=(("ab", (((1, "a", 2, 0.5),),)),), extra=(), dim=(), steps=())
    world = World(tmp_path / "data", case.ptype)
    world.write_fact("ab", [(1, "a", 2, 0.5)])
    with Client(home=tmp_path / "home", spark=spark) as client:
        checker = Checker(client, world, spec, case.id, scenario)
        checker.register("fact")
        client.sql(spec.ddl())
        checker.refresh_and_check("the initial build")  # consistent: no error
        assert checker.diff(spec, oracle_sql(spec, checker.relations())) is None

        # A deliberately wrong oracle query: count(*) + 1.
        wrong = oracle_sql(spec, checker.relations()).replace("count(*) AS n", "count(*) + 1 AS n")
        assert checker.diff(spec, wrong) == "\n".join(
            [
                "columns: ['pk', 'k', 'n', 'sv', 'mn', 'mx']",
                "MV rows: 1, oracle rows: 1",
                "  missing from MV: ('ab', 'a', 2, 2, 0.5, 1)",
                "  extra in MV:     ('ab', 'a', 1, 2, 0.5, 1)",
            ]
        )

        # The MV made stale behind the harness's back (a write without a refresh).
        world.write_fact("ba", [(7, "b", 1, 1.0)])
        text = checker.diff(spec, oracle_sql(spec, checker.relations()))
        assert text is not None and "missing from MV: ('ba', 'b', 1, 1, 1.0, 7)" in text

        # refresh_and_check raises a Mismatch naming the spec when an MV differs.
        checker.diff = lambda mv, sql: checker.__class__.diff(checker, mv, wrong)  # type: ignore[method-assign]
        with pytest.raises(Mismatch, match=r"(?s)case string-identity-agg, after step X:\nMV mv: columns.*CREATE"):
            checker.refresh_and_check("step X")


def test_fast_examples_hold_real_data_and_every_write_kind() -> None:
    from tests.differential.examples import FAST_WRITES, fact_rows_of, fast_example
    from tests.differential.test_differential import CASES

    fast = [c for c in CASES if c.fast]
    assert sorted(c.id for c in fast) == sorted(FAST_WRITES)
    kinds: dict[str, set[str]] = {}
    for case in fast:
        tables = tables_of(render(case.shape, case.expr))
        s = fast_example(case.id, case.ptype, tables)
        assert s is not None
        rows = fact_rows_of(s)
        ids, vs, amts = [r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows]
        assert len(set(ids)) == len(ids) and None in [r[1] for r in rows] and None in vs and None in amts
        present_v, present_a = [v for v in vs if v is not None], [a for a in amts if a is not None]
        assert min(present_v) < 0 < 10**12 <= max(present_v) and min(present_a) < 0 < 10**7 < max(present_a)
        values = [v for v, _ in s.partitions]
        assert None in values and len(values) >= 3 and max(len(files) for _, files in s.partitions) == 2
        if "dim" in tables:
            fact_keys, dim_keys = {r[1] for r in rows} - {None}, {r[0] for r in s.dim} - {None}
            assert fact_keys - dim_keys and dim_keys - fact_keys and fact_keys & dim_keys and None in dict(s.dim)
        if "extra" in tables:
            ps = [p for p, _ in s.extra]
            assert None in ps and set(ps) - set(values) and set(ps) & set(values) - {None}
        assert len(s.steps) >= 2
        kinds.setdefault(case.ptype, set()).update(w.kind for w in s.steps)
    on_fact = {"add_file", "rewrite_file", "delete_partition", "add_partition"}
    assert all(on_fact <= kinds[ptype] for ptype in ("string", "date", "timestamp")), kinds
    assert set().union(*kinds.values()) == on_fact | {"extra_file", "dim_rewrite"}


def test_fast_example_writes_resolve_as_listed(tmp_path: Path) -> None:
    # add_partition adds a partition that is absent (boolean: re-adds the one just deleted).
    from tests.differential.examples import fast_example

    s = fast_example("boolean-identity-agg", "boolean", {"fact"})
    assert s is not None
    world = World(tmp_path, "boolean")
    for value, files in s.partitions:
        for rows in files:
            world.write_fact(value, rows)
    for w in s.steps:
        world.apply(w, None)
    deleted = world.log[0].removeprefix("delete partition ")
    assert world.log[0].startswith("delete partition p=") and world.log[1].startswith(f"add {deleted}/")
    assert len(world.partition_dirs()) == 3
