"""The SQL of AUTO CDC flows, parsed by sparkmv (Spark 4.3's grammar, so Spark 4.1 runs it too)::

    CREATE FLOW name [COMMENT 'text'] AS AUTO CDC INTO target <parameters>
    CREATE [OR REFRESH] STREAMING TABLE target [COMMENT ...] FLOW AUTO CDC <parameters>

    <parameters> := FROM { STREAM(source) | STREAM source | source } KEYS (col, ...)
        then, in any order: [APPLY AS DELETE WHEN <condition>] SEQUENCE BY <expression>
        [COLUMNS (col, ...) | COLUMNS * EXCEPT (col, ...)] [STORED AS SCD TYPE {1 | 2}]
        [TRACK HISTORY ON (col, ...) | TRACK HISTORY ON * EXCEPT (col, ...)]

The condition and the expression are kept as Spark SQL text (Spark evaluates them on the
change rows); a clause given twice, or no ``SEQUENCE BY``, is refused.
"""

from __future__ import annotations

from pathlib import Path

from sparkmv.errors import SparkMvError
from sparkmv.names import ObjectName
from sparkmv.pipeline.auto_cdc import AutoCdcFlow, check_flow
from sparkmv.sql.cursor import Cursor

_CLAUSES = (("APPLY", "AS", "DELETE", "WHEN"), ("SEQUENCE", "BY"), ("COLUMNS",), ("STORED", "AS"), ("TRACK", "HISTORY"))


def parse_auto_cdc(c: Cursor, name: str, target: ObjectName, file: Path, line: int, namespace: str) -> AutoCdcFlow:
    """The flow whose ``<parameters>`` start at ``c`` (after ``AUTO CDC [INTO target]``).

    Raises:
        SparkMvError: a syntax error (naming the position), a clause given twice, no
            ``SEQUENCE BY``, or what :func:`sparkmv.pipeline.auto_cdc.check_flow` refuses.
    """
    c.expect("FROM")
    stream = c.accept("STREAM")
    parens = stream and c.accept("(")
    first = c.i
    source = c.name()
    if c.i - first == 1:
        source = ObjectName(namespace, source.name)
    if parens:
        c.expect(")")
    c.expect("KEYS")
    keys = _idents(c)
    found: dict[str, object] = {}
    while not c.at_end():
        clause = next((words for words in _CLAUSES if c.peek(*words)), None)
        if clause is None:
            raise c.error("APPLY AS DELETE WHEN, SEQUENCE BY, COLUMNS, STORED AS SCD TYPE or TRACK HISTORY ON")
        if clause[0] in found:
            raise c.error(f"{' '.join(clause)} once")
        c.accept(*clause)
        if clause[0] in ("APPLY", "SEQUENCE"):
            found[clause[0]] = _expression(c)
        elif clause[0] == "STORED":
            c.expect("SCD", "TYPE")
            found["STORED"] = c.number()
        else:
            if clause[0] == "TRACK":
                c.expect("ON")
            star = c.accept("*")
            if star:
                c.expect("EXCEPT")
            found[clause[0]] = (star, _idents(c))
    if "SEQUENCE" not in found:
        raise SparkMvError(
            "AutoCDC flow is missing a required `sequence_by` expression. Specify a `sequence_by` column or "
            "expression that orders incoming change events."
        )
    columns = found.get("COLUMNS", (False, ()))
    track = found.get("TRACK", (False, ()))
    assert isinstance(columns, tuple) and isinstance(track, tuple)
    flow = AutoCdcFlow(
        name=name,
        target=target,
        source=source,
        keys=keys,
        sequence_by=str(found["SEQUENCE"]),
        file=file,
        line=line,
        apply_as_deletes=str(found["APPLY"]) if "APPLY" in found else None,
        column_list=() if columns[0] else columns[1],
        except_column_list=columns[1] if columns[0] else (),
        scd_type=int(str(found.get("STORED", 1))),
        track_history_column_list=() if track[0] else track[1],
        track_history_except_column_list=track[1] if track[0] else (),
    )
    check_flow(flow, located=False)
    return flow


def _idents(c: Cursor) -> tuple[str, ...]:
    c.expect("(")
    out = [c.ident()]
    while c.accept(","):
        out.append(c.ident())
    c.expect(")")
    return tuple(out)


def _expression(c: Cursor) -> str:
    """The text up to the next clause (at parenthesis depth 0) or the end."""
    start, depth = c.i, 0
    while not c.at_end():
        word = c.words[c.i]
        if depth == 0 and c.i > start and any(c.peek(*words) for words in _CLAUSES):
            break
        depth += (word.text == "(" and not word.is_string) - (word.text == ")" and not word.is_string)
        c.i += 1
    if c.i == start:
        raise c.error("an expression")
    return c.sql[c.words[start].start : c.words[c.i - 1].end + 1].strip()
