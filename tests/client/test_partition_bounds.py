"""Bad ``PARTITION START (..) END (..)`` bounds (checked with typed partition
values): each is an error naming the values and the rule, and nothing changes — no run
is queued or recorded, the MV's snapshot and the catalog are as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkmv.client.client import Client
from sparkmv.errors import RefreshError, SparkMvError
from sparkmv.storage.partition_values import PartitionValueError
from tests.client.test_bad_input import check_unchanged
from tests.helpers import write_partition

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def bounds_env(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A client with MV ``monthly`` partitioned by a string month, ``daily`` by a DATE and
    ``flat`` unpartitioned."""
    root = tmp_path_factory.mktemp("bounds")
    sales = root / "data" / "sales"
    write_partition(sales, "m", "2024-01", {"amount": [1, 2]})
    write_partition(sales, "m", "2024-03", {"amount": [3]})
    days = root / "data" / "days"
    write_partition(days, "d", "2024-01-01", {"amount": [1]})
    client = Client(home=root / "home", spark=spark)
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE EXTERNAL TABLE days USING parquet LOCATION '{days}'")
    client.sql("CREATE MATERIALIZED VIEW monthly PARTITION BY m AS SELECT m, sum(amount) AS s FROM sales GROUP BY m")
    client.sql("CREATE MATERIALIZED VIEW daily PARTITION BY d AS SELECT d, sum(amount) AS s FROM days GROUP BY d")
    client.sql("CREATE MATERIALIZED VIEW flat AS SELECT sum(amount) AS s FROM sales")
    yield client
    client.close()


INVERTED = (
    r"^PARTITION START \('2024-05'\) must be before END \('2024-01'\) of materialized view 'monthly' "
    r"\(START is inclusive, END exclusive\)$"
)
EQUAL = (
    r"^PARTITION START \('2024-01'\) must be before END \('2024-01'\) of materialized view 'monthly' "
    r"\(START is inclusive, END exclusive\)$"
)
BOUNDS: list[tuple[str, str, type[SparkMvError], str]] = [
    (
        "inverted",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-05') END ('2024-01')",
        PartitionValueError,
        INVERTED,
    ),
    (
        "inverted_force",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-05') END ('2024-01') FORCE",
        PartitionValueError,
        INVERTED,
    ),
    (
        "inverted_async",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-05') END ('2024-01') WITH ASYNC MODE",
        PartitionValueError,
        INVERTED,
    ),
    (
        "equal",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-01') END ('2024-01')",
        PartitionValueError,
        EQUAL,
    ),
    (
        "equal_force_async",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-01') END ('2024-01') FORCE WITH ASYNC MODE",
        PartitionValueError,
        EQUAL,
    ),
    (
        "empty_start",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('') END ('2024-01')",
        PartitionValueError,
        r"^PARTITION START \(''\) of materialized view 'monthly' is empty$",
    ),
    (
        "empty_end_async",
        "REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-01') END ('') WITH ASYNC MODE",
        PartitionValueError,
        r"^PARTITION END \(''\) of materialized view 'monthly' is empty$",
    ),
    (
        "not_a_date",
        "REFRESH MATERIALIZED VIEW daily PARTITION START ('2024-13-01') END ('2024-12-31')",
        PartitionValueError,
        r"^PARTITION START \('2024-13-01'\) of materialized view 'daily': '2024-13-01' is not a date \(yyyy-MM-dd\)$",
    ),
    (
        "date_inverted",
        "REFRESH MATERIALIZED VIEW daily PARTITION START ('2024-02-01') END ('2024-01-31') FORCE",
        PartitionValueError,
        r"^PARTITION START \('2024-02-01'\) must be before END \('2024-01-31'\) of materialized view 'daily' ",
    ),
    (
        "unpartitioned",
        "REFRESH MATERIALIZED VIEW flat PARTITION START ('2024-01') END ('2024-02')",
        RefreshError,
        r"^materialized view 'flat' is not partitioned: PARTITION START \('2024-01'\), END \('2024-02'\) "
        r"cannot be used; refresh it without a partition range$",
    ),
    (
        "unpartitioned_async",
        "REFRESH MATERIALIZED VIEW flat PARTITION START ('2024-01') END ('2024-02') WITH ASYNC MODE",
        RefreshError,
        r"^materialized view 'flat' is not partitioned: ",
    ),
    (
        "explain_inverted",
        "EXPLAIN REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-05') END ('2024-01')",
        PartitionValueError,
        INVERTED,
    ),
]


@pytest.mark.parametrize(("statement", "error", "message"), [c[1:] for c in BOUNDS], ids=[c[0] for c in BOUNDS])
def test_bad_partition_bounds_change_nothing(
    bounds_env: Client, statement: str, error: type[SparkMvError], message: str
) -> None:
    check_unchanged(bounds_env, statement, error, message)


def test_good_bounds_still_refresh_their_range(bounds_env: Client) -> None:
    run = bounds_env.execute("REFRESH MATERIALIZED VIEW monthly PARTITION START ('2024-01') END ('2024-02') FORCE").run
    assert run is not None and (run.state, run.partitions_done) == ("SUCCESS", 1)
