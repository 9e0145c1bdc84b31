"""Words of sparkmv statements and a cursor over them.

sqlglot's Spark tokens, regrouped into words (keywords upper-cased, strings and quoted
identifiers kept as written) with their character positions, so every parse error can
name the line and column of the problem.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from sparkmv.errors import InvalidNameError, ParseError
from sparkmv.names import ObjectName, is_hidden, is_identifier


def tokenize(sql: str) -> list[Token]:
    """sqlglot's Spark tokens of ``sql``.

    Raises:
        ParseError: at an unterminated string, identifier or comment.
    """
    try:
        return list(Spark().tokenizer().tokenize(sql))
    except TokenError as exc:
        raise ParseError(_token_error_message(sql)) from exc


def line_col(sql: str, offset: int) -> tuple[int, int]:
    r"""1-based line and column of character ``offset`` of ``sql``.

    >>> line_col("SELECT 1\nFROM x", 9)
    (2, 1)
    """
    line = sql.count("\n", 0, offset) + 1
    return line, offset - (sql.rfind("\n", 0, offset) + 1) + 1


def _token_error_message(sql: str) -> str:
    """Locate what the tokenizer choked on: an unterminated string, identifier or comment.

    >>> _token_error_message("SELECT 'abc")
    'cannot parse SQL at line 1, column 8: unterminated string'
    """
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if sql.startswith("--", i):
            nl = sql.find("\n", i)
            i = n if nl < 0 else nl + 1
            continue
        if sql.startswith("/*", i):
            close = sql.find("*/", i + 2)
            if close < 0:
                return _at(sql, i, "unterminated comment")
            i = close + 2
            continue
        if ch in "'\"`":
            j = i + 1
            while j < n and sql[j] != ch:
                j += 2 if sql[j] == "\\" and ch != "`" else 1
            if j >= n:
                return _at(sql, i, "unterminated quoted identifier" if ch == "`" else "unterminated string")
            i = j + 1
            continue
        i += 1
    return "cannot parse SQL: invalid token"


def _at(sql: str, offset: int, what: str) -> str:
    line, col = line_col(sql, offset)
    return f"cannot parse SQL at line {line}, column {col}: {what}"


def split_statements(text: str) -> list[str]:
    """Split a script on ``;`` outside strings and comments; empty statements dropped.

    >>> split_statements("SELECT 'a;b'; SELECT 2;")
    ["SELECT 'a;b'", 'SELECT 2']
    """
    out: list[str] = []
    start = 0
    for tok in tokenize(text):
        if tok.token_type == TokenType.SEMICOLON:
            out.append(text[start : tok.start])
            start = tok.end + 1
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


@dataclass
class _Word:
    text: str  # upper-cased word, the literal text of a string, or a quoted identifier's name
    is_string: bool
    start: int
    end: int
    quoted: bool = False  # a `quoted` identifier: a name, never a keyword


# Tokens after which sqlglot's tokenizer returns the rest of the statement as one string.
_COMMAND_TOKENS = frozenset({TokenType.COMMAND, TokenType.SHOW})


def _words(sql: str, offset: int = 0) -> list[_Word]:
    words: list[_Word] = []
    tokens = tokenize(sql[offset:])
    for k, tok in enumerate(tokens):
        start, end = offset + tok.start, offset + tok.end
        if tok.token_type in _COMMAND_TOKENS and k + 1 < len(tokens):
            words.append(_Word(tok.text.upper(), False, start, end))
            return words + _words(sql, end + 1)
        if tok.token_type == TokenType.STRING:
            words.append(_Word(tok.text, True, start, end))
            continue
        if tok.token_type == TokenType.IDENTIFIER:
            words.append(_Word(tok.text, False, start, end, quoted=True))
            continue
        pos = 0
        for part in tok.text.split():
            pos = tok.text.find(part, pos)
            words.append(_Word(part.upper(), False, start + pos, start + pos + len(part) - 1))
            pos += len(part)
    return words


class Cursor:
    """A position in the words of one statement, with the recursive-descent helpers the
    statement parsers share; errors carry the line and column of the current word."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.words = _words(sql)
        self.i = 0

    def peek(self, *words: str) -> bool:
        for k, w in enumerate(words):
            j = self.i + k
            word = self.words[j] if j < len(self.words) else None
            if word is None or word.is_string or word.quoted or word.text != w:
                return False
        return True

    def accept(self, *words: str) -> bool:
        if self.peek(*words):
            self.i += len(words)
            return True
        return False

    def error(self, expected: str) -> ParseError:
        if self.i < len(self.words):
            w = self.words[self.i]
            found = repr(self.sql[w.start : w.end + 1])
            line, col = line_col(self.sql, w.start)
        else:
            found = "end of statement"
            line, col = line_col(self.sql, len(self.sql.rstrip()))
        return ParseError(f"cannot parse SQL at line {line}, column {col}: expected {expected}, found {found}")

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(" ".join(words))

    def at_end(self) -> bool:
        return self.i >= len(self.words)

    def expect_end(self) -> None:
        if not self.at_end():
            raise self.error("end of statement")

    def string(self) -> str:
        if self.i < len(self.words) and self.words[self.i].is_string:
            self.i += 1
            return self.words[self.i - 1].text
        raise self.error("a quoted string")

    def name(self, allow_reserved: bool = False) -> ObjectName:
        first = self.i
        parts = [self._ident("a name")]
        while self.accept("."):
            parts.append(self._ident("a name"))
        written = self.sql[self.words[first].start : self.words[self.i - 1].end + 1]
        if len(parts) > 2 or not all(is_identifier(p) for p in parts):
            # Checked per part, so a quoted `a.b` or `../x` cannot pass as a qualified name.
            raise InvalidNameError(f"invalid name {written!r}: use letters, digits and _ (optionally namespace.name)")
        if is_hidden(parts[-1]):
            raise InvalidNameError(
                f"invalid name {written!r}: names starting with '__smv_replace_' or '__smv_retired_' are "
                "sparkmv's hidden tables (replacements being built, replaced tables kept until vacuum)"
            )
        try:
            return ObjectName.parse(".".join(parts), allow_reserved=allow_reserved)
        except InvalidNameError as exc:
            raise InvalidNameError(str(exc).replace(repr(".".join(parts)), repr(written), 1)) from None

    def _ident(self, what: str) -> str:
        if self.i >= len(self.words) or self.words[self.i].is_string:
            raise self.error(what)
        w = self.words[self.i]
        self.i += 1
        return w.text if w.quoted else self.sql[w.start : w.end + 1]

    def ident(self) -> str:
        return self._ident("an identifier")

    def number(self) -> int:
        if self.i < len(self.words) and self.words[self.i].text.isdigit():
            self.i += 1
            return int(self.words[self.i - 1].text)
        raise self.error("a number")

    def rest(self) -> str:
        if self.at_end():
            raise self.error("a query")
        return self.sql[self.words[self.i].start :].strip()
