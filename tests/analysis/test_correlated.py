"""Which references a correlation key binds (:mod:`sparkmv.analysis.correlated`), and the
analysis that maintains a query through it (TPC-H Q21)."""

from __future__ import annotations

import pytest

from sparkmv.analysis.correlated import TECHNIQUE, correlated_plan
from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.maintenance_plan import maintenance_plan
from sparkmv.analysis.query import parse_query

Q21 = (
    "SELECT s_name, count(*) AS numwait FROM supplier, lineitem l1, orders, nation "
    "WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F' "
    "AND l1.l_receiptdate > l1.l_commitdate "
    "AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey) "
    "AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey "
    "AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate) "
    "AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA' GROUP BY s_name"
)
KNOWN = {
    "default.supplier": ["s_suppkey", "s_name", "s_nationkey"],
    "default.lineitem": ["l_orderkey", "l_suppkey", "l_receiptdate", "l_commitdate"],
    "default.orders": ["o_orderkey", "o_orderstatus"],
    "default.nation": ["n_nationkey", "n_name"],
}


def test_q21_binds_every_lineitem_reference_and_orders_to_the_order_key() -> None:
    plan = correlated_plan(parse_query(Q21), KNOWN)
    assert not isinstance(plan, str), plan
    tables = ("supplier", "lineitem", "orders", "nation", "lineitem", "lineitem")
    assert plan.tables == tuple(f"default.{t}" for t in tables)
    assert plan.bound == (None, "l_orderkey", "o_orderkey", None, "l_orderkey", "l_orderkey")
    assert plan.key == "orders.o_orderkey"
    assert plan.problem({"default.lineitem", "default.orders"}) is None
    assert plan.problem({"default.nation", "default.lineitem"}) == (
        "base table 'default.nation' changed, and a reference to it is bound to no correlation key (orders.o_orderkey)"
    )


def test_q21_filters_of_bound_references_reduce_the_touched_keys() -> None:
    """Each bound outer reference keeps the WHERE conjuncts over its own columns alone (its
    qualifiers dropped): a touched key without a passing row of it touches nothing."""
    plan = correlated_plan(parse_query(Q21), KNOWN)
    assert not isinstance(plan, str)
    # supplier and nation are bound to no key; l2, l3 are inside subqueries.
    assert plan.filters == (None, "l_receiptdate > l_commitdate", "o_orderstatus = 'F'", None, None, None)


@pytest.mark.parametrize(
    ("sql", "filters"),
    [
        (  # TPC-H Q17: the part filter, not the subquery conjunct nor the join equality
            "SELECT sum(l.e) AS s FROM l, p WHERE p.pk = l.pk AND p.brand = 'B' AND p.c IN ('x', 'y') "
            "AND l.q < (SELECT 0.2 * avg(l2.q) FROM l AS l2 WHERE l2.pk = p.pk)",
            (None, "brand = 'B' AND c IN ('x', 'y')", None),
        ),
        (  # a conjunct over two references filters neither; one with a subquery neither
            "SELECT sum(l.e) AS s FROM l, p WHERE p.pk = l.pk AND l.d > p.d AND p.z IN (SELECT z FROM w) "
            "AND l.q < (SELECT avg(l2.q) FROM l AS l2 WHERE l2.pk = p.pk)",
            (None, None, None, None),
        ),
        (  # an outer join: a NULL-extended row passes without a row of the other side
            "SELECT n, count(*) AS c FROM (SELECT a.x, count(b.y) AS n FROM a LEFT JOIN b ON a.x = b.x "
            "WHERE a.f > 0 GROUP BY a.x) AS d GROUP BY n",
            (None, None),
        ),
    ],
)
def test_filters_are_the_conjuncts_of_one_bound_reference(sql: str, filters: tuple[str | None, ...]) -> None:
    plan = correlated_plan(parse_query(sql))
    assert not isinstance(plan, str), plan
    assert plan.filters == filters


def test_unqualified_columns_bind_nothing_without_the_tables_columns() -> None:
    plan = correlated_plan(parse_query(Q21))
    assert not isinstance(plan, str)
    assert plan.bound[2] is None  # o_orderkey = l1.l_orderkey: whose o_orderkey, unknown


def test_a_subquery_equality_of_two_outer_columns_binds_no_outer_table() -> None:
    """Under NOT EXISTS an outer row passes whatever ``a.w = b.z`` says: ``b`` is not bound."""
    sql = (
        "SELECT a.g, count(*) AS n FROM a, b WHERE a.j = b.j AND NOT EXISTS "
        "(SELECT * FROM c WHERE c.k = a.k AND a.w = b.z) GROUP BY a.g"
    )
    plan = correlated_plan(parse_query(sql))
    assert not isinstance(plan, str)
    assert plan.key == "a.k" and plan.bound == ("k", None, "k")


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            "SELECT s.x FROM (SELECT a.x FROM a) s WHERE EXISTS (SELECT 1 FROM c WHERE c.x = s.x)",
            "a subquery beside a derived table",
        ),
        ("SELECT s.x FROM (SELECT a.x FROM a) s JOIN c ON c.x = s.x", "a derived table"),
        ("SELECT a.x FROM a LEFT SEMI JOIN b ON a.x = b.x", "a semi-, anti-, NATURAL or USING join"),
        (
            "SELECT n, count(*) AS c FROM (SELECT a.x, count(*) AS n FROM a NATURAL JOIN b GROUP BY a.x) d GROUP BY n",
            "a semi-, anti-, NATURAL or USING join",
        ),
        (
            "SELECT n, count(*) AS c FROM (SELECT DISTINCT a.x, b.y AS n FROM a JOIN b ON a.x = b.x) d GROUP BY n",
            "a derived table with DISTINCT or a window function",
        ),
        (
            "SELECT n, count(*) AS c FROM (SELECT count(b.y) AS n FROM a JOIN b ON a.x = b.x) d GROUP BY n",
            "a derived table aggregating all its rows",
        ),
        (  # an aggregate sqlglot does not model (an Anonymous call): Spark's own list tells
            "SELECT n, count(*) AS c FROM (SELECT try_sum(b.y) AS n FROM a JOIN b ON a.x = b.x) d GROUP BY n",
            "a derived table aggregating all its rows",
        ),
        (
            "SELECT n, count(*) AS c FROM (SELECT a.w, count(b.y) AS n FROM a LEFT JOIN b ON a.x = b.x "
            "GROUP BY a.w) d GROUP BY n",
            "a derived table grouped by no column of its correlation key",
        ),
        (
            "SELECT a.g, count(*) AS n FROM a GROUP BY a.g HAVING count(*) > (SELECT count(*) FROM c WHERE c.g = a.g)",
            "a subquery outside a WHERE conjunct",
        ),
        (
            "SELECT a.g, (SELECT max(c.v) FROM c WHERE c.k = a.k) AS m FROM a "
            "WHERE EXISTS (SELECT 1 FROM c WHERE c.k = a.k)",
            "a subquery outside a WHERE conjunct",
        ),
        (
            "SELECT a.g FROM a WHERE EXISTS (SELECT 1 FROM c WHERE c.k > a.k)",
            "no correlation key binds a subquery's table",
        ),
    ],
)
def test_refused_shapes(sql: str, why: str) -> None:
    assert correlated_plan(parse_query(sql)) == why


def test_a_subquery_under_or_still_reads_only_its_keys_rows() -> None:
    sql = "SELECT a.g, count(*) AS n FROM a WHERE a.v > 0 OR EXISTS (SELECT 1 FROM c WHERE c.k = a.k) GROUP BY a.g"
    plan = correlated_plan(parse_query(sql))
    assert not isinstance(plan, str) and plan.bound == ("k", "k")


def test_the_analysis_keeps_the_delta_rules_state_and_explains_the_key() -> None:
    analysis = analyze_incremental(parse_query(Q21), KNOWN)
    assert analysis.reason is None and analysis.technique == TECHNIQUE
    assert analysis.keyed is None and analysis.state_columns == ("__smv_count",)
    assert analysis.key_columns == ("s_name",)
    assert "orders.o_orderkey = l1.l_orderkey" in analysis.augmented_sql  # qualified by KNOWN
    lines = maintenance_plan(analysis)
    assert lines[:3] == [
        f"maintenance plan: {TECHNIQUE}",
        "  columns: s_name (group key), numwait (COUNT)",
        "  recomputes the rows of the correlation key (orders.o_orderkey) touched by the change, new minus old:",
    ]
    assert "    default.lineitem bound by l_orderkey" in lines  # l2, l3: no filter of their own
    assert "    default.supplier bound by no key (a change of it recomputes the touched groups)" in lines
    assert (
        "    default.orders bound by o_orderkey; when it is unchanged, only the touched keys its rows "
        "passing o_orderstatus = 'F' hold are recomputed"
    ) in lines


def test_min_max_and_queries_without_known_columns_keep_affected_key_recomputation() -> None:
    with_max = Q21.replace("count(*) AS numwait", "max(l1.l_suppkey) AS top")
    assert analyze_incremental(parse_query(with_max), KNOWN).correlated is None
    assert analyze_incremental(parse_query(Q21)).correlated is None


Q13 = (
    "SELECT c_count, count(*) AS custdist FROM (SELECT c_custkey, count(o_orderkey) AS c_count "
    "FROM customer LEFT OUTER JOIN orders ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%' "
    "GROUP BY c_custkey) AS c_orders GROUP BY c_count"
)
Q22 = (
    "SELECT cntrycode, count(*) AS numcust, sum(c_acctbal) AS totacctbal FROM ("
    "SELECT substring(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer "
    "WHERE c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00) "
    "AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale GROUP BY cntrycode"
)
DERIVED_KNOWN = {
    "default.customer": ["c_custkey", "c_phone", "c_acctbal"],
    "default.orders": ["o_orderkey", "o_custkey", "o_comment"],
}


def test_q13_groups_its_derived_table_by_the_key_its_outer_join_binds() -> None:
    """Q13's derived table counts each customer's orders (a LEFT JOIN on the customer key):
    every row of it is one key's, so the outer count per ``c_count`` is maintained through
    that key, new minus old."""
    analysis = analyze_incremental(parse_query(Q13), DERIVED_KNOWN)
    assert analysis.reason is None and analysis.technique == TECHNIQUE, analysis.reason
    assert analysis.correlated is not None and analysis.correlated.key == "customer.c_custkey"
    assert analysis.correlated.bound == ("c_custkey", "o_custkey")
    assert analysis.state_columns == ("__smv_count",)
    assert analysis.augmented_sql.startswith("SELECT c_count, COUNT(*) AS custdist, COUNT(*) AS __smv_count FROM (")


def test_q22_binds_its_not_exists_and_leaves_the_uncorrelated_average_unbound() -> None:
    analysis = analyze_incremental(parse_query(Q22), DERIVED_KNOWN)
    assert analysis.technique == TECHNIQUE and analysis.correlated is not None, analysis.reason
    assert analysis.correlated.tables == ("default.customer", "default.customer", "default.orders")
    assert analysis.correlated.bound == ("c_custkey", None, "o_custkey")
    assert analysis.correlated.problem({"default.orders"}) is None
    assert analysis.correlated.problem({"default.customer"}) == (
        "base table 'default.customer' changed, and a reference to it is bound to no correlation key "
        "(customer.c_custkey)"
    )


def test_an_outer_join_binds_both_sides_by_its_on_equality() -> None:
    plan = correlated_plan(
        parse_query("SELECT a.x FROM a FULL OUTER JOIN b ON a.x = b.x WHERE EXISTS (SELECT 1 FROM c WHERE c.x = a.x)")
    )
    assert not isinstance(plan, str) and plan.bound == ("x", "x", "x")
