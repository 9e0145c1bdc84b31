"""Bad specs and definitions: one message naming the file, raised before anything is written;
the ``sparkmv pipeline`` command prints it as one ``error:`` line (exit 1; conflicting options
exit 2), and a SQL-only dry-run or a refused project never creates the sparkmv home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparkmv.errors import SparkMvError
from sparkmv.pipeline.project import load_project
from sparkmv.pipeline.spec import find_spec

MV_A = "CREATE MATERIALIZED VIEW a AS SELECT id FROM b;\n"
MV_B = "CREATE MATERIALIZED VIEW b AS SELECT id FROM src;\n"
GOOD_SPEC = "name: p\nstorage: {root}/storage\nlibraries:\n  - glob:\n      include: defs/**\n"


def project(root: Path, spec: str, files: dict[str, str]) -> Path:
    (root / "defs").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / "defs" / name).write_text(text)
    path = root / "spark-pipeline.yml"
    path.write_text(spec.replace("{root}", str(root)))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(SparkMvError) as info:
        load_project(path)
    return str(info.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("name: p\nlibraries: []\n", "Pipeline spec missing required field `storage`."),
        ("storage: /s\n", "Pipeline spec missing required field `name`."),
        ("name: p\nstorage: /s\nowner: me\n", "Pipeline spec field `owner` is unexpected."),
        (
            "name: p\nstorage: /s\nconfiguration: [a]\n",
            "Pipeline spec field `configuration` should be a dict, got list.",
        ),
        (
            "name: p\nstorage: /s\nconfiguration: {a: 1}\n",
            "For pipeline spec field `configuration`, value for key `a` should be a string, got int.",
        ),
        (
            "name: p\nstorage: /s\nlibraries:\n  - glob:\n      include: defs/**/*.sql\n",
            "Invalid glob pattern `defs/**/*.sql` in libraries. "
            "Only file paths, or folder paths ending with /** are allowed.",
        ),
        (
            "name: p\nstorage: /s\nlibraries:\n  - glob:\n      include: nothing/**\n",
            "glob `nothing/**` in libraries matches no file",
        ),
        ("name: p\nstorage: /s\ncatalog: lake\n", "catalog `lake` is not supported"),
        (
            "name: p\nstorage: /s\nconfiguration:\n  sparkmv.refresh: ASYNC EVERY (INTERVAL 0 MINUTE)\n",
            "configuration sparkmv.refresh: EVERY (INTERVAL 0 MINUTE) is out of range",
        ),
    ],
)
def test_bad_spec(tmp_path: Path, spec: str, message: str) -> None:
    path = project(tmp_path, spec, {})
    assert error_of(path).startswith(f"{path}: {message}")


@pytest.mark.parametrize(
    ("files", "where", "message"),
    [
        (
            {"a.sql": MV_A + "\nCREATE MATERIALIZED VIEW c AS SELEC id FROM b"},
            "a.sql",
            "cannot parse SQL at line 3",
        ),
        (
            {"a.sql": MV_A, "b.sql": "CREATE MATERIALIZED VIEW b AS SELECT id FROM a"},
            "a.sql",
            "cycle in the dataset graph: a -> b -> a",
        ),
        (
            {"s.sql": "CREATE STREAMING TABLE s;\nCREATE FLOW f AS INSERT INTO t BY NAME SELECT id FROM STREAM(src)"},
            "s.sql:2",
            "flow f writes to t, which is not a streaming table of the pipeline",
        ),
        (
            {"s.sql": "CREATE STREAMING TABLE s COMMENT 'no flow'"},
            "s.sql:1",
            "streaming table s has no flow: give it AS SELECT ..., or "
            "CREATE FLOW ... AS INSERT INTO s BY NAME SELECT ...",
        ),
        (
            {"m.sql": "CREATE MATERIALIZED VIEW m AS SELECT id FROM STREAM(src)"},
            "m.sql:1",
            "materialized view m reads STREAM(src): only a streaming table or a flow reads a stream "
            "(read src without STREAM)",
        ),
        ({"a.sql": MV_A, "b.sql": MV_A}, "b.sql:1", "dataset a is already defined at"),
        ({"p.py": "raise ValueError('boom in definitions')\n"}, "p.py", "ValueError: boom in definitions"),
        ({"n.txt": "x"}, "spark-pipeline.yml", "unsupported extension. Supported extensions are `.py` and `.sql`."),
    ],
)
def test_bad_definitions(tmp_path: Path, files: dict[str, str], where: str, message: str) -> None:
    path = project(tmp_path, GOOD_SPEC, files)
    text = error_of(path)
    place = path if where == "spark-pipeline.yml" else tmp_path / "defs" / where
    assert text.startswith(f"{place}:"), text
    assert message in text, text


def test_streaming_table_flows_fold_into_one_query_by_name(tmp_path: Path) -> None:
    sql = (
        "CREATE OR REFRESH STREAMING TABLE events PARTITIONED BY (day) TBLPROPERTIES ('quality' = 'raw');\n"
        "CREATE FLOW web AS INSERT INTO events BY NAME SELECT day, id, 'web' AS channel FROM STREAM(web_log);\n"
        "CREATE FLOW app AS INSERT INTO events BY NAME SELECT 'app' AS channel, id, day FROM STREAM(app_log) AS a;\n"
        "CREATE MATERIALIZED VIEW per_day AS SELECT day, count(*) AS n FROM events GROUP BY day;\n"
    )
    p = load_project(project(tmp_path, GOOD_SPEC, {"events.sql": sql}))
    assert [n.display for n in p.graph.order()] == ["events", "per_day"]
    events = p.graph.datasets[next(n for n in p.queries if n.name == "events")]
    assert (events.kind, events.flows, events.partition_by) == ("streaming table", ["web", "app"], "day")
    assert [s.display for s in events.streams] == ["web_log", "app_log"]
    assert events.properties == {"quality": "raw"}
    assert p.queries[events.name] == (
        "SELECT day, id, 'web' AS channel FROM web_log UNION ALL SELECT day, id, 'app' AS channel FROM app_log AS a"
    )
    assert [n.display for n in p.graph.reads[events.name]] == ["web_log", "app_log"]


def test_spec_found_upward_and_sql_graph(tmp_path: Path) -> None:
    sql = "CREATE TEMPORARY VIEW v AS SELECT id FROM src WHERE id > 1;\n" + MV_A + MV_B.replace("src", "v")
    path = project(tmp_path, GOOD_SPEC, {"all.sql": sql})
    (tmp_path / "defs" / "deep").mkdir()
    assert find_spec(tmp_path / "defs" / "deep") == path
    p = load_project(path)
    assert [n.display for n in p.graph.order()] == ["v", "b", "a"]
    b = next(n for n in p.queries if n.name == "b")
    assert p.queries[b] == "SELECT id FROM (SELECT id FROM src WHERE id > 1) AS v"


SPARKMV = [sys.executable, "-m", "sparkmv.cli.main"]


def sparkmv(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        [*SPARKMV, "--home", str(cwd / "home"), *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


def test_cli_errors_dry_run_and_init(tmp_path: Path) -> None:
    path = project(tmp_path, "name: p\nlibraries: []\n", {})
    out = sparkmv(tmp_path / "defs", "pipeline", "run")  # the spec is found upward
    assert (out.returncode, out.stderr) == (1, f"error: {path}: Pipeline spec missing required field `storage`.\n")
    path = project(tmp_path, GOOD_SPEC, {"a.sql": MV_A, "b.sql": "CREATE MATERIALIZED VIEW b AS SELECT id FROM a"})
    out = sparkmv(tmp_path, "pipeline", "dry-run")
    assert out.returncode == 1
    assert out.stderr == f"error: {tmp_path / 'defs' / 'a.sql'}: cycle in the dataset graph: a -> b -> a\n"
    out = sparkmv(tmp_path, "pipeline", "run", "--full-refresh-all", "--full-refresh", "a")
    assert out.returncode == 2 and "--full-refresh-all option conflicts with --full-refresh" in out.stderr

    (tmp_path / "defs" / "b.sql").write_text(MV_B)
    out = sparkmv(tmp_path, "pipeline", "dry-run", "--spec", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1:] == [
        f"b  materialized view (sql)  {tmp_path / 'defs' / 'b.sql'}:1  reads: src",
        f"a  materialized view (sql)  {tmp_path / 'defs' / 'a.sql'}:1  reads: b",
        "dry run is COMPLETED: 2 datasets",
    ]
    assert not (tmp_path / "home").exists()  # nothing written, no Spark started

    out = sparkmv(tmp_path, "pipeline", "init", "proj")
    assert out.returncode == 0, out.stderr
    made = sorted(str(p.relative_to(tmp_path / "proj")) for p in (tmp_path / "proj").rglob("*"))
    assert made == [
        "pipeline-storage",
        "spark-pipeline.yml",
        "transformations",
        "transformations/example_python_materialized_view.py",
        "transformations/example_sql_materialized_view.sql",
    ]
    spec = (tmp_path / "proj" / "spark-pipeline.yml").read_text()
    assert f"storage: file://{(tmp_path / 'proj' / 'pipeline-storage').resolve()}\n" in spec
    out = sparkmv(tmp_path, "pipeline", "init", "proj")
    assert out.returncode == 1 and "error: Directory 'proj' already exists." in out.stderr


def test_selection_names_datasets_of_the_pipeline(tmp_path: Path) -> None:
    from sparkmv.names import ObjectName
    from sparkmv.pipeline.project import selection

    p = load_project(project(tmp_path, GOOD_SPEC.replace("name: p", "name: p\ndatabase: Sales"), {"b.sql": MV_B}))
    assert selection(p, ["b", "sales.b"]) == {ObjectName("sales", "b")}
    assert p.queries[ObjectName("sales", "b")] == "SELECT id FROM sales.src"  # read in the spec's database
    with pytest.raises(SparkMvError, match=r"^nope: no dataset of that name in pipeline p$"):
        selection(p, ["nope"])
