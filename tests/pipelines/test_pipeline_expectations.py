"""Expectations of pipeline definitions (no Spark): SQL ``CONSTRAINT name EXPECT (...) [ON
VIOLATION ...]`` in a column list, Python ``@dp.expect...`` stacked with the dataset decorator
in either order; each dataset loads with its ``Dataset.expectations``, a bad one is refused
with the file (and line) when the project loads, the generated sparkmv ``CREATE MATERIALIZED
VIEW`` carries them, and a change of them is a changed definition."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from sparkmv.analysis.expectations import Expectation
from sparkmv.names import ObjectName
from sparkmv.pipeline.project import Project, load_project
from sparkmv.pipeline.sql_datasets import create_statement, definition_changed
from sparkmv.sql.parser import parse_statement
from sparkmv.sql.statements import CreateMaterializedView
from tests.pipelines.test_pipeline_errors import GOOD_SPEC, error_of, project

SQL = """CREATE OR REFRESH MATERIALIZED VIEW orders (
  CONSTRAINT valid_id EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW,
  id BIGINT NOT NULL COMMENT 'the id',
  constraint big expect (amount < 1000 OR tag IN ('a,b', ')')) on violation fail update,
  amount DOUBLE,
  tag STRING,
  CONSTRAINT `has tag` EXPECT (tag IS NOT NULL)
) PARTITIONED BY (tag) AS SELECT id, amount, tag FROM src;
CREATE STREAMING TABLE events (CONSTRAINT recent EXPECT (day >= '2024-01-01') ON VIOLATION DROP ROW)
  AS SELECT day, id FROM STREAM(raw);
CREATE STREAMING TABLE fed (CONSTRAINT k EXPECT (k > 0));
CREATE FLOW f1 AS INSERT INTO fed BY NAME SELECT k FROM STREAM(raw);
CREATE VIEW kept (n, CONSTRAINT n_pos EXPECT (n > 0)) AS SELECT count(*) AS n FROM src;
CREATE MATERIALIZED VIEW plain AS SELECT 1 AS a;
"""

PY = """from pyspark import pipelines as dp


@dp.materialized_view
@dp.expect("valid_id", "id IS NOT NULL")
@dp.expect_or_drop("positive", " amount > 0 ")
@dp.expect_or_fail("small", "amount < 1000")
def below():
    return None


@dp.expect_all({"a": "x > 1", "b": "y < 2"})
@dp.expect_all_or_drop({"c": "x IS NOT NULL"})
@dp.table(name="above")
def above_fn():
    return None


@dp.expect_all_or_fail({"top": "z = 1"})
@dp.materialized_view(name="mixed")
@dp.expect("bottom", "z IN (1, 2)")
def mixed_fn():
    return None


@dp.materialized_view
def none():
    return None
"""


def _expectations(p: Project) -> dict[str, list[Expectation]]:
    return {n.display: d.expectations for n, d in p.graph.datasets.items()}


def test_sql_constraints_mixed_with_columns(tmp_path: Path) -> None:
    p = load_project(project(tmp_path, GOOD_SPEC, {"a.sql": SQL}))
    assert _expectations(p) == {
        "orders": [
            Expectation("valid_id", "id IS NOT NULL", "drop"),
            Expectation("big", "amount < 1000 OR tag IN ('a,b', ')')", "fail"),
            Expectation("has tag", "tag IS NOT NULL", "warn"),
        ],
        "events": [Expectation("recent", "day >= '2024-01-01'", "drop")],
        "fed": [Expectation("k", "k > 0", "warn")],
        "kept": [Expectation("n_pos", "n > 0", "warn")],
        "plain": [],
    }
    orders = p.graph.datasets[ObjectName("default", "orders")]
    assert ([c.name for c in orders.columns], orders.partition_by) == (["id", "amount", "tag"], "tag")
    assert p.queries[orders.name] == (
        "SELECT `id`, `amount`, `tag` FROM (SELECT id, amount, tag FROM src) AS __smv_columns"
    )
    assert p.queries[ObjectName("default", "kept")] == "SELECT COUNT(*) AS n FROM src"


def test_python_decorators_in_either_order(tmp_path: Path) -> None:
    p = load_project(project(tmp_path, GOOD_SPEC, {"p.py": PY}))
    assert _expectations(p) == {
        "below": [
            Expectation("valid_id", "id IS NOT NULL", "warn"),
            Expectation("positive", "amount > 0", "drop"),
            Expectation("small", "amount < 1000", "fail"),
        ],
        "above": [
            Expectation("a", "x > 1", "warn"),
            Expectation("b", "y < 2", "warn"),
            Expectation("c", "x IS NOT NULL", "drop"),
        ],
        "mixed": [Expectation("top", "z = 1", "fail"), Expectation("bottom", "z IN (1, 2)", "warn")],
        "none": [],
    }
    assert p.graph.datasets[ObjectName("default", "above")].kind == "streaming table"
    import pyspark.pipelines as dp

    assert not hasattr(dp, "expect")  # only while sparkmv runs the project's files


def test_create_statement_carries_the_expectations(tmp_path: Path) -> None:
    p = load_project(project(tmp_path, GOOD_SPEC, {"a.sql": SQL}))
    for name in ("orders", "events", "fed", "plain"):
        ds = p.graph.datasets[ObjectName("default", name)]
        query = p.queries[ds.name]
        for scheme in (None, "MANUAL"):
            stmt = parse_statement(create_statement(ds.name, ds, query, scheme))
            assert isinstance(stmt, CreateMaterializedView)
            assert (stmt.expectations, stmt.query, stmt.partition_by) == (
                tuple(ds.expectations),
                query,
                ds.partition_by,
            )


def test_changed_expectations_are_a_changed_definition(tmp_path: Path) -> None:
    p = load_project(project(tmp_path, GOOD_SPEC, {"a.sql": SQL}))
    ds = p.graph.datasets[ObjectName("default", "orders")]
    query = p.queries[ds.name]

    def row(expectations: list[Expectation]) -> object:
        options = {"expectations": [e.to_json() for e in expectations]}
        return SimpleNamespace(partition_by="tag", definition=query, options=options)

    assert not definition_changed(row(ds.expectations), query, ds)  # type: ignore[arg-type]
    assert not definition_changed(row(ds.expectations[::-1]), query, ds)  # type: ignore[arg-type]
    changed = [*ds.expectations[:2], Expectation("has tag", "tag IS NOT NULL", "drop")]
    assert definition_changed(row(changed), query, ds)  # type: ignore[arg-type]
    assert definition_changed(row(ds.expectations[:1]), query, ds)  # type: ignore[arg-type]
    plain = p.graph.datasets[ObjectName("default", "plain")]
    bare = SimpleNamespace(partition_by=None, definition=p.queries[plain.name], options={})
    assert not definition_changed(bare, p.queries[plain.name], plain)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("files", "where", "message"),
    [
        (
            {"a.sql": "CREATE MATERIALIZED VIEW m (CONSTRAINT c EXPECT (x > 0) ON VIOLATION DELETE) AS SELECT 1"},
            "a.sql",
            "cannot parse SQL at line 1, column 70: expected DROP ROW or FAIL UPDATE after ON VIOLATION "
            "(CONSTRAINT c), found 'DELETE' (statement 1, line 1)",
        ),
        (
            {
                "a.sql": "CREATE MATERIALIZED VIEW ok AS SELECT 1 AS x;\n\nCREATE MATERIALIZED VIEW m (\n"
                "  x INT, CONSTRAINT c EXPECT x > 0) AS SELECT 1 AS x"
            },
            "a.sql",
            "cannot parse SQL at line 4, column 30: expected ( after EXPECT (the condition of CONSTRAINT c is "
            "written in parentheses), found 'x'",
        ),
        (
            {"a.sql": "CREATE MATERIALIZED VIEW m (CONSTRAINT r EXPECT (rand() > 0.5)) AS SELECT 1 AS x"},
            "a.sql",
            "expectation 'r' of 'm' must be a deterministic boolean over the row: 'rand() > 0.5': "
            "rand() is not deterministic (statement 1, line 1)",
        ),
        (
            {
                "a.sql": "CREATE MATERIALIZED VIEW m (CONSTRAINT c EXPECT (x > 0), CONSTRAINT C EXPECT (x < 9))\n"
                "AS SELECT 1 AS x"
            },
            "a.sql",
            "expectation 'C' of 'm' is defined twice (statement 1, line 1)",
        ),
        (
            {"a.sql": "CREATE TEMPORARY VIEW v (CONSTRAINT c EXPECT (x > 0)) AS SELECT 1 AS x"},
            "a.sql",
            "temporary view v: expectations on a temporary view are not supported by sparkmv pipeline "
            "(put them on the materialized view or streaming table that reads it) (statement 1, line 1)",
        ),
        (
            {
                "p.py": "from pyspark import pipelines as dp\n\n@dp.materialized_view\n"
                "@dp.expect('s', 'sum(x) > 0')\ndef m():\n    return None\n"
            },
            "p.py:3",
            "expectation 's' of 'm' must be a deterministic boolean over the row: 'sum(x) > 0': "
            "sum(x) is an aggregate, not a condition over one row",
        ),
        (
            {
                "p.py": "from pyspark import pipelines as dp\n\n@dp.temporary_view\n"
                "@dp.expect('c', 'x > 0')\ndef v():\n    return None\n"
            },
            "p.py:3",
            "temporary view v: expectations on a temporary view are not supported by sparkmv pipeline "
            "(put them on the dataset: @dp.materialized_view or @dp.table)",
        ),
        (
            {
                "p.py": "from pyspark import pipelines as dp\n\ndp.create_streaming_table('t')\n\n"
                "@dp.expect('c', 'x > 0')\n@dp.append_flow(target='t')\ndef f():\n    return None\n"
            },
            "p.py:6",
            "flow f: expectations on an @dp.append_flow are not supported by sparkmv pipeline "
            "(put them on the dataset: @dp.materialized_view or @dp.table)",
        ),
        (
            {
                "p.py": "from pyspark import pipelines as dp\n\n@dp.materialized_view\n"
                "@dp.expect('c', 1)\ndef m():\n    return None\n"
            },
            "p.py:4",
            "TypeError: dp.expect: the condition must be a string, not int",
        ),
        (
            {
                "p.py": "from pyspark import pipelines as dp\n\n@dp.materialized_view\n"
                "@dp.expect_all_or_drop([('c', 'x > 0')])\ndef m():\n    return None\n"
            },
            "p.py:4",
            "TypeError: dp.expect_all_or_drop: give a dict of expectation names to conditions, not list",
        ),
        (
            {"p.py": "from pyspark import pipelines as dp\n\ndp.expect('c', 'x > 0')(None)\n"},
            "p.py:3",
            "TypeError: dp.expect decorates a dataset's query function: put it with @dp.materialized_view or @dp.table",
        ),
    ],
)
def test_bad_expectations_name_the_file(tmp_path: Path, files: dict[str, str], where: str, message: str) -> None:
    path = project(tmp_path, GOOD_SPEC, files)
    assert error_of(path) == f"{tmp_path / 'defs' / where}: {message}"
