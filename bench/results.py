"""Recording benchmark figures in ``bench/RESULTS.md`` (shared by the bench scripts)."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_results(entry: str, section: str, path: Path = RESULTS) -> None:
    """Append ``entry`` at the end of ``section`` (a ``## ...`` heading line) of ``path``;
    the section, and the file, are created when missing."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if section not in text:
        text = text.rstrip("\n") + f"\n\n{section}\n\n{entry}"
    else:
        start = text.index(section) + len(section)
        following = text.find("\n## ", start)
        end = len(text) if following < 0 else following + 1
        text = text[:end].rstrip("\n") + f"\n\n{entry}\n" + text[end:]
    path.write_text(text.rstrip("\n") + "\n")
