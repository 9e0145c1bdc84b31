"""The 22 TPC-H queries (:mod:`sparkmv.demo.tpch_queries`) as MVs at scale factor 0.01 over
the eight tables as Parquet external tables: each MV equals its query computed by DuckDB.

All 22 are built in one test (20 to 65 s on two cores, depending on load)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

from sparkmv.catalog import RunState
from sparkmv.client.client import Client
from sparkmv.demo.data import generate_tables
from sparkmv.demo.tpch_queries import TPCH_QUERIES, TPCH_TABLES, qualified
from tests.conftest import TPCH_SCALE_FACTOR
from tests.oracle import assert_mv_matches


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The eight TPC-H tables at SF 0.01, one directory (one Parquet file) each, string
    columns as ``string`` (tpchgen-cli writes ``string_view``, which the schema check of an
    external Parquet table does not map: it reports such a column missing)."""
    root = tmp_path_factory.mktemp("tpch8")
    out = {}
    for table, directory in generate_tables(root / "raw", TPCH_SCALE_FACTOR, TPCH_TABLES).items():
        data = pq.read_table(directory)
        fields = [pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else f for f in data.schema]
        out[table] = root / table
        out[table].mkdir()
        pq.write_table(data.cast(pa.schema(fields)), out[table] / "part-0.parquet")
    return out


def _create_and_check(client: Client, tables: dict[str, Path], names: tuple[str, ...]) -> None:
    for table, directory in tables.items():
        client.sql(f"CREATE EXTERNAL TABLE {table} USING parquet LOCATION '{directory}'")
    for mv in names:
        result = client.execute(f"CREATE MATERIALIZED VIEW {mv} AS {TPCH_QUERIES[mv]}")
        assert result.run is not None and result.run.state == RunState.SUCCESS, (mv, result.message)
        assert_mv_matches(client, mv, TPCH_QUERIES[mv])


def test_queries_are_named_and_qualifiable() -> None:
    """22 queries; unique output names; every table reference (not a WITH name) qualified."""
    assert list(TPCH_QUERIES) == [f"q{i}" for i in range(1, 23)]
    for name, query in TPCH_QUERIES.items():
        tree = sqlglot.parse_one(qualified(query, "lake.tpch"), read="spark")
        outputs = [s.alias_or_name for s in tree.selects]
        assert len(set(outputs)) == len(outputs) and all(outputs), (name, outputs)
        ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
        refs = [(t.catalog, t.db, t.name) for t in tree.find_all(exp.Table) if t.name not in ctes]
        assert refs and all(r[:2] == ("lake", "tpch") and r[2] in TPCH_TABLES for r in refs), (name, refs)
        assert not tree.find(exp.Order) and not tree.find(exp.Limit), name


@pytest.mark.spark
@pytest.mark.slow
def test_all_22_tpch_mvs_equal_duckdb(tables: dict[str, Path], make_client: Callable[..., Client]) -> None:
    _create_and_check(make_client(), tables, tuple(TPCH_QUERIES))
