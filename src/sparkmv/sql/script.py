r"""Scripts: a text of statements separated by ``;``, parsed whole before any runs.

>>> [(s.number, s.line, s.text) for s in parse_script("SELECT 1;\n\n-- two\nSHOW TABLES;")]
[(1, 1, 'SELECT 1'), (2, 3, '-- two\nSHOW TABLES')]
>>> parse_script("SELECT 1;\nDROP TABLE")
Traceback (most recent call last):
...
sparkmv.errors.ParseError: cannot parse SQL at line 2, column 11: expected a name, found end of statement (statement 2)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from sqlglot.tokens import TokenType

from sparkmv.errors import ParseError
from sparkmv.sql.cursor import line_col, tokenize
from sparkmv.sql.parser import parse_statement
from sparkmv.sql.statements import Statement

_POSITION = re.compile(r"at line (\d+), column (\d+)")


@dataclass(frozen=True)
class ScriptStatement:
    """One statement of a script: its text, 1-based number, and the line it starts on."""

    text: str
    number: int
    line: int
    statement: Statement


_POSITION = re.compile(r"at line (\d+), column (\d+)")


def parse_script(text: str) -> list[ScriptStatement]:
    """Split a script on ``;`` and parse every statement before any of them runs.

    Returns:
        The statements in order (an empty list for a script of blanks and comments).

    Raises:
        ParseError: for the first statement that does not parse, its line and column
            counted in the whole script, and its number when the script has several.
    """
    pieces = _split_with_offsets(text)
    out: list[ScriptStatement] = []
    for number, (piece, offset) in enumerate(pieces, 1):
        line, col = line_col(text, offset)
        try:
            stmt = parse_statement(piece)
        except ParseError as exc:
            message = _POSITION.sub(functools.partial(_shift, line=line, col=col), str(exc), count=1)
            if len(pieces) > 1:
                if message == str(exc) and not _POSITION.search(message):
                    message = f"{message} (statement {number}, line {line})"
                else:
                    message = f"{message} (statement {number})"
            raise ParseError(message) from exc
        out.append(ScriptStatement(piece, number, line, stmt))
    return out


def split_statements(text: str) -> list[tuple[str, int, int]]:
    """The statements of ``text`` split on ``;`` (not parsed): each stripped text with the line
    and column it starts on (1-based); pieces of only blanks and comments are dropped."""
    return [(piece, *line_col(text, offset)) for piece, offset in _split_with_offsets(text)]


def shift_position(message: str, line: int, col: int) -> str:
    """``message``'s first ``at line L, column C`` (in a statement starting at ``line``, ``col``)
    as a position in the whole text."""
    return _POSITION.sub(functools.partial(_shift, line=line, col=col), message, count=1)


def _shift(m: re.Match[str], *, line: int, col: int) -> str:
    """A statement's ``line L, column C`` as a position in the whole script."""
    inner_line, inner_col = int(m.group(1)), int(m.group(2))
    if inner_line == 1:
        return f"at line {line}, column {col + inner_col - 1}"
    return f"at line {line + inner_line - 1}, column {inner_col}"


def _split_with_offsets(text: str) -> list[tuple[str, int]]:
    """Statements of ``text`` (stripped, empty ones dropped) with the offset of their first character."""
    out: list[tuple[str, int]] = []
    start = 0
    bounds: list[tuple[int, int]] = []
    for tok in tokenize(text):
        if tok.token_type == TokenType.SEMICOLON:
            bounds.append((start, tok.start))
            start = tok.end + 1
    bounds.append((start, len(text)))
    for begin, end in bounds:
        piece = text[begin:end]
        stripped = piece.strip()
        if stripped and _has_words(stripped):
            out.append((stripped, begin + len(piece) - len(piece.lstrip())))
    return out


def _has_words(piece: str) -> bool:
    """False for a piece that holds only comments."""
    try:
        return bool(tokenize(piece))
    except ParseError:
        return True
