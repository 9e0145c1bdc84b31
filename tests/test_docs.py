"""The SQL examples of README.md and docs/ parse as sparkmv parses them, so the documentation
cannot drift from the language: every ```` ```sql ```` block with sparkmv's statement parser
(a block titled with a ``.sql`` file name is a pipeline definition file, read by the pipeline
loader), and every ``sparkmv ... sql "<statements>"`` of a shell block. Grammar blocks are
fenced ```` ```text ````; an elided example (``...``) is skipped. Pure text, no Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkmv.pipeline.sql_defs import load_sql_file
from sparkmv.sql.script import parse_script

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
# sparkmv [global options] sql [options] "<statements>" (an option's value, a line continuation)
SHELL_SQL = re.compile(
    r'\bsparkmv(?:\s+(?:--?[\w-]+(?:[ =][^\s"-][^\s"]*)?|\\\n))*'
    r'\s+sql(?:\s+--[\w-]+)*\s+"((?:[^"\\]|\\.)*)"'
)
TITLE = re.compile(r'title="([^"]+\.sql)"')


def _examples() -> list[tuple[str, str, str | None]]:
    """(where, SQL text, pipeline file name or None) for every example of every page."""
    out: list[tuple[str, str, str | None]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            lang, attrs, body = m.group(1), m.group(2), m.group(3)
            where = f"{page.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}"
            title = TITLE.search(attrs)
            if lang == "sql":
                out.append((where, body, title.group(1) if title else None))
            elif lang in ("sh", "bash", "console"):
                out.extend((where, s.group(1), None) for s in SHELL_SQL.finditer(body))
    return [e for e in out if "..." not in e[1]]


EXAMPLES = _examples()


def test_the_pages_have_examples() -> None:
    # the extraction itself works: the quick start and the reference contribute examples
    wheres = {w.split(":")[0] for w, _, _ in EXAMPLES}
    assert {"README.md", "docs/reference/sql.md", "docs/getting-started.md"} <= wheres
    assert len(EXAMPLES) >= 60
    assert sum(1 for _, _, f in EXAMPLES if f) >= 2  # the pipeline definition files


@pytest.mark.parametrize(("where", "sql", "pipeline_file"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_parses(where: str, sql: str, pipeline_file: str | None, tmp_path: Path) -> None:
    if pipeline_file is None:
        assert parse_script(sql), where
    else:
        path = tmp_path / Path(pipeline_file).name
        path.write_text(sql, encoding="utf-8")
        assert load_sql_file(path, "default"), where
