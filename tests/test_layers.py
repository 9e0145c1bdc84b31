"""The layer contract ([tool.importlinter] in pyproject.toml) holds, and catches a wrong import.

``make test`` and ``make lint`` run ``lint-imports`` on the tree; these tests run it on a
temporary copy of the package, once unmodified (kept) and once with one import that points
upward (broken), so a contract that silently checks nothing would fail here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "src" / "sparkmv", tmp_path / "src" / "sparkmv", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the dev extra (import-linter)")
    return _copy(tmp_path)


def test_the_unmodified_package_keeps_every_contract(copy: Path) -> None:
    result = _lint(copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract", "offence"),
    [
        (
            "catalog/clock.py",
            "from sparkmv.refresh import planner",
            "layers (shared/DESIGN.md): dependencies point downward only",
            "sparkmv.catalog.clock -> sparkmv.refresh.planner",
        ),
        (
            "services/status.py",
            "import pyspark",
            "Spark is imported only in storage, sources and refresh",
            "sparkmv.services.status -> pyspark",
        ),
        (
            "refresh/planner.py",
            "from sparkmv.sql import statements",
            "parsed statements are consumed by client and services only",
            "sparkmv.refresh.planner -> sparkmv.sql.statements",
        ),
        (
            "ui/graph.py",
            "import pyspark",
            "Spark is imported only in storage, sources and refresh",
            "sparkmv.ui.graph -> pyspark",
        ),
        (
            "client/queries.py",
            "from sparkmv.ui import app",
            "layers (shared/DESIGN.md): dependencies point downward only",
            "sparkmv.client.queries -> sparkmv.ui.app",
        ),
        (
            "cli/render.py",
            "from sparkmv.demo import run",
            "the demo is imported by nothing",
            "sparkmv.cli.render -> sparkmv.demo.run",
        ),
        (
            "sources/pinned.py",
            "from sparkmv.sources import changes",
            "no import cycles among the modules of a package",
            ".pinned -> .changes",
        ),
    ],
)
def test_one_wrong_import_breaks_its_contract(
    copy: Path, module: str, bad_import: str, contract: str, offence: str
) -> None:
    path = copy / "src" / "sparkmv" / module
    path.write_text(path.read_text() + f"\n{bad_import}  # noqa: E402,F401\n")
    result = _lint(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{contract} BROKEN" in result.stdout
    # An upward import may also close a cycle between two packages: the acyclic contract
    # breaks too; nothing else does.
    broken = [line for line in result.stdout.splitlines() if line.endswith(" BROKEN")]
    assert set(broken) <= {f"{contract} BROKEN", "no import cycles among the modules of a package BROKEN"}, broken
    assert f"Contracts: {6 - len(broken)} kept, {len(broken)} broken." in result.stdout
    assert offence in result.stdout
