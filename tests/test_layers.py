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


def test_catalog_importing_refresh_breaks_the_layer_contract(copy: Path) -> None:
    clock = copy / "src" / "sparkmv" / "catalog" / "clock.py"
    clock.write_text(clock.read_text() + "\nfrom sparkmv.refresh import planner  # noqa: E402,F401\n")
    result = _lint(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "layers (shared/DESIGN.md): dependencies point downward only BROKEN" in result.stdout
    assert "sparkmv.catalog.clock -> sparkmv.refresh.planner" in result.stdout


def test_a_service_importing_pyspark_breaks_the_spark_contract(copy: Path) -> None:
    status = copy / "src" / "sparkmv" / "services" / "status.py"
    status.write_text(status.read_text() + "\nimport pyspark  # noqa: E402,F401\n")
    result = _lint(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Spark is imported only in storage, sources and refresh BROKEN" in result.stdout
    assert "sparkmv.services.status -> pyspark" in result.stdout
