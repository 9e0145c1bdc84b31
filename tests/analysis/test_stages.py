"""The split of a query into nested stages (:mod:`sparkmv.analysis.stages`), pure sqlglot."""

from __future__ import annotations

import pytest

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.stages import split_stages
from sparkmv.demo.tpch_queries import TPCH_QUERIES

Q13_INNER = TPCH_QUERIES["q13"].replace("LEFT OUTER JOIN", "JOIN")


def test_aggregate_of_aggregate_is_delta_rules_over_a_keyed_stage() -> None:
    a = analyze_incremental(parse_query(Q13_INNER))
    assert a.reason is None and a.technique == "delta rules"
    assert [s.name for s in a.stages] == ["__smv_stage_1"]
    inner = a.stages[0].analysis
    assert inner.technique == "affected-key recomputation" and inner.keyed is not None
    assert inner.keyed.keys == ("c_custkey",)
    expected = "SELECT c_count, COUNT(*) AS custdist, COUNT(*) AS __smv_count FROM __smv_stage_1 AS c_orders"
    assert a.staged_sql == expected + " GROUP BY c_count"
    assert "__smv_stage_" not in a.augmented_sql  # what a full recomputation runs: the stage inlined
    assert a.augmented_sql.startswith("SELECT c_count, COUNT(*) AS custdist, COUNT(*) AS __smv_count FROM (SELECT")


Q13_COLUMNS = {
    "default.customer": ["c_custkey", "c_name", "c_comment"],
    "default.orders": ["o_orderkey", "o_custkey", "o_comment"],
}


def test_q13_is_maintained_once_its_columns_are_qualified() -> None:
    """As written, Q13's inner LEFT JOIN reads unqualified columns (which side is
    c_custkey's?); with the base tables' columns they are qualified and the query is
    maintained through the customer key its derived table groups by; its stage split
    (the derived table by affected-key recomputation) is the form without that key."""
    reason = analyze_incremental(parse_query(TPCH_QUERIES["q13"])).reason
    assert reason == (
        "inner stage __smv_stage_1: c_custkey is not incrementally maintainable: "
        "a column beside an outer join must be qualified by its table"
    )
    a = analyze_incremental(parse_query(TPCH_QUERIES["q13"]), Q13_COLUMNS)
    assert a.reason is None and a.technique == "affected-key recomputation of a correlation key", a.reason
    assert a.correlated is not None and a.correlated.bound == ("c_custkey", "o_custkey")
    assert "FROM customer LEFT OUTER JOIN orders ON customer.c_custkey = orders.o_custkey" in a.augmented_sql


def test_q17_correlated_scalar_subquery_is_decorrelated() -> None:
    a = analyze_incremental(parse_query(TPCH_QUERIES["q17"]))
    assert a.reason is None and a.technique == "delta rules"
    assert a.stages[0].analysis.augmented_sql == (
        "SELECT l_partkey AS __smv_k0, AVG(l_quantity) AS __smv_v0 FROM lineitem GROUP BY l_partkey"
    )
    assert "JOIN __smv_stage_1 ON __smv_stage_1.__smv_k0 = p_partkey" in a.staged_sql
    assert "l_quantity < (0.2 * __smv_stage_1.__smv_v0)" in a.staged_sql
    plan = maintenance_plan(a)
    assert plan[4] == (
        "    state: its rows per key with __smv_count, __smv_sum_1, __smv_nn_1, kept beside the MV's table; the "
        "delta rules merge the change into it (recomputed over the old and new input when no state matches the "
        "consumed snapshots)"
    )
    assert plan[:3] == [
        "maintenance plan: delta rules",
        "  columns: avg_yearly (FORMULA)",
        "  inner stage __smv_stage_1 (affected-key recomputation of keys (__smv_k0)), read as a virtual input "
        "(new, old, signed delta of its touched keys):",
    ]


def test_q15_one_stage_read_twice_and_q20_nested_in() -> None:
    q15 = analyze_incremental(parse_query(TPCH_QUERIES["q15"]))
    assert q15.reason is None and q15.technique == "affected-key recomputation"
    assert [s.name for s in q15.stages] == ["__smv_stage_1"] and q15.staged_sql.count("__smv_stage_1") == 2
    q20 = analyze_incremental(parse_query(TPCH_QUERIES["q20"]))
    assert q20.reason is None and q20.keyed is not None and q20.keyed.keys == ("s_name", "s_address")
    assert "s_suppkey IN (SELECT ps_suppkey FROM __smv_stage_1)" in q20.staged_sql
    stage = q20.stages[0].analysis
    assert stage.keyed is not None and stage.keyed.keys == ("ps_suppkey",) and len(stage.keyed.subquery_terms) == 2


def test_stages_nest() -> None:
    sql = (
        "SELECT t.cnt, count(*) AS m FROM (SELECT s.n AS c, count(*) AS cnt FROM "
        "(SELECT k, count(*) AS n FROM f GROUP BY k) s GROUP BY s.n) t GROUP BY t.cnt"
    )
    a = analyze_incremental(parse_query(sql))
    assert a.reason is None and [s.name for s in a.stages] == ["__smv_stage_1"]
    middle = a.stages[0].analysis
    assert [s.name for s in middle.stages] == ["__smv_stage_2"]
    assert middle.staged_sql == "SELECT s.n AS c, COUNT(*) AS cnt FROM __smv_stage_2 AS s GROUP BY s.n"
    assert "__smv_stage_" not in a.augmented_sql
    assert any(line.startswith("    inner stage __smv_stage_2") for line in maintenance_plan(a))


@pytest.mark.parametrize(
    "sql",
    [
        # COUNT is 0, not NULL, on no rows: the inner join would drop rows the query keeps.
        "SELECT sum(a) AS s FROM t WHERE t.q < (SELECT count(*) FROM u WHERE u.k = t.k)",
        "SELECT sum(a) AS s FROM t WHERE t.q < (SELECT coalesce(max(u.v), 0) FROM u WHERE u.k = t.k)",
        # An outer reference outside an equality.
        "SELECT sum(a) AS s FROM t WHERE t.q < (SELECT max(u.v) FROM u WHERE u.k = t.k AND u.z > t.z)",
        # Not correlated, or grouped.
        "SELECT sum(a) AS s FROM t WHERE t.q < (SELECT max(u.v) FROM u)",
        "SELECT sum(a) AS s FROM t WHERE t.q < (SELECT max(u.v) FROM u WHERE u.k = t.k GROUP BY u.z)",
    ],
)
def test_not_decorrelated(sql: str) -> None:
    _, stages = split_stages(parse_query(sql))
    assert stages == []
    assert analyze_incremental(parse_query(sql)).reason is not None


def test_correlation_sides() -> None:
    """A column qualified by a table of the subquery is its own; of two unqualified ones,
    the left one."""
    for where, inner, outer in [
        ("u.k = t.k", "u.k", "t.k"),
        ("t.k = u.k", "u.k", "t.k"),
        ("k2 = t.k", "k2", "t.k"),
        ("l_partkey = p_partkey", "l_partkey", "p_partkey"),
    ]:
        sql = f"SELECT sum(a) AS s FROM t WHERE t.q < (SELECT max(v) FROM u WHERE {where})"
        outer_query, stages = split_stages(parse_query(sql))
        assert stages[0][1].sql().startswith(f"SELECT {inner} AS __smv_k0,"), where
        assert f"__smv_stage_1.__smv_k0 = {outer}" in outer_query.sql(), where


TPCH_COLUMNS = {
    "default.lineitem": ["l_orderkey", "l_partkey", "l_suppkey", "l_quantity", "l_commitdate", "l_receiptdate"],
    "default.orders": ["o_orderkey", "o_custkey", "o_orderdate", "o_orderpriority", "o_totalprice"],
    "default.customer": ["c_custkey", "c_name"],
    "default.t": ["k", "a", "b"],
    "default.u": ["uk", "ux", "c"],
}


def test_q4_exists_is_an_inner_join_with_a_stage_of_distinct_keys() -> None:
    """With the base tables' columns, Q4's EXISTS becomes a join with the distinct order
    keys of the late lineitems, so the delta rules maintain the count per priority (a
    semi-join stage is preferred to its correlation key: its reads are pruned by range)."""
    a = analyze_incremental(parse_query(TPCH_QUERIES["q4"]), TPCH_COLUMNS)
    assert a.reason is None and a.technique == "delta rules" and a.keyed is None
    (stage,) = a.stages
    assert stage.analysis.augmented_sql == (
        "SELECT DISTINCT l_orderkey AS __smv_k0 FROM lineitem WHERE l_commitdate < l_receiptdate"
    )
    assert stage.analysis.keyed is not None and stage.analysis.keyed.keys == ("__smv_k0",)
    assert a.staged_sql.startswith(
        "SELECT o_orderpriority, COUNT(*) AS order_count, COUNT(*) AS __smv_count FROM orders "
        "JOIN __smv_stage_1 ON __smv_stage_1.__smv_k0 = o_orderkey WHERE o_orderdate >= "
    )
    assert "EXISTS" not in a.staged_sql
    # Without the columns, which side of l_orderkey = o_orderkey is the subquery's is a guess:
    # the whole query stays under affected-key recomputation of its group keys.
    written = analyze_incremental(parse_query(TPCH_QUERIES["q4"]))
    assert written.keyed is not None and written.keyed.keys == ("o_orderpriority",)


def test_q18_in_of_a_grouped_subquery_is_a_join_with_its_stage() -> None:
    a = analyze_incremental(parse_query(TPCH_QUERIES["q18"]), TPCH_COLUMNS)
    assert a.reason is None and a.technique == "delta rules"
    assert a.stages[0].analysis.augmented_sql == (
        "SELECT l_orderkey AS __smv_k0 FROM lineitem GROUP BY l_orderkey HAVING SUM(l_quantity) > 300"
    )
    assert "JOIN __smv_stage_1 ON __smv_stage_1.__smv_k0 = o_orderkey WHERE c_custkey = o_custkey" in a.staged_sql


@pytest.mark.parametrize(
    ("sql", "stage", "on"),
    [
        (
            "SELECT t.a FROM t WHERE t.b > 0 AND t.a IN (SELECT ux FROM u WHERE uk = k AND c = 1)",
            "SELECT DISTINCT ux AS __smv_k0, uk AS __smv_k1 FROM u WHERE c = 1",
            "__smv_stage_1.__smv_k0 = t.a AND __smv_stage_1.__smv_k1 = k WHERE t.b > 0",
        ),
        (
            "SELECT a, count(*) AS n FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.uk = t.k) GROUP BY a",
            "SELECT DISTINCT u.uk AS __smv_k0 FROM u",
            "__smv_stage_1.__smv_k0 = t.k GROUP BY a",
        ),
        (
            "SELECT a FROM t WHERE (b > 1 AND (EXISTS (SELECT 1 FROM u WHERE uk = k)))",
            "SELECT DISTINCT uk AS __smv_k0 FROM u",
            "__smv_stage_1.__smv_k0 = k WHERE b > 1",
        ),
    ],
)
def test_semijoin_split(sql: str, stage: str, on: str) -> None:
    outer_query, stages = split_stages(parse_query(sql), known=TPCH_COLUMNS)
    assert [(n, b.sql()) for n, b in stages] == [("__smv_stage_1", stage)]
    assert outer_query.sql().endswith("JOIN __smv_stage_1 ON " + on)


@pytest.mark.parametrize(
    "sql",
    [
        # Negated, under OR, uncorrelated EXISTS, a non-equality correlation, grouped by another column.
        "SELECT a FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE uk = k)",
        "SELECT a FROM t WHERE b > 1 OR EXISTS (SELECT 1 FROM u WHERE uk = k)",
        "SELECT a FROM t WHERE a NOT IN (SELECT ux FROM u)",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE c = 1)",
        "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE uk = k AND ux <> a)",
        "SELECT a FROM t WHERE a IN (SELECT ux FROM u GROUP BY c)",
        "SELECT a FROM t WHERE a IN (SELECT max(ux) FROM u)",
    ],
)
def test_not_a_semijoin_stage(sql: str) -> None:
    _, stages = split_stages(parse_query(sql), known=TPCH_COLUMNS)
    assert stages == []


def test_unqualified_correlation_needs_the_columns() -> None:
    """Two unqualified columns: with the schema, both of the subquery (a local filter, no
    correlation: an uncorrelated EXISTS, left alone); without it, no semi-join split."""
    sql = "SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE uk = ux)"
    assert split_stages(parse_query(sql), known=TPCH_COLUMNS)[1] == []
    assert split_stages(parse_query("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u WHERE uk = k)"))[1] == []


@pytest.mark.parametrize(
    ("sql", "above"),
    [
        (  # an aggregate branch of a UNION ALL: a stage, projected under the union's names
            "SELECT a FROM t UNION ALL SELECT a FROM u GROUP BY a",
            "SELECT a FROM t UNION ALL SELECT __smv_stage_1.__smv_c0 AS a FROM __smv_stage_1",
        ),
        (  # ROLLUP: the UNION ALL of one GROUP BY per set, each a stage
            "SELECT a, b, count(DISTINCT x) AS n FROM t GROUP BY ROLLUP (a, b)",
            "SELECT __smv_stage_1.__smv_c0 AS a, __smv_stage_1.__smv_c1 AS b, __smv_stage_1.__smv_c2 AS n "
            "FROM __smv_stage_1 UNION ALL SELECT __smv_stage_2.__smv_c0 AS a, __smv_stage_2.__smv_c1 AS b, "
            "__smv_stage_2.__smv_c2 AS n FROM __smv_stage_2 UNION ALL SELECT __smv_stage_3.__smv_c0 AS a, "
            "__smv_stage_3.__smv_c1 AS b, __smv_stage_3.__smv_c2 AS n FROM __smv_stage_3",
        ),
    ],
)
def test_union_branches_are_stages(sql: str, above: str) -> None:
    analysis = analyze_incremental(parse_query(sql))
    assert (analysis.reason, analysis.staged_sql) == (None, above)
