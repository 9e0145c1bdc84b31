"""TPC-H at scale factor 0.01: the three demo MVs equal their queries; after an outside
writer appends rows to one lineitem partition, AUTO refreshes each incrementally (the
aggregates over lineitem rewrite one MV partition) and they are equal again."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow.parquet as pq
import pytest

from sparkmv.catalog import RunState
from sparkmv.client.client import Client
from sparkmv.demo.data import DEMO_MVS, TpchLayout
from sparkmv.demo.run import difference

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHANGED_MONTH = "1995-06"


def _create_all(client: Client, layout: TpchLayout) -> None:
    for table in ("lineitem", "orders", "customer"):
        client.sql(f"CREATE EXTERNAL TABLE {table} USING parquet LOCATION '{getattr(layout, table)}'")
    for name, (part, query, props) in DEMO_MVS.items():
        prop_sql = ""
        if props:
            prop_sql = " PROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ")"
        result = client.execute(f"CREATE MATERIALIZED VIEW {name} PARTITION BY {part}{prop_sql} AS {query}")
        assert result.run is not None and result.run.state == RunState.SUCCESS, result.message


def test_tpch_demo_mvs_equal_queries_and_incremental_after_append(
    tpch: TpchLayout, make_client: Callable[..., Client]
) -> None:
    client = make_client()
    _create_all(client, tpch)
    for name, (_part, query, _props) in DEMO_MVS.items():
        assert (cmp := difference(client, name, query)).ok, cmp.describe()
    q1_months = client.sql("SELECT count(DISTINCT l_shipmonth) AS n FROM q1_pricing_summary")
    assert q1_months is not None and q1_months.collect()[0]["n"] > 60

    # An outside writer appends rows to one lineitem partition.
    partition = tpch.lineitem / f"l_shipmonth={CHANGED_MONTH}"
    source = sorted(partition.glob("*.parquet"))[0]
    extra = pq.read_table(source).slice(0, 25)
    pq.write_table(extra, partition / "part-99999-outside-writer.parquet")
    before = client.table("revenue_by_shipmode").where(f"l_shipmonth = '{CHANGED_MONTH}'")
    count_before = sum(r["line_count"] for r in before.collect())

    for name in ("q1_pricing_summary", "revenue_by_shipmode"):
        run = client.refresh(name)
        assert (run.state, run.mode, run.partitions_done) == (RunState.SUCCESS, "INCREMENTAL", 1), run
        assert [c["mode"] for c in run.candidates if c["chosen"]] == ["INCREMENTAL"], run.candidates
        assert (cmp := difference(client, name, DEMO_MVS[name][1])).ok, cmp.describe()
    after = client.table("revenue_by_shipmode").where(f"l_shipmonth = '{CHANGED_MONTH}'")
    assert sum(r["line_count"] for r in after.collect()) == count_before + 25

    # A join: at this scale the fixed cost of its delta terms makes PCT of the one month
    # cheaper than INCREMENTAL, which stays eligible; either way no full recompute.
    run = client.refresh("segment_revenue")
    assert (run.state, run.mode) == (RunState.SUCCESS, "PCT"), run
    incremental = next(c for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert incremental["eligible"] and "join term(s) cost about as much as reading" in incremental["reason"], (
        incremental
    )
    assert (cmp := difference(client, "segment_revenue", DEMO_MVS["segment_revenue"][1])).ok, cmp.describe()
