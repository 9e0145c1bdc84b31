"""Warehouse, staging and source files are touched only through the storage layer.

Every module under ``sparkmv/refresh`` and ``sparkmv/sources`` reaches files through
:mod:`sparkmv.storage.warehouse` (fsspec), so an object-store warehouse needs configuration
only. This test reads their syntax trees and fails on any import of ``shutil``, ``pathlib``
or ``glob``, on ``os`` file calls (``os.walk``, ``os.remove``, ``os.stat``, ...) and on the
builtin ``open``, except for the allowed uses below, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "sparkmv"
CHECKED = ("refresh", "sources")

FORBIDDEN_MODULES = {"shutil", "pathlib", "glob"}
FORBIDDEN_CALLS = {
    *(
        f"os.{f}"
        for f in (
            "walk fwalk remove unlink rmdir removedirs scandir listdir makedirs mkdir replace rename renames "
            "stat lstat open truncate utime"
        ).split()
    ),
    *(f"os.path.{f}" for f in "exists lexists isdir isfile islink getsize getmtime getctime getatime".split()),
    "open",
}

ALLOWED: dict[tuple[str, str], str] = {
    ("refresh/reload/jdbc.py", "pathlib"): "the JDBC driver jar and password file are local files of "
    "this process (the Spark driver's classpath, a secret), never warehouse files",
    ("refresh/reload/options.py", "os.path.isfile"): "checks that a configured local JDBC driver jar exists",
}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def violations(source: str, module: str) -> list[str]:
    """``module:line: what`` for each file access outside the storage layer in ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        what: str | None = None
        if isinstance(node, ast.Import):
            what = next((a.name for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES), None)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                what = node.module
            elif node.module in ("os", "os.path"):
                what = next(
                    (f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in FORBIDDEN_CALLS),
                    None,
                )
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            what = name if name in FORBIDDEN_CALLS else None
        if what is not None and (module, what) not in ALLOWED:
            found.append(f"{module}:{getattr(node, 'lineno', 0)}: {what}")
    return found


def test_refresh_and_sources_reach_files_through_the_storage_layer() -> None:
    found = [
        v
        for package in CHECKED
        for path in sorted((ROOT / package).rglob("*.py"))
        for v in violations(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
    assert found == [], "file I/O outside sparkmv.storage.warehouse:\n" + "\n".join(found)


def test_allowed_uses_are_still_there() -> None:
    """An allowance nothing needs any more is removed, not kept as a blind spot."""
    for module, what in ALLOWED:
        source = (ROOT / module).read_text()
        assert what in source, f"{module} no longer uses {what}: remove it from ALLOWED"


def test_the_check_catches_each_kind_of_access() -> None:
    source = """
import shutil
from pathlib import Path
import os
from os import walk
os.walk("/x")
os.remove("/x")
os.path.getsize("/x")
open("/x")
os.path.basename("/x")  # text only: allowed
"""
    assert violations(source, "refresh/x.py") == [
        "refresh/x.py:2: shutil",
        "refresh/x.py:3: pathlib",
        "refresh/x.py:5: os.walk",
        "refresh/x.py:6: os.walk",
        "refresh/x.py:7: os.remove",
        "refresh/x.py:8: os.path.getsize",
        "refresh/x.py:9: open",
    ]
