"""``sparkmv demo``: TPC-H end to end, each MV checked against its query computed by DuckDB
(an oracle sharing no code with sparkmv: :mod:`sparkmv.demo.oracle`).

The demo is an application of the public API (:class:`sparkmv.client.client.Client`) and is
imported by nothing: the CLI dispatches to it by module name.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from sparkmv.client.client import Client
from sparkmv.demo.data import (
    DEMO_EXPECTATION_MVS,
    DEMO_EXPECTATIONS,
    DEMO_MVS,
    DEMO_NESTED_MVS,
    TpchLayout,
    prepare,
)
from sparkmv.demo.oracle import Comparison, compare_mv, require_duckdb

# Every MV of the demo, in refresh order: the nested ones after the MVs they read.
ALL_MVS = {**DEMO_MVS, **DEMO_EXPECTATION_MVS, **DEMO_NESTED_MVS}


def difference(client: Client, mv: str, query: str) -> Comparison:
    """MV ``mv`` against ``query`` computed by DuckDB over the same base files, read by
    DuckDB itself (:mod:`sparkmv.demo.oracle`): columns (names, order) and rows as multisets.

    Raises:
        SparkMvError: when DuckDB (a dev dependency) is not installed.
    """
    return compare_mv(client, mv, query)


def check_all(client: Client, console: Console) -> bool:
    """Compare every demo MV with its query computed by DuckDB; prints OK or the difference."""
    ok = True
    for name, (_part, query, _props) in ALL_MVS.items():
        conditions = [f"({c})" for _, c in DEMO_EXPECTATIONS.get(name, [])]
        if conditions:  # the MV holds the rows its DROP ROW expectations keep
            query = f"SELECT * FROM ({query}) AS q WHERE {' AND '.join(conditions)}"
        cmp = difference(client, name, query)
        if cmp.ok:
            console.print(f"check {name}: [green]OK[/green] ({cmp.rows} rows, equal to DuckDB's result)")
        else:
            ok = False
            console.print(f"check {name}: [red]DIFFERENT[/red] from DuckDB's result")
            console.print(cmp.describe(), markup=False)
    return ok


def create_objects(client: Client, layout: TpchLayout) -> None:
    """(Re)create the external tables ``lineitem``, ``orders``, ``customer`` over ``layout``
    and the demo MVs (:data:`sparkmv.demo.data.DEMO_MVS`, then the nested
    :data:`~sparkmv.demo.data.DEMO_NESTED_MVS`), not refreshed yet (``REFRESH DEFERRED``)."""
    for name in reversed(ALL_MVS):
        client.sql(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
    for table in ("lineitem", "orders", "customer"):
        client.sql(f"DROP TABLE IF EXISTS {table}")
    client.sql(f"CREATE EXTERNAL TABLE lineitem USING parquet LOCATION '{layout.lineitem}'")
    client.sql(f"CREATE EXTERNAL TABLE orders USING parquet LOCATION '{layout.orders}'")
    client.sql(f"CREATE EXTERNAL TABLE customer USING parquet LOCATION '{layout.customer}'")
    for name, (part, query, props) in ALL_MVS.items():
        prop_sql = ""
        if props:
            prop_sql = " PROPERTIES (" + ", ".join(f"'{k}' = '{v}'" for k, v in props.items()) + ")"
        rules = ", ".join(
            f"CONSTRAINT {e} EXPECT ({c}) ON VIOLATION DROP ROW" for e, c in DEMO_EXPECTATIONS.get(name, [])
        )
        constraints = f" ({rules})" if rules else ""
        client.sql(
            f"CREATE MATERIALIZED VIEW {name}{constraints} PARTITION BY {part} REFRESH DEFERRED{prop_sql} AS {query}"
        )


def run_demo(client: Client, scale_factor: float, data_dir: Path, console: Console) -> bool:
    """Run the demo; returns True when every check passed.

    Raises:
        SparkMvError: when DuckDB, the oracle of the checks, is not installed (before any work).
    """
    require_duckdb()
    t0 = time.monotonic()
    console.print(f"[bold]sparkmv demo[/bold]: TPC-H scale factor {scale_factor:g}, data in {data_dir}")
    layout = prepare(client.spark, data_dir.absolute(), scale_factor)  # LOCATION must be absolute
    console.print(f"data ready in {time.monotonic() - t0:.1f} s")
    create_objects(client, layout)
    ok = _refresh_and_check(client, console)

    # An outside writer adds rows to one ship month; only that partition is refreshed.
    month = "1995-06"
    target = layout.lineitem / f"l_shipmonth={month}"
    appended = target / "demo-append.parquet"
    sample = _with_bad_quantities(pq.read_table(sorted(target.glob("*.parquet"))[0]).slice(0, 100), BAD_ROWS)
    pq.write_table(sample, appended)
    try:
        console.print(
            f"\nan outside writer appended {sample.num_rows} rows to lineitem partition l_shipmonth={month}, "
            f"{BAD_ROWS} of them with a negative l_quantity"
        )
        ok = _refresh_and_check(client, console) and ok
        # The same writer deletes them again: the MVs over lineitem refresh the one month
        # (a removed Parquet file has no change log), the nested MV applies the retractions
        # of its base MV's refresh incrementally.
        appended.unlink()
        console.print(f"\nthe outside writer deleted those {sample.num_rows} rows again (removed the file)")
        ok = _refresh_and_check(client, console) and ok
    finally:
        appended.unlink(missing_ok=True)
    console.print(
        f"\ndemo finished in {time.monotonic() - t0:.1f} s: {'[green]OK[/green]' if ok else '[red]FAILED[/red]'}"
    )
    return ok


def _refresh_and_check(client: Client, console: Console) -> bool:
    """Refresh every demo MV in order, printing each run and its candidates, then the status
    and the checks; True when every run succeeded and every check passed."""
    ok = True
    for name in ALL_MVS:
        run = client.refresh(name)
        ok = ok and run.state in ("SUCCESS", "SKIPPED")
        console.print(
            f"refresh {name}: {run.state} {run.mode}, {run.partitions_done} partition(s) in "
            f"{run.chunks_done} chunk(s), {run.rows_written} rows, {run.duration_seconds or 0:.1f} s"
        )
        if run.error:
            console.print(f"  error: {run.error}")
        _show_candidates(run.candidates, run.reason, console)
        _show_expectations(client, run.run_id, console)
    _show_status(client, console)
    return check_all(client, console) and ok


def _show_candidates(candidates: list[dict[str, Any]], reason: str | None, console: Console) -> None:
    """The techniques AUTO weighed for a run: the chosen one and the rejected ones with
    their estimates (bytes read) and reasons."""
    if not candidates:
        console.print(f"  ({reason})")
        return
    table = Table(show_edge=False, box=None, padding=(0, 2))
    for column in ("technique", "eligible", "estimate", "chosen", "reason"):
        table.add_column(column)
    for c in candidates:
        size = c["estimate_bytes"]
        estimate = "-" if size is None else f"{size / 1024 / 1024:.2f} MiB"
        table.add_row(c["mode"], "yes" if c["eligible"] else "no", estimate, "*" if c["chosen"] else "", c["reason"])
    console.print(table)


BAD_ROWS = 7
"""Rows of the demo's outside append given a negative quantity (dropped by an expectation)."""


def _with_bad_quantities(rows: pa.Table, bad: int) -> pa.Table:
    """``rows`` with the ``l_quantity`` of its first ``bad`` rows negated (bad data)."""
    index = rows.schema.get_field_index("l_quantity")
    column = rows.column(index)
    negated = pa.concat_arrays([pc.negate(column.slice(0, bad)).combine_chunks(), column.slice(bad).combine_chunks()])
    return rows.set_column(index, rows.schema.field(index), negated)


def _show_expectations(client: Client, run_id: int, console: Console) -> None:
    """The expectations' counts of run ``run_id`` (``sparkmv.expectations``)."""
    with client.runtime.catalog.read() as s:
        results = client.runtime.catalog.expectations.list(s, run_ids=[run_id])
    for r in results:
        verb = "dropped" if r.action == "drop" else "failed"
        console.print(
            f"  expectation {r.expectation} ({r.condition}): {r.rows_passed} rows passed, {r.rows_failed} {verb}"
        )


def _show_status(client: Client, console: Console) -> None:
    table = Table(title="materialized views")
    for column in ("name", "state", "rows", "partitions", "last refresh", "freshness"):
        table.add_column(column)
    for st in client.status():
        fresh = "fresh" if st.is_fresh else f"stale ({st.stale_partitions} base partitions)"
        table.add_row(st.name, st.state, str(st.rows), str(st.partitions), st.last_refresh_state or "", fresh)
    console.print(table)
