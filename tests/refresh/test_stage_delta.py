"""An inner stage whose touched keys' rows come out the same did not change (issue 24,
TPC-H Q18 after RF1): no delta term reads it, so the terms of the tables that did change are
the whole refresh. After every refresh the MV equals DuckDB's result of its query over what
pyiceberg reads now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from sparkmv.refresh.incremental.delta import Views
from tests.helpers import rows_of

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


class Lake:
    """``orders`` and ``lineitem`` in an external SQLite Iceberg catalog ``lake`` (``db``)."""

    def __init__(self, client: Any, tmp_path: Path) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        uri, warehouse = f"sqlite:///{tmp_path / 'lake.db'}", tmp_path / "lake"
        warehouse.mkdir()
        self.catalog = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
        self.catalog.create_namespace("db")
        for name, schema in SCHEMAS.items():
            self.catalog.create_table(("db", name), schema=schema)
        client.execute(
            'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
            f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
        )

    def add_orders(self, orders: dict[int, list[int]]) -> None:
        """Append each order (key -> its lineitems' quantities; customer ``key % 7``)."""
        for name, rows in (
            ("orders", [{"ok": k, "ck": k % 7} for k in orders]),
            ("lineitem", [{"ok": k, "qty": q} for k, qs in orders.items() for q in qs]),
        ):
            self.catalog.load_table(("db", name)).append(pa.Table.from_pylist(rows, schema=SCHEMAS[name]))

    def oracle(self) -> list[tuple[Any, ...]]:
        con = duckdb.connect()
        for name in SCHEMAS:
            arrow = self.catalog.load_table(("db", name)).scan().to_arrow()  # noqa: F841
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
        return sorted(tuple(r) for r in con.execute(QUERY.format(p="")).fetchall())


def test_a_stage_whose_touched_keys_come_out_the_same_gets_no_delta_term(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_client(tmp_path / "home")
    lake = Lake(client, tmp_path)
    lake.add_orders({k: [(k * 3 + j) % 6 + 1 for j in range(3)] for k in range(40)})  # some over 10 units
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
        assert sorted(tuple(r) for r in rows_of(client.table("mv").select("ck", "ok", "q"))) == lake.oracle(), step

    # New orders of at most 10 units: the stage's touched keys (the new order keys) hold no
    # row before or after, so only the terms of orders and lineitem run, and they add nothing.
    lake.add_orders({100: [1, 2, 3], 101: [5, 5]})
    refresh("small orders appended")
    assert terms and not any(t.startswith("__smv_stage_") for t in terms), terms

    # An order over 10 units: the stage gains its key, and its term brings the order in.
    lake.add_orders({102: [6, 6], 103: [1]})
    refresh("a large order appended")
    assert any(t.startswith("__smv_stage_") for t in terms), terms
    assert (102 % 7, 102, 12) in lake.oracle()
