"""Incremental refresh of MVs over a refreshable table: the table's changelog carries
retractions (an update retracts the old row, a delete carries it), so SUM / COUNT / AVG
are updated exactly, MIN / MAX recompute only the groups that lost a row, and a projection
loses the retracted rows. Random sequences of inserts, updates and deletes (hypothesis,
seeded); after every refresh each MV equals its query recomputed by Spark from the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparkmv.names import ObjectName
from tests.differential.harness import diff_settings
from tests.helpers import assert_mv_matches, rows_of
from tests.refresh.reload_helpers import refresh, write_csv

pytestmark = [pytest.mark.spark]

QUERIES = {
    "agg": "SELECT g, sum(v) AS total, count(*) AS n, count(v) AS nv, avg(v) AS mean, min(v) AS lo, max(v) AS hi "
    "FROM t GROUP BY g",
    "global": "SELECT sum(v) AS total, count(*) AS n, max(v) AS hi FROM t",
    "projection": "SELECT id, g, v FROM t WHERE v IS NULL OR v > 3",
    "join": "SELECT t.g, d.label, sum(t.v) AS total, count(*) AS n FROM t JOIN dims d ON t.g = d.g "
    "GROUP BY t.g, d.label",
}

ROWS = st.dictionaries(
    st.integers(0, 30),
    st.tuples(st.sampled_from(["a", "b", "c", ""]), st.one_of(st.none(), st.integers(-5, 40))),
    min_size=1,
    max_size=25,
)


def _write(src: Path, rows: dict[int, tuple[str, int | None]]) -> None:
    for f in src.glob("*.csv"):
        f.unlink()
    write_csv(src, "data.csv", [(k, g, v) for k, (g, v) in sorted(rows.items())], header="id,g,v")


def _setup(make_client: Any, tmp_path: Path, first: dict[int, tuple[str, int | None]]) -> Any:
    src = tmp_path / "src"
    src.mkdir(parents=True)
    _write(src, first)
    client = make_client(tmp_path / "home")
    client.sql(
        f"CREATE TABLE t (id int, g string, v int, PRIMARY KEY (id)) ON CONFLICT OVERWRITE "
        f"WITH (connector = 'files', path = '{src}', format = 'csv', match_pattern = '*.csv', "
        "refresh_mode = 'FULL_RELOAD', vnode_count = '2')"
    )
    write_csv(tmp_path / "dims", "d.csv", [("a", "A"), ("b", "B"), ("", "empty")], header="g,label")
    client.sql(f"CREATE EXTERNAL TABLE dims USING parquet LOCATION '{_parquet(client, tmp_path)}'")
    refresh(client, "t")
    for name, query in QUERIES.items():
        client.sql(
            f"CREATE MATERIALIZED VIEW {name} REFRESH DEFERRED PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}"
        )
        assert client.refresh(name).mode == "FULL"
    return client


def _parquet(client: Any, tmp_path: Path) -> Path:
    out = tmp_path / "dims_parquet"
    client.spark.read.option("header", True).csv(str(tmp_path / "dims")).write.parquet(str(out))
    return out


@settings(
    diff_settings(), suppress_health_check=[*diff_settings().suppress_health_check, HealthCheck.function_scoped_fixture]
)
@example(
    # updates that move a row to another group and retract a group's MAX, deletes that
    # empty a group, NULL values, and an insert, over three reloads
    first={1: ("a", 10), 2: ("a", 40), 3: ("b", None), 4: ("c", 5), 5: ("", 7)},
    steps=[
        {1: ("a", 10), 2: ("b", 39), 3: ("b", 4), 5: ("", None), 6: ("a", None)},
        {1: ("c", 1), 2: ("b", 39), 6: ("a", 2), 7: ("b", 40)},
    ],
)
@given(first=ROWS, steps=st.lists(ROWS, min_size=2, max_size=3, unique_by=lambda r: tuple(sorted(r.items()))))
def test_mvs_over_a_refreshable_table_follow_inserts_updates_and_deletes(
    make_client: Any, tmp_path_factory: pytest.TempPathFactory, first: Any, steps: Any
) -> None:
    tmp_path = tmp_path_factory.mktemp("refreshable")
    client = _setup(make_client, tmp_path, first)
    previous = first
    for rows in steps:
        _write(tmp_path / "src", rows)
        refresh(client, "t")
        for name, query in QUERIES.items():
            run = client.refresh(name)
            expected = ("SKIPPED", "SKIP") if rows == previous else ("SUCCESS", "INCREMENTAL")
            assert (run.state, run.mode) == expected, (name, run)
            assert_mv_matches(client, name, query)
        previous = rows


def test_an_expired_changelog_fails_strict_incremental_and_leaves_the_mv(make_client: Any, tmp_path: Path) -> None:
    client = _setup(make_client, tmp_path, {1: ("a", 1), 2: ("b", 2)})
    before = rows_of(client.table("agg"))
    _write(tmp_path / "src", {1: ("a", 5)})
    refresh(client, "t")
    log = client.runtime.iceberg.load(ObjectName.parse("t__changelog"))
    consumed = [s.snapshot_id for s in log.snapshots()][:-1]
    assert consumed, "the first reload's changelog snapshot"
    log.maintenance.expire_snapshots().by_ids(consumed).commit()
    run = client.refresh("agg")
    assert run.state == "FAILED", run
    assert "the changelog history of refreshable table 'default.t' after snapshot" in (run.error or ""), run.error
    assert rows_of(client.table("agg")) == before
