"""Expectations written as constraints, as Databricks' pipelines write them::

    CONSTRAINT name EXPECT (condition) [ON VIOLATION { DROP ROW | FAIL UPDATE }]

inside the parenthesized list after a dataset's name (sparkmv's ``CREATE MATERIALIZED
VIEW name (CONSTRAINT ..., ...)``; SDP definitions mix them with column definitions,
:mod:`sparkmv.pipeline.sql_columns`). Keywords are case-insensitive; the name is an
identifier (backquoted when it is not a plain word); the condition is kept as written between
its parentheses (trimmed), which may hold nested parentheses, strings and commas. Whether the
condition is one that can be kept is checked elsewhere
(:func:`sparkmv.analysis.expectations.check_expectations`).

>>> parse_constraint(Cursor("CONSTRAINT ok EXPECT (f(a, ')') > 0) on violation drop row"))
Expectation(name='ok', condition="f(a, ')') > 0", action='drop')
>>> constraint_list(Cursor("(CONSTRAINT a EXPECT (x > 0), CONSTRAINT `b c` EXPECT (y IN (1, 2)))"))[1]
Expectation(name='b c', condition='y IN (1, 2)', action='warn')
"""

from __future__ import annotations

import re

from sparkmv.analysis.expectations import ON_VIOLATION, WARN, Expectation
from sparkmv.errors import ParseError
from sparkmv.sql.cursor import Cursor, line_col

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_constraint(c: Cursor) -> Expectation:
    """The ``CONSTRAINT name EXPECT (condition) [ON VIOLATION ...]`` at ``c`` (``CONSTRAINT``
    next); ``c`` is left after it.

    Raises:
        ParseError: at the position of the first problem: no name, no ``EXPECT``, no
            parenthesized (or an empty, or an unclosed) condition, an ``ON VIOLATION`` other
            than ``DROP ROW`` / ``FAIL UPDATE``.
    """
    c.expect("CONSTRAINT")
    name = _name(c)
    if not c.accept("EXPECT"):
        raise c.error(f"EXPECT after CONSTRAINT {name} (sparkmv's constraints are expectations)")
    condition = _condition(c, name)
    action = WARN
    if c.accept("ON"):
        if not c.accept("VIOLATION"):
            raise c.error(f"VIOLATION after ON (CONSTRAINT {name})")
        action = next((a for text, a in ON_VIOLATION.items() if c.accept(*text.split())), "")
        if not action:
            raise c.error(f"DROP ROW or FAIL UPDATE after ON VIOLATION (CONSTRAINT {name})")
    return Expectation(name, condition, action)


def constraint_list(c: Cursor) -> tuple[Expectation, ...]:
    """``(CONSTRAINT ..., CONSTRAINT ...)`` at ``c`` (``(`` next): one or more constraints,
    separated by commas, in the order written.

    Raises:
        ParseError: an item that is not a constraint, a missing ``,`` or ``)``, or a bad
            constraint (:func:`parse_constraint`), at its position.
    """
    c.expect("(")
    out: list[Expectation] = []
    while True:
        if not c.peek("CONSTRAINT"):
            raise c.error("CONSTRAINT (the list after a materialized view's name holds its expectations)")
        out.append(parse_constraint(c))
        if c.accept(")"):
            return tuple(out)
        if not c.accept(","):
            raise c.error(f", or ) after CONSTRAINT {out[-1].name}")


def _name(c: Cursor) -> str:
    """The constraint's name: a plain word or a backquoted identifier."""
    w = c.words[c.i] if not c.at_end() else None
    plain = w is not None and not w.is_string and _PLAIN.fullmatch(c.sql[w.start : w.end + 1]) is not None
    if w is None or not (w.quoted or plain) or c.peek("EXPECT", "("):
        raise c.error("a name after CONSTRAINT")
    c.i += 1
    return w.text if w.quoted else c.sql[w.start : w.end + 1]


def _condition(c: Cursor, name: str) -> str:
    """The text between the parentheses at ``c`` (trimmed), up to the one that closes them."""
    if not c.peek("("):
        raise c.error(f"( after EXPECT (the condition of CONSTRAINT {name} is written in parentheses)")
    opening = c.words[c.i]
    c.i += 1
    depth = 1
    while not c.at_end():
        w = c.words[c.i]
        if not (w.is_string or w.quoted):
            depth += (w.text == "(") - (w.text == ")")
        if depth == 0:
            text = c.sql[opening.end + 1 : w.start].strip()
            if not text:
                raise c.error(f"a condition inside EXPECT ( ) of CONSTRAINT {name}")
            c.i += 1
            return text
        c.i += 1
    line, col = line_col(c.sql, opening.start)
    raise ParseError(
        f"cannot parse SQL at line {line}, column {col}: the ( of CONSTRAINT {name} EXPECT is never closed"
    )
