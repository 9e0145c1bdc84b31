"""``sparkmv.rewrite_log``: every query run through ``Client.sql`` with rewrite on and
candidate MVs is recorded (MV used or NULL, class, analysis time, rejection reasons), per-MV
counts come out of a GROUP BY, and switched-off rewrite, system tables and EXPLAIN record
nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from sparkmv.catalog.clock import utcnow
from sparkmv.client.queries import run_query
from sparkmv.errors import CatalogError
from sparkmv.services.rewrite_log import fingerprint
from tests.helpers import rows_of, write_partition

pytestmark = [pytest.mark.spark]

MV = "SELECT m, sum(amount) AS total, count(*) AS n FROM sales GROUP BY m"
ROLLUP = "SELECT sum(amount) AS total FROM sales WHERE m >= '2024-02'"
PLAIN = "SELECT id FROM sales WHERE id > 1"


def _log(client: Any) -> list[tuple[Any, ...]]:
    rows = client.execute(
        "SELECT mv, rewrite_class, query, fingerprint, rejected FROM sparkmv.rewrite_log", prefer_rows=True
    ).rows
    return [tuple(r) for r in rows.rows]


def test_queries_are_logged_per_mv(make_client: Any, tmp_path: Path) -> None:
    sales = tmp_path / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "amount": [1.5, 2.0]})
    write_partition(sales, "m", "2024-02", {"id": [3, 4], "amount": [10.0, 4.0]})
    client = make_client(rewrite=True)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_month PARTITION BY m AS {MV}", raise_on_failure=True)
    assert _log(client) == []  # DDL and the build are not queries

    started = utcnow()
    assert rows_of(client.sql(ROLLUP)) == rows_of(run_query(client.runtime, ROLLUP)) == [(14.0,)]
    assert rows_of(client.sql(PLAIN)) == [(2,), (3,), (4,)]
    client.sql("SELECT count(*) FROM sparkmv.task_runs")  # no MV reads it: not considered
    client.sql(f"EXPLAIN {ROLLUP}")  # explained, not run
    client.sql("SET enable_materialized_view_rewrite = false")
    client.sql(ROLLUP)  # not considered: rewrite is off
    client.sql("SET enable_materialized_view_rewrite = true")

    assert _log(client) == [
        (None, None, PLAIN, fingerprint(PLAIN), "by_month: it aggregates, the query does not"),
        ("by_month", "rollup", ROLLUP, fingerprint(ROLLUP), None),
    ]
    entries = client.runtime.catalog.rewrite_log.list()
    assert all(started <= e.query_time <= utcnow() for e in entries)
    assert all(0 < e.analysis_ms < 60_000 for e in entries)

    client.sql(ROLLUP.replace("2024-02", "2024-01"))  # the same query shape: same fingerprint
    counts = "SELECT mv, count(*) AS n, count(DISTINCT fingerprint) AS shapes FROM sparkmv.rewrite_log GROUP BY mv"
    assert rows_of(client.sql(counts)) == [("by_month", 2, 1), (None, 1, 1)]  # on Spark
    plain = client.execute(counts, prefer_rows=True).rows  # from the catalog alone
    assert plain is not None and sorted(plain.rows, key=str) == [("by_month", 2, 1), (None, 1, 1)]
    schema = client.sql("SELECT * FROM sparkmv.rewrite_log").schema.simpleString()
    assert schema == (
        "struct<query_time:timestamp_ntz,fingerprint:string,query:string,mv:string,"
        "rewrite_class:string,analysis_ms:double,rejected:string>"
    )
    assert isinstance(entries[0].query_time, dt.datetime)

    # A refresh publishes a new MV snapshot: the rewritten query reads it, not the one read before.
    write_partition(sales, "m", "2024-03", {"id": [5], "amount": [6.0]})
    client.sql("REFRESH MATERIALIZED VIEW by_month", raise_on_failure=True)
    assert client.rewrite(ROLLUP).mvs[0].name == "by_month"
    assert rows_of(client.sql(ROLLUP)) == [(20.0,)]


def test_a_failing_log_does_not_fail_the_query(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    sales = tmp_path / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1], "amount": [2.5]})
    client = make_client(rewrite=True)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW by_month PARTITION BY m AS {MV}", raise_on_failure=True)

    def busy(_entries: object) -> None:
        raise CatalogError("catalog database error: database is locked")

    monkeypatch.setattr(client.runtime.catalog.rewrite_log, "record", busy)
    assert rows_of(client.sql(ROLLUP.replace("2024-02", "2024-01"))) == [(2.5,)]
    assert caplog.messages == [
        "cannot record the query rewrite in the rewrite log: catalog database error: database is locked"
    ]
