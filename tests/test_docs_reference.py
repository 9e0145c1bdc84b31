"""The reference pages cover what the code defines, so a new column or option cannot go
undocumented: ``docs/reference/system-tables.md`` has a section per system table listing
exactly its columns and types in order, ``properties.md`` a row per property, and ``cli.md``
a section per command naming each of its options. Pure text and introspection, no Spark."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from sparkmv.cli.main import app
from sparkmv.client.system_tables import SYSTEM_TABLES
from sparkmv.refresh.properties import KNOWN

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+?) \|", re.M)


def _sections(page: str) -> dict[str, str]:
    """Heading text (``sparkmv.task_runs``) -> the section's body, for ``##`` / ``###``."""
    text = (REFERENCE / page).read_text(encoding="utf-8")
    parts = re.split(r"^#{2,3} (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _commands(cmd: Any, prefix: str) -> list[tuple[str, Any]]:
    """(``sparkmv pipeline run``, its command) for every command under ``cmd`` (typer's click)."""
    out: list[tuple[str, Any]] = []
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        out.append((f"{prefix} {name}", sub))
        out.extend(_commands(sub, f"{prefix} {name}"))
    return out


COMMANDS = _commands(typer.main.get_command(app), "sparkmv")


@pytest.mark.parametrize("table", sorted(SYSTEM_TABLES))
def test_system_table_columns_documented(table: str) -> None:
    schema: Any = SYSTEM_TABLES[table][0]
    body = _sections("system-tables.md")[f"sparkmv.{table}"]
    columns = re.search(r"^\| column \|.*?(?=^[^|]|\Z)", body, re.M | re.S)  # its first table
    assert columns is not None
    documented = [(name, kind.strip()) for name, kind in ROW.findall(columns.group(0))]
    assert documented == list(schema.columns)


def test_every_command_found() -> None:
    names = {n for n, _ in COMMANDS}
    assert {"sparkmv sql", "sparkmv events", "sparkmv pipeline run"} <= names
    sql = dict(COMMANDS)["sparkmv sql"]
    assert {"--file", "--format", "--no-rewrite"} <= {o for p in sql.params for o in p.opts}


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_cli_command_documented(name: str, command: Any) -> None:
    body = _sections("cli.md")[name]
    options = [o for p in command.params if p.param_type_name == "option" for o in p.opts if o.startswith("--")]
    missing = [o for o in options if o != "--help" and f"`{o}" not in body]
    assert missing == []


def test_every_property_documented() -> None:
    text = (REFERENCE / "properties.md").read_text(encoding="utf-8")
    documented = {name for name, _ in ROW.findall(text)}
    assert sorted(KNOWN - documented) == []
