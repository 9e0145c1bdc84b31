"""An inner stage whose touched keys' rows come out the same did not change (TPC-H
Q18 after RF1): no delta term reads it, so the terms of the tables that did change are
the whole refresh. After every refresh the MV equals DuckDB's result of its query over what
pyiceberg reads now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.refresh.incremental.delta import Views
from tests.helpers import rows_of
from tests.refresh.lake import Lake

pytestmark = pytest.mark.spark

# TPC-H Q18's shape: orders whose lineitems hold more than 10 units (a semi-join stage of
# distinct order keys grouped with HAVING), with their lineitems summed per order.
QUERY = (
    "SELECT o.ck, o.ok, sum(l.qty) AS q FROM {p}orders o, {p}lineitem l WHERE o.ok IN "
    "(SELECT l2.ok FROM {p}lineitem l2 GROUP BY l2.ok HAVING sum(l2.qty) > 10) AND o.ok = l.ok GROUP BY o.ck, o.ok"
)
SCHEMAS = {
    "orders": pa.schema([("ok", pa.int64()), ("ck", pa.int64())]),
    "lineitem": pa.schema([("ok", pa.int64()), ("qty", pa.int64())]),
}


def _add_orders(lake: Lake, orders: dict[int, list[int]]) -> None:
    """Append each order (key -> its lineitems' quantities; customer ``key % 7``)."""
    lake.append("orders", [(k, k % 7) for k in orders])
    lake.append("lineitem", [(k, q) for k, qs in orders.items() for q in qs])


def test_a_stage_whose_touched_keys_come_out_the_same_gets_no_delta_term(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(tmp_path / "home")
    lake = Lake(client, tmp_path, SCHEMAS, QUERY)
    _add_orders(lake, {k: [(k * 3 + j) % 6 + 1 for j in range(3)] for k in range(40)})  # some over 10 units
    client.sql(
        f"CREATE MATERIALIZED VIEW mv PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {QUERY.format(p='lake.db.')}"
    )
    assert lake.oracle(), "the seed data must hold orders over 10 units"
    terms: list[str] = []  # the input whose delta each term reads (a stage's is named __smv_stage_<n>)
    term = Views.term
    monkeypatch.setattr(
        Views, "term", lambda self, q, i, new, *a, **k: terms.append(sorted(new)[i]) or term(self, q, i, new, *a, **k)
    )

    def refresh(step: str) -> None:
        terms.clear()
        run = client.refresh("mv")
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (step, run.error, run.reason)
        got = sorted((tuple(r) for r in rows_of(client.table("mv").select("ck", "ok", "q"))), key=repr)
        assert got == lake.oracle(), step

    # New orders of at most 10 units: the stage's touched keys (the new order keys) hold no
    # row before or after, so only the terms of orders and lineitem run, and they add nothing.
    _add_orders(lake, {100: [1, 2, 3], 101: [5, 5]})
    refresh("small orders appended")
    assert terms and not any(t.startswith("__smv_stage_") for t in terms), terms

    # An order over 10 units: the stage gains its key, and its term brings the order in.
    _add_orders(lake, {102: [6, 6], 103: [1]})
    refresh("a large order appended")
    assert any(t.startswith("__smv_stage_") for t in terms), terms
    assert (102 % 7, 102, 12) in lake.oracle()
