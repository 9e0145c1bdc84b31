"""Every bad input of the foundation raises the right SparkMvError subclass with a clear
message, and changes nothing: catalog rows, runs and warehouse files are as before."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from sparkmv.client.client import Client
from sparkmv.errors import (
    AnalysisError,
    InvalidNameError,
    InvalidPropertyError,
    ObjectExistsError,
    ObjectNotFoundError,
    ParseError,
    SourceError,
    SparkMvError,
)
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark, pytest.mark.slow]

MV_QUERY = "SELECT m, region, sum(amount) AS total FROM sales GROUP BY m, region"


@pytest.fixture(scope="module")
def env(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Client, Path]]:
    """One client with an external table ``sales`` and an MV ``mv`` (shared by the module)."""
    root = tmp_path_factory.mktemp("bad_input")
    sales = root / "data" / "sales"
    write_partition(sales, "m", "2024-01", {"id": [1, 2], "region": ["eu", "us"], "amount": [1.0, 2.0]})
    write_partition(sales, "m", "2024-02", {"id": [3], "region": ["us"], "amount": [5.0]})
    (root / "data" / "empty").mkdir()
    (root / "data" / "csv").mkdir()
    for i in range(3):
        (root / "data" / "csv" / f"part-{i}.csv").write_text("id,amount\n1,2.0\n")
    client = Client(home=root / "home", spark=spark)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW mv PARTITION BY m AS {MV_QUERY}")
    yield client, root
    client.close()


def snapshot(client: Client) -> dict[str, Any]:
    """Everything a statement could change: catalog rows, runs, Iceberg tables, files."""
    out: dict[str, Any] = {}
    with client.runtime.catalog.transaction() as s:
        for table in ("smv_objects", "smv_task_runs", "smv_version_map", "smv_refresh_progress", "smv_control"):
            out[table] = [tuple(r) for r in s.execute(text(f"SELECT * FROM {table} ORDER BY 1, 2"))]
        out["iceberg_tables"] = [tuple(r) for r in s.execute(text("SELECT * FROM iceberg_tables ORDER BY 1, 2, 3"))]
    home = client.settings.home
    out["files"] = sorted(
        (str(p.relative_to(home)), p.stat().st_size)
        for p in home.rglob("*")
        if p.is_file() and "catalog.db" not in p.name
    )
    out["dirs"] = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_dir())
    return out


def check_unchanged(client: Client, statement: str, error: type[SparkMvError], message: str) -> None:
    """``statement`` raises ``error`` whose text matches the regex ``message``; nothing changed."""
    before = snapshot(client)
    with pytest.raises(error, match=message) as info:
        client.sql(statement)
    assert type(info.value) is error
    assert snapshot(client) == before


CASES: list[tuple[str, str, type[SparkMvError], str]] = [
    # unparseable SQL, with position
    (
        "parse_select",
        "SELECT m\nFROM sales WHERE",
        ParseError,
        r"^cannot parse SQL at line 2, column 16: Required keyword: 'this' missing for .* near 'WHERE'$",
    ),
    (
        "parse_create",
        "CREATE MATERIALIZED VIEW mv2 PARTITON BY m AS SELECT 1 AS a",
        ParseError,
        r"^cannot parse SQL at line 1, column 30: expected PARTITION BY, REFRESH, PROPERTIES or AS, found 'PARTITON'$",
    ),
    (
        "parse_mv_query",
        "CREATE MATERIALIZED VIEW mv2 AS\nSELECT m FROM sales GROUP m",
        ParseError,
        r"^cannot parse SQL at line 2, column 27: Invalid expression / Unexpected token near 'm'$",
    ),
    (
        "parse_string",
        "SELECT 'abc FROM sales",
        ParseError,
        r"^cannot parse SQL at line 1, column 8: unterminated string$",
    ),
    # unknown table
    (
        "unknown_table_mv",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT * FROM nope",
        AnalysisError,
        r"^table or view 'nope' does not exist$",
    ),
    ("unknown_table_select", "SELECT * FROM nope", ObjectNotFoundError, r"^table or view 'nope' does not exist$"),
    (
        "unknown_system_table",
        "SELECT * FROM sparkmv.nope",
        ObjectNotFoundError,
        r"^system table 'sparkmv\.nope' does not exist$",
    ),
    (
        "refresh_unknown",
        "REFRESH MATERIALIZED VIEW nope",
        ObjectNotFoundError,
        r"^materialized view 'nope' does not exist$",
    ),
    (
        "drop_unknown_mv",
        "DROP MATERIALIZED VIEW nope",
        ObjectNotFoundError,
        r"^materialized view 'nope' does not exist$",
    ),
    ("drop_unknown_table", "DROP TABLE nope", ObjectNotFoundError, r"^table 'nope' does not exist$"),
    (
        "drop_mv_as_table",
        "DROP TABLE mv",
        ObjectNotFoundError,
        r"^'mv' is a materialized view; use DROP MATERIALIZED VIEW$",
    ),
    ("drop_table_as_mv", "DROP MATERIALIZED VIEW sales", ObjectNotFoundError, r"^'sales' is a table; use DROP TABLE$"),
    ("describe_unknown", "DESCRIBE nope", ObjectNotFoundError, r"^table or view 'nope' does not exist$"),
    (
        "refresh_a_table",
        "REFRESH MATERIALIZED VIEW sales",
        ObjectNotFoundError,
        r"^materialized view 'sales' does not exist$",
    ),
    # unknown column, type errors, PARTITION BY
    (
        "unknown_column",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT m, nocol FROM sales",
        AnalysisError,
        r"^\[UNRESOLVED_COLUMN\.WITH_SUGGESTION\] A column, variable, or function parameter with name `nocol` "
        r"cannot be resolved\.",
    ),
    (
        "unknown_column_select",
        "SELECT nocol FROM sales",
        AnalysisError,
        r"^\[UNRESOLVED_COLUMN\.WITH_SUGGESTION\] .*`nocol`",
    ),
    (
        "type_error",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT m, amount + array(1) AS x FROM sales",
        AnalysisError,
        r"^\[DATATYPE_MISMATCH\.BINARY_OP_DIFF_TYPES\] Cannot resolve \"\(amount \+ array\(1\)\)\" due to data type "
        r"mismatch",
    ),
    (
        "not_grouped",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT m, region, sum(amount) AS t FROM sales GROUP BY m",
        AnalysisError,
        r"^\[MISSING_AGGREGATION\]",
    ),
    (
        "partition_by_not_produced",
        "CREATE MATERIALIZED VIEW mv2 PARTITION BY month AS SELECT m, sum(amount) AS t FROM sales GROUP BY m",
        AnalysisError,
        r"^PARTITION BY column 'month' is not produced by the query \(columns: m, t\)$",
    ),
    (
        "duplicate_output_columns",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT m, m FROM sales",
        AnalysisError,
        r"^duplicate output column name\(s\): m; give them aliases$",
    ),
    (
        "mv_reads_itself",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT * FROM mv2",
        AnalysisError,
        r"^materialized view 'mv2' cannot read itself$",
    ),
    (
        "mv_reads_system_table",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT * FROM sparkmv.task_runs",
        AnalysisError,
        r"^materialized view 'mv2' cannot read system table 'sparkmv\.task_runs'$",
    ),
    (
        "bad_property",
        "CREATE MATERIALIZED VIEW mv2 PROPERTIES ('no_such_property' = '1') AS SELECT m FROM sales",
        InvalidPropertyError,
        r"no_such_property",
    ),
    # duplicate names
    (
        "duplicate_mv",
        f"CREATE MATERIALIZED VIEW mv PARTITION BY m AS {MV_QUERY}",
        ObjectExistsError,
        r"^'mv' already exists$",
    ),
    (
        "mv_named_as_table",
        "CREATE MATERIALIZED VIEW Sales AS SELECT 1 AS a",
        ObjectExistsError,
        r"^'sales' already exists$",
    ),
    (
        "table_named_as_mv",
        "CREATE EXTERNAL TABLE mv USING parquet LOCATION '{data}/sales'",
        ObjectExistsError,
        r"^'mv' already exists$",
    ),
    # names that are not identifiers
    (
        "path_name",
        "CREATE EXTERNAL TABLE `../../etc` USING parquet LOCATION '{data}/sales'",
        InvalidNameError,
        r"^invalid name '`\.\./\.\./etc`': use letters, digits and _ \(optionally namespace\.name\)$",
    ),
    (
        "slash_name",
        "CREATE MATERIALIZED VIEW `a/b` AS SELECT 1 AS a",
        InvalidNameError,
        r"^invalid name '`a/b`': use letters, digits and _ \(optionally namespace\.name\)$",
    ),
    (
        "dotted_quoted_name",
        "CREATE MATERIALIZED VIEW `x.y` AS SELECT 1 AS a",
        InvalidNameError,
        r"^invalid name '`x\.y`': use letters, digits and _ \(optionally namespace\.name\)$",
    ),
    (
        "quote_in_name",
        "CREATE MATERIALIZED VIEW `a'b` AS SELECT 1 AS a",
        InvalidNameError,
        r"^invalid name \"`a'b`\": use letters, digits and _ \(optionally namespace\.name\)$",
    ),
    (
        "reserved_namespace",
        "CREATE MATERIALIZED VIEW sparkmv.x AS SELECT 1 AS a",
        InvalidNameError,
        r"^invalid name 'sparkmv\.x': namespace 'sparkmv' is reserved$",
    ),
    (
        "bad_table_name_in_query",
        "CREATE MATERIALIZED VIEW mv2 AS SELECT * FROM `a/b`",
        AnalysisError,
        r"^invalid table name '`a/b`'$",
    ),
    # LOCATION
    (
        "missing_location",
        "CREATE EXTERNAL TABLE t2 USING parquet LOCATION '{data}/nope'",
        SourceError,
        r"^LOCATION '.*/data/nope' does not exist$",
    ),
    (
        "empty_location",
        "CREATE EXTERNAL TABLE t2 USING parquet LOCATION '{data}/empty'",
        SourceError,
        r"^LOCATION '.*/data/empty' holds no data files$",
    ),
    (
        "file_location",
        "CREATE EXTERNAL TABLE t2 USING parquet LOCATION '{data}/sales/m=2024-01/part-0.parquet'",
        SourceError,
        r"^LOCATION '.*part-0\.parquet' is a file, not a directory of Parquet files$",
    ),
    (
        "csv_location",
        "CREATE EXTERNAL TABLE t2 USING parquet LOCATION '{data}/csv'",
        SourceError,
        r"^LOCATION '.*/data/csv' holds no Parquet files \(found 3 \.csv files\)$",
    ),
    # numbers out of range, rules between properties, values not supported yet
    (
        "every_overflow",
        "ALTER MATERIALIZED VIEW mv REFRESH ASYNC EVERY (INTERVAL 99999999999 DAY)",
        ParseError,
        r"^EVERY \(INTERVAL 99999999999 DAY\) is out of range: the interval must be from 1 SECOND to 3650 DAY$",
    ),
    (
        "every_zero",
        "CREATE MATERIALIZED VIEW mv2 REFRESH ASYNC EVERY (INTERVAL 0 SECOND) AS SELECT 1 AS a",
        ParseError,
        r"^EVERY \(INTERVAL 0 SECOND\) is out of range: ",
    ),
    (
        "lease_renew_not_below_timeout",
        "ALTER MATERIALIZED VIEW mv SET PROPERTIES ('lease_renew_seconds' = '60')",
        InvalidPropertyError,
        r"^lease_renew_seconds \(60\) must be less than lease_timeout_seconds \(60\)$",
    ),
    (
        "lease_timeout_below_renew",
        "CREATE MATERIALIZED VIEW mv2 PROPERTIES ('lease_timeout_seconds' = '5') AS SELECT 1 AS a",
        InvalidPropertyError,
        r"^lease_renew_seconds \(10\) must be less than lease_timeout_seconds \(5\)$",
    ),
    (
        "property_too_large",
        "ALTER MATERIALIZED VIEW mv SET PROPERTIES ('partition_refresh_number' = '99999999999')",
        InvalidPropertyError,
        r"^property 'partition_refresh_number' must be an integer from 1 to 1000000, not '99999999999'$",
    ),
    (
        "incremental_ratio_not_a_number",
        "ALTER MATERIALIZED VIEW mv SET PROPERTIES ('incremental_max_change_ratio' = 'lots')",
        InvalidPropertyError,
        r"^property 'incremental_max_change_ratio' must be a number from 0 to 1e\+09, not 'lots'$",
    ),
    (
        "table_lease",
        "CREATE TABLE rt (id int, PRIMARY KEY (id)) WITH ('lease_renew_seconds' = '100')",
        InvalidPropertyError,
        r"^Table 'rt': lease_renew_seconds \(100\) must be less than lease_timeout_seconds \(60\)$",
    ),
    (
        "bad_format",
        "CREATE EXTERNAL TABLE t2 USING avro LOCATION '{data}/sales'",
        SparkMvError,
        r"^cannot create external table 't2': unknown format 'avro' "
        r"\(USING parquet \| csv \| json \| orc \| text \| delta\)$",
    ),
    (
        "options_on_parquet",
        "CREATE EXTERNAL TABLE t2 USING parquet OPTIONS ('mergeSchema' = 'true') LOCATION '{data}/sales'",
        SparkMvError,
        r"^cannot create external table 't2': OPTIONS are Spark reader options of USING csv, json or orc, "
        r"not of parquet$",
    ),
    (
        "not_a_delta_table",
        "CREATE EXTERNAL TABLE t2 USING delta LOCATION '{data}/sales'",
        SourceError,
        r"^table 't2': LOCATION '.*/data/sales' is not a Delta table \(no _delta_log\)$",
    ),
    (
        "orc_over_parquet",
        "CREATE EXTERNAL TABLE t2 USING orc LOCATION '{data}/sales'",
        SourceError,
        r"^LOCATION '.*/data/sales' holds no ORC files$",
    ),
]


@pytest.mark.parametrize(("statement", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_changes_nothing(
    env: tuple[Client, Path], statement: str, error: type[SparkMvError], message: str
) -> None:
    client, root = env
    check_unchanged(client, statement.replace("{data}", str(root / "data")), error, message)


def test_relative_location_is_refused(env: tuple[Client, Path]) -> None:
    """A relative LOCATION is refused (it would mean another directory for every working directory)."""
    client, _ = env
    assert not os.path.exists("no/such/dir")
    check_unchanged(
        client,
        "CREATE EXTERNAL TABLE t2 USING parquet LOCATION 'no/such/dir'",
        SourceError,
        r"^LOCATION 'no/such/dir' is a relative path: give an absolute path$",
    )


def test_if_not_exists_and_if_exists_change_nothing(env: tuple[Client, Path]) -> None:
    client, root = env
    before = snapshot(client)
    msg = client.execute(f"CREATE MATERIALIZED VIEW IF NOT EXISTS mv AS {MV_QUERY}").message
    assert msg == "materialized view 'mv' already exists"
    loc = root / "data" / "sales"
    msg = client.execute(f"CREATE EXTERNAL TABLE IF NOT EXISTS sales USING parquet LOCATION '{loc}'").message
    assert msg == "table 'sales' already exists"
    assert client.execute("DROP MATERIALIZED VIEW IF EXISTS nope").message == "'nope' does not exist"
    assert snapshot(client) == before
