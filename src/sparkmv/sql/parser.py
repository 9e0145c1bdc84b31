"""Parsing sparkmv statements.

The clauses sqlglot does not know (``CREATE MATERIALIZED VIEW ... REFRESH ASYNC EVERY``,
``PROPERTIES``, an MV's ``(CONSTRAINT c EXPECT (...))`` expectations, ``REFRESH MATERIALIZED
VIEW ... PARTITION START``, ...) are read by a
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
from collections.abc import Callable
from datetime import datetime

from sparkmv.analysis.query import parse_query
from sparkmv.errors import InvalidNameError, ParseError
from sparkmv.names import is_identifier
from sparkmv.sql.constraints import constraint_list
from sparkmv.sql.cursor import Cursor
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
    RefreshMaterializedViews,
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


def parse_statement(sql: str) -> Statement:
    """Parse one statement.

    Raises:
        ParseError: with the line and column of the first problem.
        InvalidNameError: for names that are not plain identifiers.
    """
    text = sql.rstrip().rstrip(";").rstrip()  # leading blanks kept: positions stay true
    c = Cursor(text)
    if c.at_end():
        raise ParseError("empty statement")
    for words, parse in _STATEMENTS:
        if c.accept(*words):
            return parse(c)
    parse_query(text)  # raises ParseError with position, or for non-queries
    return Query(text.strip())


def _explain(c: Cursor) -> Statement:
    """After EXPLAIN: ``REFRESH MATERIALIZED VIEW ...`` or a query."""
    analyze = c.accept("ANALYZE")
    if c.accept("REFRESH", "MATERIALIZED", "VIEW"):
        refresh = _refresh_mv(c)
        if not isinstance(refresh, RefreshMaterializedView):
            raise ParseError("EXPLAIN REFRESH takes one materialized view")
        if analyze and refresh.asynchronous:
            raise ParseError("EXPLAIN ANALYZE REFRESH runs the refresh now: WITH ASYNC MODE does not apply")
        return ExplainRefresh(refresh, analyze)
    if analyze:
        raise c.error("REFRESH MATERIALIZED VIEW after EXPLAIN ANALYZE")
    if c.peek("SELECT") or c.peek("WITH") or c.peek("("):
        query = c.rest()
        parse_query(query)
        return ExplainQuery(query)
    raise c.error("REFRESH MATERIALIZED VIEW or a query after EXPLAIN")


def _refresh_table(c: Cursor) -> RefreshTable:
    """After REFRESH TABLE: ``name [WITH SYNC | ASYNC MODE]``."""
    name = c.name()
    asynchronous = _mode(c)
    c.expect_end()
    return RefreshTable(name, asynchronous)


def _cancel(c: Cursor) -> CancelRefresh:
    """After CANCEL REFRESH MATERIALIZED VIEW: the name."""
    name = c.name()
    c.expect_end()
    return CancelRefresh(name)


def _drop_catalog(c: Cursor) -> DropCatalog:
    """After DROP CATALOG: ``[IF EXISTS] catalog``."""
    if_exists = c.accept("IF", "EXISTS")
    catalog = _catalog_name(c)
    c.expect_end()
    return DropCatalog(catalog, if_exists)


def _drop(c: Cursor) -> DropObject:
    """After DROP: ``MATERIALIZED VIEW | TABLE [IF EXISTS] name``."""
    mv = c.accept("MATERIALIZED", "VIEW")
    if not mv:
        c.expect("TABLE")
    if_exists = c.accept("IF", "EXISTS")
    name = c.name()
    c.expect_end()
    return DropObject(name, mv, if_exists)


def _show(c: Cursor) -> Show:
    """After SHOW: ``MATERIALIZED VIEWS``, ``TABLES`` or ``CATALOGS``."""
    for what in ("MATERIALIZED VIEWS", "TABLES", "CATALOGS"):
        if c.accept(*what.split()):
            c.expect_end()
            return Show(what)
    raise c.error("MATERIALIZED VIEWS, TABLES or CATALOGS after SHOW")


def _describe(c: Cursor) -> Describe:
    """After DESCRIBE / DESC: ``[TABLE | MATERIALIZED VIEW] [EXTENDED] name``."""
    c.accept("TABLE") or c.accept("MATERIALIZED", "VIEW")
    extended = c.accept("EXTENDED")  # Spark's DESCRIBE [TABLE] EXTENDED name
    name = c.name(allow_reserved=True)  # DESCRIBE sparkmv.task_runs
    c.expect_end()
    return Describe(name, extended)


SESSION_VARIABLES = ("enable_materialized_view_rewrite",)
"""Names ``SET`` accepts (booleans)."""


def _set(c: Cursor) -> SetVariable:
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


def _mode(c: Cursor) -> bool:
    if c.accept("WITH", "SYNC", "MODE"):
        return False
    return c.accept("WITH", "ASYNC", "MODE")


def _refresh_all(c: Cursor) -> RefreshMaterializedViews:
    """After REFRESH ALL MATERIALIZED VIEWS: ``[FORCE]``."""
    force = c.accept("FORCE")
    c.expect_end()
    return RefreshMaterializedViews((), True, force)


def _refresh_mv(c: Cursor) -> RefreshMaterializedView | RefreshMaterializedViews:
    name = c.name()
    if c.peek(","):
        names = [name]
        while c.accept(","):
            names.append(c.name())
        if len(set(names)) < len(names):
            raise ParseError(f"materialized view '{next(n for n in names if names.count(n) > 1)}' is named twice")
        force = c.accept("FORCE")
        c.expect_end()
        return RefreshMaterializedViews(tuple(names), False, force)
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


def properties_clause(c: Cursor) -> dict[str, str]:
    """``('k' = 'v', ...)`` at the cursor (keys quoted or dotted identifiers), as a dict."""
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


def _scheme(c: Cursor) -> RefreshScheme:
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


def _alter(c: Cursor) -> AlterMaterializedView:
    name = c.name()
    if c.accept("SET", "PROPERTIES"):
        stmt = AlterMaterializedView(name, set_properties=properties_clause(c))
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


def _catalog_name(c: Cursor) -> str:
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


def _create(c: Cursor) -> Statement:
    if c.accept("OR", "REPLACE"):
        if not c.accept("MATERIALIZED", "VIEW"):
            raise c.error("MATERIALIZED VIEW after CREATE OR REPLACE")
        return _create_mv(c, or_replace=True)
    if c.accept("EXTERNAL", "CATALOG"):
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        catalog = _catalog_name(c)
        c.expect("PROPERTIES")
        properties = properties_clause(c)
        c.expect_end()
        return CreateExternalCatalog(catalog, properties, if_not_exists)
    if c.accept("EXTERNAL", "TABLE"):
        if_not_exists = c.accept("IF", "NOT", "EXISTS")
        name = c.name()
        c.expect("USING")
        fmt = c.ident().lower()
        # Spark's reader options, before or after LOCATION (as Spark's CREATE TABLE allows)
        options = properties_clause(c) if c.accept("OPTIONS") else {}
        c.expect("LOCATION")
        location = c.string()
        if not options and c.accept("OPTIONS"):
            options = properties_clause(c)
        c.expect_end()
        return CreateExternalTable(name, location, fmt, if_not_exists, options)
    if c.accept("MATERIALIZED", "VIEW"):
        return _create_mv(c)
    if c.accept("TABLE"):
        return _create_table(c)
    raise c.error("TABLE, EXTERNAL TABLE, EXTERNAL CATALOG or MATERIALIZED VIEW")


def _create_mv(c: Cursor, or_replace: bool = False) -> CreateMaterializedView:
    """After CREATE [OR REPLACE] MATERIALIZED VIEW: ``[IF NOT EXISTS] name [(CONSTRAINT c
    EXPECT (cond) [ON VIOLATION DROP ROW | FAIL UPDATE], ...)] [PARTITION BY col] [REFRESH ...]
    [PROPERTIES (...)] AS <select>`` (the constraints: :mod:`sparkmv.sql.constraints`)."""
    if_not_exists = c.accept("IF", "NOT", "EXISTS")
    if if_not_exists and or_replace:
        raise ParseError("CREATE OR REPLACE MATERIALIZED VIEW cannot have IF NOT EXISTS: use one or the other")
    name = c.name()
    expectations = constraint_list(c) if c.peek("(") else ()
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
            props.update(properties_clause(c))
        else:
            raise c.error("PARTITION BY, REFRESH, PROPERTIES or AS")
    if deferred and or_replace:
        raise ParseError(
            "CREATE OR REPLACE MATERIALIZED VIEW cannot have REFRESH DEFERRED: the new definition is built "
            "before it replaces the old one"
        )
    c.expect("AS")
    start = c.words[c.i].start if not c.at_end() else len(c.sql)
    query = c.rest()
    # Blank out what precedes the query (keeping newlines) so sqlglot's positions are
    # positions in the whole statement.
    parse_query(re.sub(r"[^\n]", " ", c.sql[:start]) + query)
    return CreateMaterializedView(
        name, query, partition_by, refresh, props, if_not_exists, deferred, or_replace, expectations
    )


def _create_table(c: Cursor) -> CreateRefreshableTable:
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
        options = {k.lower(): v for k, v in properties_clause(c).items()}
    c.expect_end()
    return CreateRefreshableTable(name, columns, pk, on_conflict, options, if_not_exists)


_STATEMENTS: tuple[tuple[tuple[str, ...], Callable[[Cursor], Statement]], ...] = (
    (("EXPLAIN",), _explain),
    (("SET",), _set),
    (("CREATE",), _create),
    (("REFRESH", "ALL", "MATERIALIZED", "VIEWS"), _refresh_all),
    (("REFRESH", "MATERIALIZED", "VIEW"), _refresh_mv),
    (("REFRESH", "TABLE"), _refresh_table),
    (("CANCEL", "REFRESH", "MATERIALIZED", "VIEW"), _cancel),
    (("DROP", "CATALOG"), _drop_catalog),
    (("DROP",), _drop),
    (("ALTER", "MATERIALIZED", "VIEW"), _alter),
    (("SHOW",), _show),
    (("DESCRIBE",), _describe),
    (("DESC",), _describe),
)
"""Leading words -> the parser of the rest, tried in order (longer prefixes first); a
statement matching none is parsed as a query."""
