"""The SDP corpus report: every project of ``tests/pipelines/corpus/`` run by
``spark-pipelines run`` and ``sparkmv pipeline run`` on its own copy of the generated data
(``tests/pipelines/corpus_harness.py``); not a test.

Writes a Markdown table (project, step, datasets equal / total, MVs not FULL after the append /
MVs, sparkmv's exit code and its first error or the differing datasets) and, below it, every
dataset per step with both tools' row counts and sparkmv's state and technique.

Usage: ``PYTHONPATH=src:. .venv/bin/python bench/corpus_report.py [--out FILE] [PROJECT ...]``
(default: every project, the report to stdout and to ``corpus-report.md`` in the current
folder). One project takes three ``spark-pipelines`` JVMs and three sparkmv runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.pipelines.corpus_harness import StepOutcome, details, projects, run_project, table


def _write(out: Path, outcomes: list[StepOutcome]) -> None:
    out.write_text("## SDP corpus\n\n" + table(outcomes) + "\n```\n" + details(outcomes) + "```\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*", help="projects of tests/pipelines/corpus (default: all)")
    parser.add_argument("--out", type=Path, default=Path("corpus-report.md"))
    args = parser.parse_args()
    outcomes: list[StepOutcome] = []
    for project in args.projects or projects():
        with tempfile.TemporaryDirectory(prefix=f"corpus-{project}-") as tmp:
            try:
                mine = run_project(project, Path(tmp))
            except AssertionError as exc:  # spark-pipelines itself failed on the project
                print(f"{project}: {str(exc)[:2000]}", file=sys.stderr)
                continue
        outcomes += mine
        print(details(mine), flush=True)
        _write(args.out, outcomes)  # after each project: the whole corpus takes long
    _write(args.out, outcomes)
    print(table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
