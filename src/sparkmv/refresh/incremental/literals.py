"""Filters of collected key values as Spark SQL text (the cost of a refresh follows the
change).

PySpark's ``Column.isin(values)`` and ``F.lit(v)`` make one Py4J call per value: 1,000 keys
cost ~0.6 s before Spark runs anything (bench/RESULTS.md, "Where the first MV's cost after
RF2 goes"). The same filter written as one SQL expression is parsed by Spark in one call
(~1 ms). Each literal here has exactly the column's type, so Spark's constant folding leaves
plain literals that it pushes into the Parquet scans as before.

Types are Spark's JSON type names (``DataType.jsonValue()`` of a simple type: ``"integer"``,
``"decimal(15,2)"``, ...); a value or type without an exact literal gives None, and the
caller keeps its own way.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Sequence

_INTEGER_SUFFIX = {"byte": "Y", "short": "S", "integer": "", "long": "L"}
_INTEGER_BITS = {"byte": 8, "short": 16, "integer": 32, "long": 64}


def quote_name(name: str) -> str:
    """``name`` as a Spark SQL identifier in backticks.

    >>> quote_name("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: object, kind: object) -> str | None:
    """Spark SQL text of ``value`` as a literal of exactly the Spark type ``kind`` (its JSON
    name), or None when there is none here (NULL, timestamps, nested types, collated
    strings, a value of another Python type).

    Strings are written as UTF-8 bytes cast to STRING, so no quote or backslash escaping
    (which depends on ``spark.sql.parser.escapedStringLiterals``) is involved.

    >>> sql_literal(7, "long"), sql_literal(7, "integer"), sql_literal(True, "boolean")
    ('7L', '7', 'TRUE')
    >>> sql_literal(-128, "byte"), sql_literal(128, "byte")
    ('-128Y', None)
    >>> sql_literal(decimal.Decimal("1E+2"), "decimal(15,2)")
    "CAST('100.00' AS DECIMAL(15,2))"
    >>> sql_literal("it's", "string")
    "CAST(X'69742773' AS STRING)"
    >>> sql_literal(datetime.date(1995, 3, 15), "date")
    "DATE'1995-03-15'"
    >>> sql_literal(float("-inf"), "double"), sql_literal(None, "integer")
    ("CAST('-inf' AS DOUBLE)", None)
    """
    if value is None or not isinstance(kind, str):
        return None
    if kind == "boolean":
        return ("TRUE" if value else "FALSE") if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if kind in _INTEGER_SUFFIX:
        if not isinstance(value, int) or abs(value * 2 + 1) > 2 ** _INTEGER_BITS[kind]:
            return None  # out of the type's range: no literal of that type
        return f"{value}{_INTEGER_SUFFIX[kind]}"
    if kind.startswith("decimal(") and isinstance(value, (decimal.Decimal, int)):
        return _decimal_literal(decimal.Decimal(value), kind)
    if kind == "string" and isinstance(value, str):
        return f"CAST(X'{value.encode('utf-8').hex().upper()}' AS STRING)"
    if kind == "date" and isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return f"DATE'{value.isoformat()}'"
    if kind in ("double", "float") and isinstance(value, float):
        text = repr(value) if math.isfinite(value) or math.isnan(value) else ("inf" if value > 0 else "-inf")
        return f"CAST('{text}' AS {kind.upper()})"
    return None


def _decimal_literal(value: decimal.Decimal, kind: str) -> str | None:
    """``value`` as a literal of ``kind`` (``decimal(p,s)``), or None when it does not fit
    exactly: more fractional digits than ``s`` would round, more than ``p`` digits in all
    would overflow (an error under ANSI mode).

    >>> _decimal_literal(decimal.Decimal("1.5"), "decimal(3,1)")
    "CAST('1.5' AS DECIMAL(3,1))"
    >>> D = decimal.Decimal
    >>> _decimal_literal(D("1.25"), "decimal(3,1)"), _decimal_literal(D(100), "decimal(3,1)")
    (None, None)
    """
    precision, scale = (int(x) for x in kind[len("decimal(") : -1].split(","))
    if not value.is_finite():
        return None
    exact = value.quantize(decimal.Decimal(1).scaleb(-scale), context=decimal.Context(prec=100))
    if exact != value or len(exact.as_tuple().digits) > precision:
        return None
    return f"CAST('{exact:f}' AS {kind.upper()})"


def in_list_sql(column: str, values: Sequence[object], kind: object) -> str | None:
    """``column IN (<values>)`` as Spark SQL text (``FALSE`` when ``values`` is empty), or
    None when a value has no exact literal of type ``kind`` (:func:`sql_literal`).

    >>> in_list_sql("o_orderkey", [1, 2], "long")
    '`o_orderkey` IN (1L, 2L)'
    >>> in_list_sql("k", [], "long")
    'FALSE'
    """
    literals = [sql_literal(v, kind) for v in values]
    if any(text is None for text in literals):
        return None
    if not literals:
        return "FALSE"
    return f"{quote_name(column)} IN ({', '.join(str(t) for t in literals)})"


def any_row_sql(columns: Sequence[str], rows: Sequence[Sequence[object]], kinds: Sequence[object]) -> str | None:
    """ "The columns' values equal one of ``rows``" as Spark SQL text, NULL-safe (a NULL in a
    row matches a NULL in its column): an IN list for one column (``OR c IS NULL`` when a
    row holds NULL), a disjunction of conjunctions for several. None when a value has no
    exact literal.

    >>> any_row_sql(["k"], [(1,), (None,)], ["integer"])
    '(`k` IN (1) OR `k` IS NULL)'
    >>> any_row_sql(["a", "b"], [(1, None)], ["integer", "integer"])
    '((`a` = 1 AND `b` IS NULL))'
    """
    if len(columns) == 1:
        present = [r[0] for r in rows if r[0] is not None]
        inside = in_list_sql(columns[0], present, kinds[0])
        if inside is None or len(present) == len(rows):
            return inside
        return f"({inside} OR {quote_name(columns[0])} IS NULL)"
    terms = []
    for row in rows:
        parts = []
        for column, value, kind in zip(columns, row, kinds, strict=True):
            if value is None:
                parts.append(f"{quote_name(column)} IS NULL")
                continue
            literal = sql_literal(value, kind)
            if literal is None:
                return None
            parts.append(f"{quote_name(column)} = {literal}")
        terms.append("(" + " AND ".join(parts) + ")")
    return "(" + " OR ".join(terms) + ")" if terms else "FALSE"
