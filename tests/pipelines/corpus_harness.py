"""Run one SDP project of ``tests/pipelines/corpus/`` with pyspark's own ``spark-pipelines run``
and with ``sparkmv pipeline run``, each on its own copy of the project and its generated data,
and compare every dataset after each step.

A project is a folder with ``spark-pipeline.yml``, ``transformations/`` and ``gen.py``; ``gen.py``
defines ``DATASETS`` (dataset name -> kind: ``mv``, ``table`` (streaming table), ``view``
(persisted view) or ``sink:<folder>`` (a sink writing Parquet into that folder of the project))
and ``generate(data: Path, step: str)``, which writes (``initial``) or changes (``append``:
new files; ``mutate``: one file removed or rewritten) the input files under ``data`` (the
project's ``data/`` folder, read by relative paths or the spec's ``configuration``),
deterministically (seeded).

Steps and what sparkmv is compared with:

The spec's ``storage`` line is replaced by the copy's own ``pipeline-storage`` folder, and a
``corpus.data`` key of its ``configuration`` by the copy's absolute ``data`` folder (SQL reads
it as ``${corpus.data}``, Spark's variable substitution).

- ``initial``: ``spark-pipelines run`` against ``sparkmv pipeline run``, both on fresh copies.
- ``append``: new files in both copies, then ``spark-pipelines run`` (a streaming flow reads
  the new files) against ``sparkmv pipeline run``.
- ``mutate``: a file removed or rewritten in both copies, then ``sparkmv pipeline run``
  against two references: ``spark-pipelines run`` (Spark's streaming sources ignore a deleted
  file and a rewritten one; so do sparkmv's Python streaming tables, which run Structured
  Streaming) and ``spark-pipelines run --full-refresh-all`` (every dataset from the current
  files: sparkmv's documented semantics for SQL datasets, which apply deletes in sources:
  README, "SQL streaming table"; for materialized views both references agree). A dataset is
  equal when it equals either; the details name which.

Each comparison is of multisets of rows with their column names (floats to 6 decimals,
values as text, Hive's null partition as NULL). ``spark-pipelines``' tables are read from
their Parquet files in its warehouse (a Derby metastore and the warehouse are set in the
``spark-defaults.conf`` of its ``SPARK_CONF_DIR``); a persisted view through a PySpark session
over that metastore. sparkmv's through pyiceberg (its ``SqlCatalog`` in ``<home>/catalog.db``).
The technique per dataset is parsed from the lines ``sparkmv pipeline run`` prints.

Run one project from the command line: ``python -m tests.pipelines.corpus_harness PROJECT``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

CORPUS = Path(__file__).parent / "corpus"
STEPS = ("initial", "append", "mutate")
BIN = Path(sys.executable).parent
SDP_ARGS = {"initial": ("run",), "append": ("run",), "mutate": ("run",)}
FULL_REFRESH = ("run", "--full-refresh-all")
"""The second reference of the ``mutate`` step (see the module docstring)."""
TIMEOUT = 900
HIDDEN_PREFIX = "__smv_"
_LINE = re.compile(
    r"^\S+ -> \S+  (\S+) \((.*?)\)  (SUCCESS|SKIPPED|FAILED|NOT RUN|EXCLUDED)  (\S+)  rows (\S+)\s*(.*)$"
)


@dataclass
class DatasetOutcome:
    """One dataset after one step: equal to ``spark-pipelines``' or not, and how sparkmv ran it."""

    name: str
    kind: str
    equal: bool
    sdp_rows: int | None
    sparkmv_rows: int | None
    state: str | None = None  # sparkmv's state of the dataset (None: no report line)
    technique: str | None = None
    reason: str | None = None
    note: str = ""  # why it could not be read, or the first differing rows
    reference: str = ""  # mutate step: the spark-pipelines run it equals ("run", "--full-refresh-all")


@dataclass
class StepOutcome:
    project: str
    step: str
    sdp_command: str
    sparkmv_exit: int
    sparkmv_error: str  # the `error:` lines of sparkmv's run
    datasets: list[DatasetOutcome] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def equal(self) -> int:
        return sum(d.equal for d in self.datasets)

    def mvs_not_full(self) -> tuple[int, int]:
        """(MVs whose technique was not FULL, MVs): meaningful after ``append``."""
        mvs = [d for d in self.datasets if d.kind == "mv"]
        return sum(d.technique not in (None, "FULL") for d in mvs), len(mvs)


def load_generator(project: str) -> ModuleType:
    """The project's ``gen.py`` as a module (``DATASETS``, ``generate``)."""
    path = CORPUS / project / "gen.py"
    spec = importlib.util.spec_from_file_location(f"corpus_gen_{project}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def projects() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if (p / "spark-pipeline.yml").is_file())


# -- the two copies ---------------------------------------------------------------------------


def prepare(project: str, work: Path) -> dict[str, Path]:
    """Copy the project to ``work/sdp`` and ``work/sparkmv``, generate the initial data in each
    copy's ``data/``, write ``spark-pipelines``' ``spark-defaults.conf``; return the folders."""
    gen = load_generator(project)
    folders = {"sdp": work / "sdp", "sparkmv": work / "sparkmv"}
    for folder in folders.values():
        shutil.copytree(CORPUS / project, folder, ignore=shutil.ignore_patterns("gen.py", "__pycache__"))
        gen.generate(folder / "data", "initial")
        spec = folder / "spark-pipeline.yml"  # SDP wants an absolute URI: the copy's own folder
        text = re.sub(r"(?m)^storage: .*$", f"storage: file://{folder / 'pipeline-storage'}", spec.read_text())
        text = re.sub(r"(?m)^(\s+corpus\.data): .*$", lambda m, data=folder / "data": f"{m.group(1)}: {data}", text)
        spec.write_text(text)
    conf = work / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "spark.sql.catalogImplementation hive\n"
        f"spark.sql.warehouse.dir {work / 'warehouse'}\n"
        f"spark.hadoop.javax.jdo.option.ConnectionURL jdbc:derby:;databaseName={work / 'metastore'};create=true\n"
        "spark.sql.shuffle.partitions 2\nspark.ui.enabled false\n"
    )
    return folders


def run_sdp(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``spark-pipelines <args> --remote local[2]`` in the ``sdp`` copy (its own JVM)."""
    env = {**os.environ, "SPARK_CONF_DIR": str(work / "conf"), "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    # pyspark's local Connect server takes port 15002 unless SPARK_TESTING is set (then an
    # ephemeral port, which its client finds): two runs at once would collide otherwise
    env["SPARK_TESTING"] = "1"
    cmd = [str(BIN / "spark-pipelines"), *args, "--remote", "local[2]"]
    return subprocess.run(cmd, cwd=work / "sdp", env=env, capture_output=True, text=True, timeout=TIMEOUT)


def run_sparkmv(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``sparkmv pipeline <args>`` as users run it, in the ``sparkmv`` copy, home ``work/home``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "SPARKMV_SPARK_MASTER": "local[2]"}
    cmd = [sys.executable, "-m", "sparkmv.cli.main", "--home", str(work / "home")]
    cmd += ["--conf", "spark.sql.shuffle.partitions=2", "pipeline", *args]
    return subprocess.run(cmd, cwd=work / "sparkmv", capture_output=True, text=True, env=env, timeout=TIMEOUT)


def report_lines(stdout: str) -> dict[str, tuple[str, str, str | None, int | None, str]]:
    """sparkmv's report: dataset name (without namespace) -> (source, state, technique, rows, reason)."""
    out: dict[str, tuple[str, str, str | None, int | None, str]] = {}
    for line in stdout.splitlines():
        m = _LINE.match(line)
        if m:
            name = m.group(1).rsplit(".", 1)[-1]
            technique = None if m.group(4) == "-" else m.group(4)
            rows = None if m.group(5) == "-" else int(m.group(5))
            out[name] = (m.group(2), m.group(3), technique, rows, m.group(6))
    return out


# -- reading the datasets ---------------------------------------------------------------------

Rows = tuple[tuple[str, ...], Counter[tuple[str | None, ...]]]


def _text(value: Any) -> str | None:
    if value is None or value == "__HIVE_DEFAULT_PARTITION__":
        return None
    if isinstance(value, float):
        return repr(round(value, 6) + 0.0)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def normalize(columns: list[str], rows: list[dict[str, Any]]) -> Rows:
    """Rows as a multiset keyed by the sorted column names (so column order is not compared)."""
    names = tuple(sorted(c.lower() for c in columns))
    lowered = [{k.lower(): v for k, v in r.items()} for r in rows]
    return names, Counter(tuple(_text(r.get(c)) for c in names) for r in lowered)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.parts)


def _parquet_rows(folder: Path) -> Rows | None:
    import pyarrow.dataset as pads

    if not folder.is_dir():
        return None
    # data files only: not a streaming sink's _spark_metadata, a _SUCCESS or a .crc
    files = [str(p) for p in folder.rglob("*") if p.is_file() and not _hidden(p.relative_to(folder))]
    if not files:
        return normalize([], [])
    data = pads.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(folder)).to_table()
    return normalize(data.column_names, data.to_pylist())


def sdp_table_folder(work: Path, name: str, database: str | None) -> Path:
    base = work / "warehouse"
    return base / name if database in (None, "default") else base / f"{database}.db" / name


def sdp_view_rows(work: Path, names: list[str], database: str | None) -> dict[str, Rows]:
    """Persisted views of ``spark-pipelines``: read by a PySpark session over its metastore."""
    if not names:
        return {}
    script = (
        "import json, sys\nfrom pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.master('local[1]').enableHiveSupport().getOrCreate()\n"
        "out = {}\n"
        "for n in sys.argv[2:]:\n"
        "    df = spark.table(sys.argv[1] + '.' + n)\n"
        "    out[n] = [df.columns, [r.asDict() for r in df.collect()]]\n"
        "print('ROWS' + json.dumps(out, default=str))\n"
    )
    env = {**os.environ, "SPARK_CONF_DIR": str(work / "conf"), "PYSPARK_PYTHON": sys.executable}
    args = [sys.executable, "-c", script, database or "default", *names]
    done = subprocess.run(args, cwd=work / "sdp", env=env, capture_output=True, text=True, timeout=TIMEOUT)
    line = next((x for x in done.stdout.splitlines() if x.startswith("ROWS")), None)
    if line is None:
        return {}
    return {n: normalize(c, r) for n, (c, r) in json.loads(line[4:]).items()}


def sparkmv_rows(work: Path, names: list[str], database: str | None) -> dict[str, Rows]:
    """sparkmv's datasets through pyiceberg (its ``SqlCatalog`` named ``sparkmv``)."""
    from pyiceberg.catalog.sql import SqlCatalog

    home = work / "home"
    if not (home / "catalog.db").is_file():
        return {}
    catalog = SqlCatalog("sparkmv", uri=f"sqlite:///{home / 'catalog.db'}", warehouse=f"file://{home / 'warehouse'}")
    out: dict[str, Rows] = {}
    for name in names:
        try:
            table = catalog.load_table((database or "default", name)).scan().to_arrow()
        except Exception:  # not an Iceberg table of sparkmv's (refused, failed, a view)
            continue
        # sparkmv's own state columns (``__smv_count``, ...) are not the MV's: left out
        columns = [c for c in table.column_names if not c.startswith(HIDDEN_PREFIX)]
        out[name] = normalize(columns, table.select(columns).to_pylist())
    catalog.engine.dispose()
    return out


def _diff(a: Rows, b: Rows) -> str:
    if a[0] != b[0]:
        return f"columns {list(a[0])} vs {list(b[0])}"
    only_a, only_b = a[1] - b[1], b[1] - a[1]
    return f"only spark-pipelines {list(only_a.elements())[:3]}; only sparkmv {list(only_b.elements())[:3]}"


# -- one project ------------------------------------------------------------------------------


def _database(folder: Path) -> str | None:
    import yaml

    spec = yaml.safe_load((folder / "spark-pipeline.yml").read_text())
    return spec.get("database") or spec.get("schema")


def compare(project: str, step: str, work: Path, sdp: subprocess.CompletedProcess[str], smv: Any) -> StepOutcome:
    """Read every dataset of ``DATASETS`` from both tools and compare them."""
    kinds: dict[str, str] = load_generator(project).DATASETS
    database = _database(work / "sdp")
    errors = "\n".join(x for x in smv.stderr.splitlines() if x.startswith("error:"))
    if smv.returncode != 0 and not errors:  # a crash: its last line (the exception)
        errors = (smv.stderr.strip().splitlines() or ["no output"])[-1]
    out = StepOutcome(project, step, "spark-pipelines " + " ".join(SDP_ARGS[step]), smv.returncode, errors)
    views = sdp_view_rows(work, [n for n, k in kinds.items() if k == "view"], database)
    mine = sparkmv_rows(work, [n for n, k in kinds.items() if not k.startswith("sink:")], database)
    lines = report_lines(smv.stdout)
    for name, kind in kinds.items():
        if kind.startswith("sink:"):
            theirs = _parquet_rows(work / "sdp" / kind[5:])
            ours = _parquet_rows(work / "sparkmv" / kind[5:])
        else:
            theirs = views.get(name) if kind == "view" else _parquet_rows(sdp_table_folder(work, name, database))
            ours = mine.get(name)
        line = lines.get(name)
        equal = theirs is not None and ours is not None and theirs == ours
        note = "" if equal else ("not read" if theirs is None or ours is None else _diff(theirs, ours))
        if theirs is None and sdp.returncode != 0:
            note = "spark-pipelines failed"
        out.datasets.append(
            DatasetOutcome(
                name,
                kind,
                equal,
                None if theirs is None else sum(theirs[1].values()),
                None if ours is None else sum(ours[1].values()),
                line[1] if line else None,
                line[2] if line else None,
                line[4] if line else None,
                note,
            )
        )
    return out


def sdp_error(sdp: subprocess.CompletedProcess[str]) -> str:
    """The exception lines of a failed ``spark-pipelines`` run (its stack traces left out)."""
    lines = (sdp.stdout + sdp.stderr).splitlines()
    found = [x for x in lines if re.search(r"(Exception|Error)\b.*: |^\[[A-Z_]+\]", x) and not x.startswith("\tat ")]
    return "\n".join(dict.fromkeys(found)) or "\n".join(lines[-20:])


def either(plain: StepOutcome, full: StepOutcome) -> StepOutcome:
    """The ``mutate`` step against two references: a dataset is equal when it equals
    ``spark-pipelines run``'s (Structured Streaming's semantics: sparkmv's Python streaming
    tables and what reads only them) or ``run --full-refresh-all``'s (a table equals its query:
    sparkmv's SQL datasets); its ``reference`` names the one it equals."""
    plain.sdp_command = "spark-pipelines run, or run --full-refresh-all"
    for mine, other in zip(plain.datasets, full.datasets, strict=True):
        if mine.equal:
            mine.reference = "run"
        elif other.equal:
            mine.equal, mine.sdp_rows, mine.note, mine.reference = True, other.sdp_rows, "", "--full-refresh-all"
        else:
            mine.note = f"run: {mine.note}; --full-refresh-all: {other.note}"
    return plain


def refused(smv: subprocess.CompletedProcess[str]) -> bool:
    """sparkmv refused the project before running any dataset (exit 1, no report line)."""
    return smv.returncode != 0 and not report_lines(smv.stdout)


def run_project(project: str, work: Path, steps: tuple[str, ...] = STEPS) -> list[StepOutcome]:
    """Every step of ``project`` in ``work`` (an empty folder): one :class:`StepOutcome` each,
    up to the first step sparkmv refuses (:func:`refused`). A ``spark-pipelines`` run that
    fails raises ``AssertionError`` (every project of the corpus must run there)."""
    prepare(project, work)
    gen = load_generator(project)
    results = []
    for step in steps:
        if step != "initial":
            for tool in ("sdp", "sparkmv"):
                gen.generate(work / tool / "data", step)
        t0 = time.monotonic()
        sdp = run_sdp(work, *SDP_ARGS[step])
        t1 = time.monotonic()
        assert sdp.returncode == 0, f"spark-pipelines {step} of {project} failed: {sdp_error(sdp)}"
        smv = run_sparkmv(work, "run")
        t2 = time.monotonic()
        outcome = compare(project, step, work, sdp, smv)
        if step == "mutate":
            full = run_sdp(work, *FULL_REFRESH)
            assert full.returncode == 0, f"spark-pipelines --full-refresh-all of {project} failed: {sdp_error(full)}"
            outcome = either(outcome, compare(project, step, work, full, smv))
        outcome.seconds = {"spark-pipelines": round(t1 - t0, 1), "sparkmv": round(t2 - t1, 1)}
        (work / f"sparkmv-{step}.log").write_text(smv.stdout + smv.stderr)
        print(details([outcome]), file=sys.stderr, flush=True)  # progress: a step takes minutes
        results.append(outcome)
        if refused(smv):  # nothing ran: the later steps would compare nothing
            break
    return results


def table(outcomes: list[StepOutcome]) -> str:
    """The report: one Markdown row per project and step."""
    head = "| project | step | datasets equal / total | MVs not FULL after append / MVs | sparkmv exit | note |\n"
    head += "|---|---|---|---|---|---|\n"
    rows = []
    for o in outcomes:
        not_full = "{} / {}".format(*o.mvs_not_full()) if o.step == "append" else ""
        note = o.sparkmv_error.splitlines()[0][:140] if o.sparkmv_error else ""
        if not note:
            bad = [f"{d.name}: {d.note[:80]}" for d in o.datasets if not d.equal]
            note = "; ".join(bad)[:200]
        rows.append(
            f"| {o.project} | {o.step} | {o.equal} / {len(o.datasets)} | {not_full} | {o.sparkmv_exit} | {note} |"
        )
    return head + "\n".join(rows) + "\n"


def details(outcomes: list[StepOutcome]) -> str:
    """Per step per dataset: equal, rows of each tool, sparkmv's state and technique."""
    lines = []
    for o in outcomes:
        lines.append(f"{o.project} {o.step} (sparkmv vs {o.sdp_command}; seconds {o.seconds})")
        if o.sparkmv_error:
            lines.append(f"  sparkmv exit {o.sparkmv_exit}: {o.sparkmv_error}")
        for d in o.datasets:
            mark = "equal" if d.equal else "DIFFERENT"
            lines.append(
                f"  {d.name} ({d.kind}): {mark}; rows {d.sdp_rows} vs {d.sparkmv_rows}; "
                f"{d.state} {d.technique} {d.reason or ''} {d.note}".rstrip()
                + (f" [equals spark-pipelines {d.reference}]" if d.reference else "")
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    import tempfile

    outcomes: list[StepOutcome] = []
    for project in argv or projects():
        with tempfile.TemporaryDirectory(prefix=f"corpus-{project}-") as tmp:
            outcomes += run_project(project, Path(tmp))
        print(details(outcomes[-len(STEPS) :]), flush=True)
    print(table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
