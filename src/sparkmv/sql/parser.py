"""Parsing sparkmv statements.

The clauses sqlglot does not know (``CREATE MATERIALIZED VIEW ... REFRESH ASYNC EVERY``,
``PROPERTIES``, ``REFRESH MATERIALIZED VIEW ... PARTITION START``, ...) are read by a
small recursive-descent parser over sqlglot's Spark tokens; every query part
(``AS <select>``, plain SELECTs) is handed to sqlglot.

>>> s = parse_statement("REFRESH MATERIALIZED VIEW sales.q1 PARTITION START ('1995-01') END ('1995-03') FORCE")
>>> (s.name.qualified, s.start, s.end, s.force, s.asynchronous)
('sales.q1', '1995-01', '1995-03', True, False)
>>> parse_statement("CREATE EXTERNAL TABLE li USING parquet LOCATION '/data/li'").location
'/data/li'
>>> parse_statement("DROP TABLE")
Traceback (most recent call last):
...
sparkmv.errors.ParseError: cannot parse SQL at line 1, column 11: expected a name, found end of statement
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from sparkmv.analysis.query import parse_query
from sparkmv.errors import InvalidNameError, ParseError
from sparkmv.names import ObjectName, is_identifier
from sparkmv.sql.statements import (
    AlterMaterializedView,
    CancelRefresh,
    ColumnDef,
    CreateExternalCatalog,
    CreateExternalTable,
    CreateMaterializedView,
    CreateRefreshableTable,
    Describe,
    DropCatalog,
    DropObject,
    ExplainQuery,
    ExplainRefresh,
    Query,
    RefreshMaterializedView,
    RefreshScheme,
    RefreshTable,
    SetVariable,
    Show,
    Statement,
)

_UNITS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86400}
MAX_EVERY_SECONDS = 3650 * 86400
"""Longest ``REFRESH ASYNC EVERY`` interval: ten years (a longer one is a typo, and would
overflow the scheduler's datetime arithmetic)."""


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


class _Cursor:
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


def parse_statement(sql: str) -> Statement:
    """Parse one statement.

    Raises:
        ParseError: with the line and column of the first problem.
        InvalidNameError: for names that are not plain identifiers.
    """
    text = sql.rstrip().rstrip(";").rstrip()  # leading blanks kept: positions stay true
    c = _Cursor(text)
    if c.at_end():
        raise ParseError("empty statement")
    if c.accept("EXPLAIN"):
        if c.accept("REFRESH", "MATERIALIZED", "VIEW"):
            return ExplainRefresh(_refresh_mv(c))
        if c.peek("SELECT") or c.peek("WITH") or c.peek("("):
            query = c.rest()
            parse_query(query)
            return ExplainQuery(query)
        raise c.error("REFRESH MATERIALIZED VIEW or a query after EXPLAIN")
    if c.accept("SET"):
        return _set(c)
    if c.accept("CREATE"):
        return _create(c)
    if c.accept("REFRESH", "MATERIALIZED", "VIEW"):
        return _refresh_mv(c)
    if c.accept("REFRESH", "TABLE"):
        name = c.name()
        asynchronous = _mode(c)
        c.expect_end()
        return RefreshTable(name, asynchronous)
    if c.accept("CANCEL", "REFRESH", "MATERIALIZED", "VIEW"):
        name = c.name()
        c.expect_end()
        return CancelRefresh(name)
    if c.accept("DROP", "CATALOG"):
        if_exists = c.accept("IF", "EXISTS")
        catalog = _catalog_name(c)
        c.expect_end()
        return DropCatalog(catalog, if_exists)
    if c.accept("DROP"):
        mv = c.accept("MATERIALIZED", "VIEW")
        if not mv:
            c.expect("TABLE")
        if_exists = c.accept("IF", "EXISTS")
        name = c.name()
        c.expect_end()
        return DropObject(name, mv, if_exists)
    if c.accept("ALTER", "MATERIALIZED", "VIEW"):
        return _alter(c)
    if c.accept("SHOW"):
        if c.accept("MATERIALIZED", "VIEWS"):
            c.expect_end()
            return Show("MATERIALIZED VIEWS")
        if c.accept("TABLES"):
            c.expect_end()
            return Show("TABLES")
        if c.accept("CATALOGS"):
            c.expect_end()
            return Show("CATALOGS")
        raise c.error("MATERIALIZED VIEWS, TABLES or CATALOGS after SHOW")
    if c.accept("DESCRIBE") or c.accept("DESC"):
        c.accept("TABLE") or c.accept("MATERIALIZED", "VIEW")
        extended = c.accept("EXTENDED")  # Spark's DESCRIBE [TABLE] EXTENDED name
        name = c.name(allow_reserved=True)  # DESCRIBE sparkmv.task_runs
        c.expect_end()
        return Describe(name, extended)
    parse_query(text)  # raises ParseError with position, or for non-queries
    return Query(text.strip())


SESSION_VARIABLES = ("enable_materialized_view_rewrite",)
"""Names ``SET`` accepts (booleans)."""


def _set(c: _Cursor) -> SetVariable:
    """``SET enable_materialized_view_rewrite = true | false``."""
    name = c.ident().lower()
    if name not in SESSION_VARIABLES:
        raise ParseError(f"unknown session variable {name!r}; known: {', '.join(SESSION_VARIABLES)}")
    c.expect("=")
    word = c.string() if c.i < len(c.words) and c.words[c.i].is_string else c.ident()
    if word.lower() not in ("true", "false"):
        raise ParseError(f"{name} must be true or false, not {word!r}")
    c.expect_end()
    return SetVariable(name, word.lower() == "true")


def _mode(c: _Cursor) -> bool:
    if c.accept("WITH", "SYNC", "MODE"):
        return False
    return c.accept("WITH", "ASYNC", "MODE")


def _refresh_mv(c: _Cursor) -> RefreshMaterializedView:
    name = c.name()
    start = end = None
    if c.accept("PARTITION"):
        if c.accept("START"):
            c.expect("(")
            start = c.string()
            c.expect(")")
        if c.accept("END"):
            c.expect("(")
            end = c.string()
            c.expect(")")
        if start is None and end is None:
            raise c.error("START or END")
    force = c.accept("FORCE")
    asynchronous = _mode(c)
    c.expect_end()
    return RefreshMaterializedView(name, start, end, force, asynchronous)


def _properties(c: _Cursor) -> dict[str, str]:
    c.expect("(")
    props: dict[str, str] = {}
    while True:
        key = c.string() if c.i < len(c.words) and c.words[c.i].is_string else c.ident()
        while c.accept("."):
            key += "." + c.ident()
        c.expect("=")
        props[key] = c.string()
        if c.accept(")"):
            return props
        c.expect(",")


def _scheme(c: _Cursor) -> RefreshScheme:
    if c.accept("MANUAL"):
        return RefreshScheme("MANUAL")
    if not c.accept("ASYNC"):
        raise c.error("MANUAL or ASYNC")
    start = None
    every = None
    text = "ASYNC"
    if c.accept("START"):
        c.expect("(")
        raw = c.string()
        c.expect(")")
        try:
            start = datetime.fromisoformat(raw)
        except ValueError as exc:
            raise ParseError(f"invalid START time {raw!r}: use 'YYYY-MM-DD HH:MM:SS'") from exc
        text += f" START ('{start.isoformat(sep=' ')}')"
    if c.accept("EVERY"):
        c.expect("(")
        c.expect("INTERVAL")
        n = c.number()
        unit = next((u for u in _UNITS if c.accept(u) or c.accept(u + "S")), None)
        if unit is None:
            raise c.error("SECOND, MINUTE, HOUR or DAY")
        c.expect(")")
        every = n * _UNITS[unit]
        if not 1 <= every <= MAX_EVERY_SECONDS:
            raise ParseError(
                f"EVERY (INTERVAL {n} {unit}) is out of range: the interval must be from 1 SECOND to "
                f"{MAX_EVERY_SECONDS // 86400} DAY"
            )
        text += f" EVERY (INTERVAL {n} {unit})"
    elif start is not None:
        raise c.error("EVERY after START")
    return RefreshScheme("ASYNC", start, every, text)


def _alter(c: _Cursor) -> AlterMaterializedView:
    name = c.name()
    if c.accept("SET", "PROPERTIES"):
        stmt = AlterMaterializedView(name, set_properties=_properties(c))
    elif c.accept("ACTIVE"):
        stmt = AlterMaterializedView(name, active=True)
    elif c.accept("INACTIVE"):
        stmt = AlterMaterializedView(name, active=False)
    elif c.accept("REFRESH"):
        stmt = AlterMaterializedView(name, refresh=_scheme(c))
    elif c.accept("RESUME", "SCHEDULE"):
        stmt = AlterMaterializedView(name, resume_schedule=True)
    else:
        raise c.error("SET PROPERTIES, ACTIVE, INACTIVE, REFRESH or RESUME SCHEDULE")
    c.expect_end()
    return stmt


def _catalog_name(c: _Cursor) -> str:
    """An external catalog's name: one plain identifier, lower-cased."""
    start = c.i
    name = c.ident()
    dotted = False
    while c.accept("."):
        dotted = True
        c.ident()
    if dotted or not is_identifier(name):
        written = c.sql[c.words[start].start : c.words[c.i - 1].end + 1]
        raise InvalidNameError(f"invalid catalog name {written!r}: use letters, digits and _")
    return name.lower()


def _create(c: _Cursor) -> Statement:
    if c.accept("EXTERNAL", "CATALOG"):
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        catalog = _catalog_name(c)
        c.expect("PROPERTIES")
        properties = _properties(c)
        c.expect_end()
        return CreateExternalCatalog(catalog, properties, if_not_exists)
    if c.accept("EXTERNAL", "TABLE"):
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        name = c.name()
        c.expect("USING")
        fmt = c.ident().lower()
        # Spark's reader options, before or after LOCATION (as Spark's CREATE TABLE allows)
        options = _properties(c) if c.accept("OPTIONS") else {}
        c.expect("LOCATION")
        location = c.string()
        if not options and c.accept("OPTIONS"):
            options = _properties(c)
        c.expect_end()
        return CreateExternalTable(name, location, fmt, if_not_exists, options)
    if c.accept("MATERIALIZED", "VIEW"):
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        name = c.name()
        partition_by = None
        refresh = RefreshScheme()
        props: dict[str, str] = {}
        deferred = False
        while not c.peek("AS"):
            if c.accept("PARTITION", "BY"):
                if c.peek("AS"):
                    raise c.error("a column name")
                partition_by = c.ident().lower()
            elif c.accept("REFRESH"):
                # REFRESH [IMMEDIATE | DEFERRED] [MANUAL | ASYNC ...]: at least one of them
                timed = c.peek("IMMEDIATE") or c.peek("DEFERRED")
                if timed:
                    deferred = c.accept("DEFERRED") or not c.accept("IMMEDIATE")
                if not timed or c.peek("MANUAL") or c.peek("ASYNC"):
                    refresh = _scheme(c)
            elif c.accept("PROPERTIES"):
                props.update(_properties(c))
            else:
                raise c.error("PARTITION BY, REFRESH, PROPERTIES or AS")
        c.expect("AS")
        start = c.words[c.i].start if not c.at_end() else len(c.sql)
        query = c.rest()
        # Blank out what precedes the query (keeping newlines) so sqlglot's positions are
        # positions in the whole statement.
        parse_query(re.sub(r"[^\n]", " ", c.sql[:start]) + query)
        return CreateMaterializedView(name, query, partition_by, refresh, props, if_not_exists, deferred)
    if c.accept("TABLE"):
        return _create_table(c)
    raise c.error("TABLE, EXTERNAL TABLE, EXTERNAL CATALOG or MATERIALIZED VIEW")


def _create_table(c: _Cursor) -> CreateRefreshableTable:
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    name = c.name()
    c.expect("(")
    columns: list[ColumnDef] = []
    pk: list[str] = []
    while True:
        if c.accept("PRIMARY", "KEY"):
            c.expect("(")
            pk.append(c.ident().lower())
            while c.accept(","):
                pk.append(c.ident().lower())
            c.expect(")")
        else:
            col = c.ident().lower()
            type_start = c.i
            depth = 0
            while not c.at_end() and (depth > 0 or not (c.peek(",") or c.peek(")") or c.peek("NOT", "NULL"))):
                if c.peek("("):
                    depth += 1
                elif c.peek(")"):
                    depth -= 1
                c.i += 1
            if c.i == type_start:
                raise c.error("a column type")
            type_text = c.sql[c.words[type_start].start : c.words[c.i - 1].end + 1]
            not_null = c.accept("NOT", "NULL")
            columns.append(ColumnDef(col, type_text.strip(), not_null))
        if c.accept(")"):
            break
        c.expect(",")
    on_conflict = "OVERWRITE"
    if c.accept("ON", "CONFLICT"):
        if c.accept("OVERWRITE"):
            on_conflict = "OVERWRITE"
        elif c.accept("IGNORE"):
            on_conflict = "IGNORE"
        else:
            raise c.error("OVERWRITE or IGNORE")
    options: dict[str, str] = {}
    if c.accept("WITH"):
        options = {k.lower(): v for k, v in _properties(c).items()}
    c.expect_end()
    return CreateRefreshableTable(name, columns, pk, on_conflict, options, if_not_exists)
