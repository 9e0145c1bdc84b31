"""``CREATE OR REPLACE MATERIALIZED VIEW``: the new definition is built hidden while the old MV
stays readable, then swapped in by one catalog transaction (sparkmv rows and pyiceberg's
``iceberg_tables`` row), on SQLite and PostgreSQL; a failed build or a refused swap leaves
the old MV as it was and nothing hidden behind."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from sparkmv.errors import (
    AnalysisError,
    BusyError,
    InvalidNameError,
    ObjectExistsError,
    ParseError,
    RefreshFailedError,
)
from sparkmv.names import ObjectName, is_replacement, replacement_name, retired_at
from sparkmv.refresh.vacuum import vacuum
from sparkmv.services.ddl import create_materialized_view
from sparkmv.services.replace import replace_materialized_view
from sparkmv.sql.parser import parse_statement
from tests.helpers import monthly_sales
from tests.oracle import assert_mv_matches

pytestmark = [pytest.mark.spark]

TOP = "SELECT m, sum(amount) AS total FROM sales GROUP BY m"
TOP2 = "SELECT m, max(amount) AS total, count(*) AS n FROM sales GROUP BY m"
DEP = "SELECT m, total FROM top WHERE total > 3"
# fails while it runs, not while it is analysed: ANSI casts of text that is no number
FAILING = "SELECT m, CAST(concat('x', id) AS INT) AS total FROM sales"


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    return monthly_sales(tmp_path / "sales", 3, 20)


def _setup(client: Any, sales: Path) -> None:
    client.sql(f"CREATE EXTERNAL TABLE sales USING parquet LOCATION '{sales}'")
    client.sql(f"CREATE MATERIALIZED VIEW top AS {TOP}", raise_on_failure=True)
    client.sql(f"CREATE MATERIALIZED VIEW dep AS {DEP}", raise_on_failure=True)


def _rows(client: Any, name: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in client.table(name).collect())


def _hidden(client: Any) -> tuple[list[str], list[str]]:
    """Names of hidden replacements: catalog rows and Iceberg tables."""
    rt = client.runtime
    with rt.catalog.read() as s:
        rows = [r.name for r in rt.catalog.objects.list(s, hidden=True) if is_replacement(r.name)]
    return rows, [t.name for t in rt.iceberg.list_tables() if is_replacement(t.name)]


def _definition(client: Any, name: str) -> str | None:
    with client.runtime.catalog.read() as s:
        return client.runtime.catalog.objects.get(s, ObjectName.parse(name)).definition


@pytest.mark.parametrize("catalog", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_replace_swaps_in_the_new_definition_and_keeps_readers_of_it(
    make_client: Any, sales: Path, tmp_path: Path, request: pytest.FixtureRequest, catalog: str
) -> None:
    url = request.getfixturevalue("pg_url") if catalog == "postgres" else None
    client = make_client(catalog_url=url)
    _setup(client, sales)
    rt = client.runtime
    old_location = rt.iceberg.load(ObjectName.parse("top")).location()
    old_dir = Path(old_location.removeprefix("file://"))
    old_rows = _rows(client, "top")
    with rt.catalog.read() as s:
        old_runs = [r.run_id for r in rt.catalog.runs.list(s, rt.catalog.objects.get(s, ObjectName.parse("top")).id)]
    seen: list[Any] = []

    def during_build(*_: Any) -> None:  # after each chunk of the hidden build
        seen.append((_rows(client, "top"), _definition(client, "top"), [m.name for m in client.status()]))

    stmt = parse_statement(f"CREATE OR REPLACE MATERIALIZED VIEW top AS {TOP2}")
    replaced = replace_materialized_view(rt, stmt, during_build)

    assert replaced.replaced and not replaced.created and replaced.message == "replaced materialized view 'top'"
    assert (replaced.run.state, replaced.run.mode, replaced.run.name) == ("SUCCESS", "FULL", "top")
    # while the new definition was built, readers saw the old MV, and only it
    assert seen and all(s == (old_rows, TOP, ["dep", "top"]) for s in seen)
    assert_mv_matches(client, "top", TOP2)
    assert _definition(client, "top") == TOP2
    assert _hidden(client) == ([], [])
    # the replaced table is kept, retired, for readers that opened it before the swap ...
    (retired,) = [t for t in rt.iceberg.list_tables() if retired_at(t, ObjectName.parse("top"))]
    assert rt.iceberg.load(retired).location() == old_location and old_dir.is_dir()
    width = len(old_rows[0])  # the table also holds the MV's hidden state columns
    kept = rt.iceberg.load(retired).scan().to_arrow().to_pylist()
    assert sorted(tuple(r.values())[:width] for r in kept) == old_rows
    # ... until vacuum finds it retired longer than the MV's snapshot retention (24 hours)
    assert not any("dropped" in line for line in vacuum(rt))
    with rt.catalog.transaction() as s:
        row = rt.catalog.objects.get(s, ObjectName.parse("top"))
        row.properties = {**(row.properties or {}), "snapshot_retention_hours": "0"}
    assert f"{retired}: dropped (replaced, retired longer than the snapshot retention)" in vacuum(rt)
    assert not old_dir.exists() and not rt.iceberg.exists(retired)
    with rt.catalog.read() as s:
        top = rt.catalog.objects.get(s, ObjectName.parse("top"))
        runs = rt.catalog.runs.list(s, top.id)
        assert [r.run_id for r in runs] == [replaced.run.run_id, *old_runs]  # the history is kept
        assert {r.object_name for r in runs} == {"top"}
        assert top.last_success_run_id == replaced.run.run_id
    # the MV reading it still reads it by name: its next refresh sees the new contents
    assert [(m.name, m.is_active) for m in client.status()] == [("dep", True), ("top", True)]
    assert client.refresh("dep").state == "SUCCESS"
    assert_mv_matches(client, "dep", DEP)
    assert client.refresh("top").state == "SKIPPED"  # the version map is the new definition's


def test_create_or_replace_statement_creates_replaces_and_keeps_the_old_mv_on_failure(client: Any, sales: Path) -> None:
    _setup(client, sales)
    created = client.execute(f"CREATE OR REPLACE MATERIALIZED VIEW fresh PARTITION BY m AS {TOP}")
    assert created.message.startswith("created materialized view 'fresh'; run ")
    assert_mv_matches(client, "fresh", TOP)

    result = client.execute(f"CREATE OR REPLACE MATERIALIZED VIEW top REFRESH ASYNC AS {TOP2}", raise_on_failure=True)
    assert result.message.startswith("replaced materialized view 'top'; run ")
    assert [(m.name, m.refresh_scheme) for m in client.status() if m.name == "top"] == [("top", "ASYNC")]
    assert_mv_matches(client, "top", TOP2)
    before = _rows(client, "top")

    # a build that fails while it runs: the old MV untouched, the error reported, nothing left
    with pytest.raises(RefreshFailedError) as info:
        client.execute(f"CREATE OR REPLACE MATERIALIZED VIEW top AS {FAILING}", raise_on_failure=True)
    assert "CAST_INVALID_INPUT" in str(info.value) and "of 'top' FAILED" in str(info.value)
    assert _rows(client, "top") == before and _definition(client, "top") == TOP2
    assert _hidden(client) == ([], [])
    failed = client.runs("top")[0]
    assert (failed.run_id, failed.state, failed.name) == (info.value.run.run_id, "FAILED", "top")
    message = client.execute(f"CREATE OR REPLACE MATERIALIZED VIEW top AS {FAILING}").message
    assert message.startswith("materialized view 'top' not replaced (the old definition is kept): run ")
    assert client.refresh("top").state == "SKIPPED"  # still fresh: its version map untouched

    # DROP takes the tables it replaced (kept for readers until vacuum) with it
    top = ObjectName.parse("top")
    assert len([t for t in client.runtime.iceberg.list_tables() if retired_at(t, top)]) == 1
    client.sql("DROP MATERIALIZED VIEW dep")
    client.sql("DROP MATERIALIZED VIEW top")
    assert [t.name for t in client.runtime.iceberg.list_tables() if retired_at(t) or t.name == "top"] == []


def test_a_refresh_started_during_the_build_refuses_the_swap(client: Any, sales: Path) -> None:
    _setup(client, sales)
    rt = client.runtime
    top = ObjectName.parse("top")
    before = _rows(client, "top")

    def refresh_starts(*_: Any) -> None:
        with rt.catalog.transaction() as s:
            rt.catalog.objects.begin_refresh(s, rt.catalog.objects.get(s, top), 999, "elsewhere:1", 60.0)

    stmt = parse_statement(f"CREATE OR REPLACE MATERIALIZED VIEW top AS {TOP2}")
    with pytest.raises(BusyError, match="MV 'top' is being refreshed"):
        replace_materialized_view(rt, stmt, refresh_starts)
    assert _rows(client, "top") == before and _definition(client, "top") == TOP
    assert _hidden(client) == ([], [])
    with pytest.raises(BusyError, match=r"^cannot replace 'top': MV 'top' is being refreshed \(state REFRESHING"):
        replace_materialized_view(rt, stmt)


def test_a_replacement_left_behind_is_dropped(client: Any, sales: Path) -> None:
    _setup(client, sales)
    rt = client.runtime
    top = ObjectName.parse("top")
    stmt = parse_statement(f"CREATE MATERIALIZED VIEW top REFRESH DEFERRED AS {TOP2}")
    for token in ("0badc0de", "deadbeef"):  # as a process that died while building them left them
        create_materialized_view(rt, dataclasses.replace(stmt, name=replacement_name(top, token)), checked_as=top)
    rt.iceberg.drop_table(replacement_name(top, "deadbeef"))  # a row without its table
    assert _hidden(client) == (
        ["__smv_replace_top_0badc0de", "__smv_replace_top_deadbeef"],
        ["__smv_replace_top_0badc0de"],
    )
    assert [m.name for m in client.status()] == ["dep", "top"]  # hidden from listings
    assert [r[0] for r in client.sql("SHOW MATERIALIZED VIEWS").collect()] == ["dep", "top"]

    client.sql(f"CREATE OR REPLACE MATERIALIZED VIEW top AS {TOP2}", raise_on_failure=True)
    assert _hidden(client) == ([], [])
    create_materialized_view(rt, dataclasses.replace(stmt, name=replacement_name(top, "0badc0de")), checked_as=top)
    client.sql("DROP MATERIALIZED VIEW dep")
    client.sql("DROP MATERIALIZED VIEW top")
    assert _hidden(client) == ([], [])


@pytest.mark.parametrize(
    ("statement", "error", "message"),
    [
        (
            f"CREATE OR REPLACE MATERIALIZED VIEW sales AS {TOP}",
            ObjectExistsError,
            "'sales' is a table, not a materialized view: CREATE OR REPLACE cannot replace it",
        ),
        (
            "CREATE OR REPLACE MATERIALIZED VIEW top AS SELECT * FROM top",
            AnalysisError,
            "materialized view 'top' cannot read itself",
        ),
        (
            "CREATE OR REPLACE MATERIALIZED VIEW top AS SELECT m, total FROM dep",
            AnalysisError,
            "cycle",
        ),
        (
            "CREATE OR REPLACE MATERIALIZED VIEW top AS SELECT m, nope FROM sales",
            AnalysisError,
            "nope",
        ),
        (
            f"CREATE OR REPLACE MATERIALIZED VIEW IF NOT EXISTS top AS {TOP}",
            ParseError,
            "CREATE OR REPLACE MATERIALIZED VIEW cannot have IF NOT EXISTS: use one or the other",
        ),
        (
            f"CREATE OR REPLACE MATERIALIZED VIEW top REFRESH DEFERRED AS {TOP}",
            ParseError,
            "CREATE OR REPLACE MATERIALIZED VIEW cannot have REFRESH DEFERRED: the new definition is built before "
            "it replaces the old one",
        ),
        (
            "CREATE OR REPLACE TABLE t (id INT, PRIMARY KEY (id))",
            ParseError,
            "cannot parse SQL at line 1, column 19: expected MATERIALIZED VIEW after CREATE OR REPLACE, found 'TABLE'",
        ),
        (
            "REFRESH MATERIALIZED VIEW __smv_replace_top_0badc0de",
            InvalidNameError,
            "invalid name '__smv_replace_top_0badc0de': names starting with '__smv_replace_' or '__smv_retired_' "
            "are sparkmv's hidden tables (replacements being built, replaced tables kept until vacuum)",
        ),
        (
            "DROP MATERIALIZED VIEW __smv_retired_top_20261128090507_0badc0de",
            InvalidNameError,
            "invalid name '__smv_retired_top_20261128090507_0badc0de': names starting with '__smv_replace_' or "
            "'__smv_retired_' are sparkmv's hidden tables (replacements being built, replaced tables kept until "
            "vacuum)",
        ),
    ],
)
def test_bad_replacements_change_nothing(
    client: Any, sales: Path, statement: str, error: type[Exception], message: str
) -> None:
    _setup(client, sales)
    before = _rows(client, "top")
    with pytest.raises(error) as info:
        client.sql(statement)
    assert message in str(info.value)
    assert _rows(client, "top") == before and _definition(client, "top") == TOP
    assert _hidden(client) == ([], [])
