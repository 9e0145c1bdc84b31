"""The MV check of the tests: an MV equals its defining query computed by DuckDB.

The expected side shares nothing with sparkmv's reading path: see
:mod:`sparkmv.demo.oracle` (base tables read by DuckDB, pyarrow, deltalake and pyiceberg from
the locations and snapshots the catalog names; the Spark SQL query transpiled by sqlglot).
The whole column list (names, order) and the rows (multisets) are compared, and the MV's own
Iceberg table must hold what ``Client.table`` returns.
"""

from __future__ import annotations

from typing import Any

from sparkmv.demo.oracle import Comparison, compare_mv


def assert_mv_matches(client: Any, mv: str, query: str, duck_query: str | None = None) -> Comparison:
    """Assert MV ``mv`` holds exactly what ``query`` (Spark SQL) returns now over its base
    tables, computed by DuckDB (``duck_query``: a DuckDB query instead of the transpiled one,
    for Spark-only functions). Returns the comparison (for its hidden columns).

    Raises:
        AssertionError: naming the differing columns and up to ten rows of each difference.
    """
    cmp = compare_mv(client, mv, query, duck_query)
    assert cmp.ok, f"MV {mv} differs from its query computed by DuckDB:\n{cmp.describe()}"
    return cmp
