"""Recording benchmark figures in ``bench/RESULTS.md`` (shared by the bench scripts).

``bench/RESULTS.md`` has one ``## `` section per benchmark: a short preamble (the script, how
to run it, a link to the benchmark's history file), the latest run (a ``**Latest run:**`` line
with its date, commit and headline figure, then the run's full table), and a ``### History``
table of one line per older run. The full tables of the older runs are kept, newest first, in
``bench/history/<slug>.md``. :func:`publish` puts a new run in place of the latest one.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "RESULTS.md"

LATEST = "**Latest run:** "
"""Starts the line naming the latest run of a section: ``**Latest run:** DATE, commit C: HEADLINE``."""
HISTORY_HEADING = "### History"
HISTORY_TABLE = "| date | commit | headline |\n|---|---|---|"
NO_COMMIT = "—"
NO_RUN = "_No run recorded yet._"
"""Stands for the latest run in a section that has none yet; the first run replaces it."""

_LATEST_LINE = re.compile(r"^\*\*Latest run:\*\* (?P<date>[^,]+), commit (?P<commit>\S+): (?P<headline>.*)$", re.M)
_HISTORY_LINK = re.compile(r"\(history/(?P<slug>[A-Za-z0-9._-]+)\.md\)")


def slug(title: str) -> str:
    """The history file name (without ``.md``) of a section title.

    >>> slug("TPC-H's 22 MVs refreshed as one pass")
    'tpc-h-22-mvs-refreshed-as-one-pass'
    """
    return re.sub(r"[^a-z0-9]+", "-", title.lower().replace("'s ", " ")).strip("-")


def today() -> str:
    """Today's date, ``YYYY-MM-DD``."""
    return dt.date.today().isoformat()


def git_commit() -> str | None:
    """The short hash of the checked-out commit (``+`` appended when the work tree has changes),
    or None outside a git work tree."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=BENCH, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=BENCH, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return (head + ("+" if dirty else "")) or None


def verdict(met: bool) -> str:
    """A target's verdict in a headline: ``met`` or ``missed``.

    >>> verdict(12.4 >= 20)
    'missed'
    """
    return "met" if met else "missed"


def _commit_cell(commit: str | None) -> str:
    return f"`{commit}`" if commit and commit != NO_COMMIT else NO_COMMIT


def _history_row(date: str, commit: str, headline: str) -> str:
    return f"| {date} | {commit} | {headline.replace('|', chr(92) + '|')} |"


def _history_file(title: str) -> str:
    return (
        f"# {title}: older runs\n\n"
        f"The full tables of this benchmark's older runs, newest first. The latest run, and one line per run,\n"
        f'are in [../RESULTS.md](../RESULTS.md) (section "{title}").\n'
    )


def _add_to_history(path: Path, title: str, block: str) -> None:
    """Put ``block`` first among the runs of the history file ``path`` (created when missing)."""
    text = path.read_text() if path.exists() else _history_file(title)
    first = re.search(r"^### ", text, re.M)
    if first is None:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = text[: first.start()] + block + "\n\n" + text[first.start() :]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n")


def _add_history_row(section: str, row: str) -> str:
    """``section`` with ``row`` first in its History table (the table is created when missing)."""
    at = section.find(HISTORY_HEADING)
    if at < 0:
        return section.rstrip("\n") + f"\n\n{HISTORY_HEADING}\n\n{HISTORY_TABLE}\n{row}\n"
    rule = section.find("|---|---|---|", at)
    if rule < 0:
        end = at + len(HISTORY_HEADING)
        return section[:end] + f"\n\n{HISTORY_TABLE}\n{row}" + section[end:]
    newline = section.find("\n", rule)
    if newline < 0:
        return section + "\n" + row + "\n"
    return section[: newline + 1] + row + "\n" + section[newline + 1 :]


def publish(
    section_title: str,
    table_markdown: str,
    headline: str,
    date: str,
    commit: str | None,
    *,
    script: str | None = None,
    results: Path = RESULTS,
    history_dir: Path | None = None,
) -> None:
    """Record a new run of a benchmark as the latest run of its section of ``results``.

    ``section_title`` is the section's heading (with or without the leading ``## ``);
    ``table_markdown`` the run's full entry (its ``### `` heading, machine, data and tables);
    ``headline`` its headline figure in one line (e.g. ``"PCT 12.4x faster than FULL (target
    >= 20x: missed)"``); ``date`` ``YYYY-MM-DD``; ``commit`` the code's commit, or None when
    not known. The previous latest run moves, in full, to the top of
    ``history_dir/<slug>.md`` (``history/`` beside ``results`` by default), and its date,
    commit and headline become the first line of the section's History table. A missing
    section is created at the end of the file (naming ``script`` when given), a missing file
    too.
    """
    title = section_title.removeprefix("## ").strip()
    history_dir = history_dir if history_dir is not None else results.parent / "history"
    text = results.read_text() if results.exists() else "# Benchmark results\n"
    latest = f"{LATEST}{date}, commit {_commit_cell(commit)}: {headline}\n\n{table_markdown.strip()}\n"
    heading = re.search(rf"^## {re.escape(title)}[ \t]*$", text, re.M)
    if heading is None:
        name = slug(title)
        intro = f"`{script}`. " if script else ""
        section = (
            f"## {title}\n\n{intro}Older runs in full: [history/{name}.md](history/{name}.md).\n\n"
            f"{latest}\n{HISTORY_HEADING}\n\n{HISTORY_TABLE}\n"
        )
        results.write_text(text.rstrip("\n") + "\n\n" + section)
        return
    start = heading.start()
    following = re.search(r"^## ", text[heading.end() :], re.M)
    end = len(text) if following is None else heading.end() + following.start()
    section = text[start:end]
    link = _HISTORY_LINK.search(section)
    name = link.group("slug") if link else slug(title)
    history_at = section.find(HISTORY_HEADING)
    old = _LATEST_LINE.search(section)
    if old is not None:
        block_end = history_at if history_at > old.end() else len(section)
        block = section[old.end() : block_end].strip("\n")
        if not block.startswith("### "):
            block = f"### {old.group('date')}, commit {old.group('commit')}\n\n{block}"
        _add_to_history(history_dir / f"{name}.md", title, block)
        section = section[: old.start()] + latest + "\n" + section[block_end:]
        row = _history_row(old.group("date"), old.group("commit"), old.group("headline"))
        section = _add_history_row(section, row)
    elif history_at >= 0:
        placeholder = section.find(NO_RUN)
        at = placeholder if 0 <= placeholder < history_at else history_at
        section = section[:at] + latest + "\n" + section[history_at:]
    else:
        section = section.rstrip("\n") + "\n\n" + latest + f"\n{HISTORY_HEADING}\n\n{HISTORY_TABLE}\n"
    if following is not None and not section.endswith("\n\n"):
        section = section.rstrip("\n") + "\n\n"
    results.write_text((text[:start] + section + text[end:]).rstrip("\n") + "\n")


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and the wall-clock seconds it took."""
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def cpu_clock(spark: Any) -> Callable[[], float]:
    """A clock of the CPU seconds used so far by this Python process and the local Spark JVM
    (user + system, from ``/proc/<pid>/stat``)."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    tick = os.sysconf("SC_CLK_TCK")

    def clock() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick + time.process_time()

    return clock
