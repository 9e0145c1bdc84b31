"""Transforms of a base partition value onto an MV partition value, and recognizing them
in a partition column's expression (:mod:`sparkmv.analysis.lineage` traces the column; see
its docstring for the list of known transforms).

>>> Transform("prefix", 7).apply("1995-02-14")
'1995-02'
>>> Transform("trunc_month", 0).apply("1995-02-14")
'1995-02-01'
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlglot import exp
from sqlglot.errors import SqlglotError

from sparkmv.analysis.query import DIALECT
from sparkmv.storage.partition_values import PartitionText, parse, to_text

TIME_SUFFIX = " 00:00:00"
_TRUNC_KEEP = {"trunc_month": 7, "trunc_year": 4, "trunc_quarter": 4, "trunc_week": 0}


@dataclass(frozen=True)
class Transform:
    """A transform of a partition value.

    Attributes:
        kind: identity, prefix (first ``length`` characters), trunc_month, trunc_year.
        length: the prefix length.
        suffix: text appended (``" 00:00:00"`` when the result is a Spark TIMESTAMP).

    >>> Transform("trunc_year", suffix=TIME_SUFFIX).apply("1995-02-14")
    '1995-01-01 00:00:00'
    >>> Transform("prefix", 10, TIME_SUFFIX).apply("1995-02-14")
    '1995-02-14 00:00:00'
    """

    kind: str
    length: int = 0
    suffix: str = ""

    def apply(self, value: PartitionText) -> PartitionText:
        """The MV partition value for base partition value ``value`` (both in the one text
        form of :mod:`sparkmv.storage.partition_values`).

        >>> Transform("trunc_week", suffix=TIME_SUFFIX).apply("2024-01-04")
        '2024-01-01 00:00:00'
        >>> Transform("trunc_quarter").apply("2024-05-31 10:00:00")
        '2024-04-01'
        >>> Transform("trunc_hour").apply("2024-05-31 10:42:00.5"), Transform("trunc_hour").apply("2024-05-31")
        ('2024-05-31 10:00:00', '2024-05-31 00:00:00')
        """
        if value is None:
            return None
        if self.kind == "prefix":
            out = value[: self.length]
        elif self.kind == "trunc_month":
            out = value[:7] + "-01"
        elif self.kind == "trunc_year":
            out = value[:4] + "-01-01"
        elif self.kind == "trunc_hour":
            out = value[:13] + ":00:00" if len(value) > 10 else value + " 00:00:00"
        elif self.kind in ("trunc_week", "trunc_quarter"):
            day = parse(value[:10], "date")
            if self.kind == "trunc_week":
                day -= timedelta(days=day.weekday())  # Spark's weeks start on Monday
            else:
                day = day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
            out = to_text(day) or ""
        else:
            out = value
        return out + self.suffix

    def describe(self, column: str) -> str:
        """Human-readable form, for EXPLAIN."""
        if self.kind == "prefix":
            text = f"substr({column}, 1, {self.length})"
        elif self.kind == "trunc_month":
            text = f"date_trunc('month', {column})"
        elif self.kind.startswith("trunc_"):
            text = f"date_trunc('{self.kind.removeprefix('trunc_')}', {column})"
        else:
            text = column
        return f"cast({text} AS TIMESTAMP)" if self.suffix else text


IDENTITY = Transform("identity")


_FORMAT_PREFIX = {"yyyy-MM": 7, "yyyy": 4, "yyyy-MM-dd": 10, "yyyyMM": -1}


def _transform_of(expr: exp.Expression) -> tuple[Transform, exp.Column] | None:
    """Recognise ``f(column)`` for a supported ``f``; None when unsupported."""
    e = expr.unalias() if isinstance(expr, exp.Alias) else expr
    to_date = False
    while isinstance(e, exp.Cast | exp.Paren):
        if isinstance(e, exp.Cast) and not to_date and e.to.is_type(exp.DataType.Type.DATE):
            to_date = True
        e = e.this
    if not isinstance(e, exp.Expression):
        return None
    found = _transform_inner(e)
    if found is None or not to_date:
        return found
    # cast(... AS DATE) keeps the first 10 characters (yyyy-MM-dd) of the inner value.
    composed = _compose(Transform("prefix", 10), found[0])
    return (composed, found[1]) if composed is not None else None


def _transform_inner(e: exp.Expression) -> tuple[Transform, exp.Column] | None:
    if isinstance(e, exp.Column):
        return IDENTITY, e
    cols = list(e.find_all(exp.Column))
    if len(cols) != 1:
        return None
    col = cols[0]
    if isinstance(e, exp.TimeToStr):
        fmt = e.args.get("format")
        text = fmt.name if isinstance(fmt, exp.Literal) else None
        spark_fmt = _spark_format(e)
        n = _FORMAT_PREFIX.get(spark_fmt or text or "", 0)
        inner = e.this
        while isinstance(inner, exp.TimeStrToTime | exp.Cast | exp.TsOrDsToDate | exp.StrToTime):
            inner = inner.this
        if n > 0 and inner is col:
            return Transform("prefix", n), col
        return None
    if isinstance(e, exp.TsOrDsToDate) and e.this is col and e.args.get("format") is None:
        return Transform("prefix", 10), col  # to_date(col): the date part
    if isinstance(e, exp.Substring) and e.this is col:
        start, length = e.args.get("start"), e.args.get("length")
        if _int(start) == 1 and _int(length):
            return Transform("prefix", _int(length) or 0), col
        return None
    if isinstance(e, exp.Left) and e.this is col and _int(e.expression):
        return Transform("prefix", _int(e.expression) or 0), col
    if isinstance(e, exp.DateTrunc | exp.TimestampTrunc):
        unit_node = e.args.get("unit")
        unit = (unit_node.name if unit_node is not None else "").lower()
        inner = e.this
        while isinstance(inner, exp.Cast | exp.Paren | exp.TsOrDsToDate | exp.TimeStrToTime):
            inner = inner.this
        if inner is not col:
            return None
        # Spark: date_trunc(...) is a TIMESTAMP, trunc(...) a DATE.
        suffix = TIME_SUFFIX if isinstance(e, exp.TimestampTrunc) else ""
        if unit in ("month", "mm", "mon"):
            return Transform("trunc_month", suffix=suffix), col
        if unit in ("year", "yyyy", "yy"):
            return Transform("trunc_year", suffix=suffix), col
        if unit in ("week", "quarter"):
            return Transform(f"trunc_{unit}", suffix=suffix), col
        if unit == "hour" and suffix:
            return Transform("trunc_hour"), col
        if unit in ("day", "dd"):
            return Transform("prefix", 10, suffix), col
    return None


def _spark_format(e: exp.TimeToStr) -> str | None:
    try:
        text = e.sql(DIALECT)
    except SqlglotError:
        return None
    start = text.find("'")
    end = text.rfind("'")
    return text[start + 1 : end] if 0 <= start < end else None


def _int(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and node.is_int:
        return int(node.this)
    return None


def _compose(outer: Transform, inner: Transform) -> Transform | None:
    """``outer(inner(v))`` as one transform, or None when it is not one of ours.

    >>> _compose(Transform("prefix", 4), Transform("prefix", 7))
    Transform(kind='prefix', length=4, suffix='')
    >>> _compose(Transform("prefix", 10), Transform("trunc_month", suffix=TIME_SUFFIX))
    Transform(kind='trunc_month', length=0, suffix='')
    """
    if outer.kind == "identity" and not outer.suffix:
        return inner
    if inner.kind == "identity" and not inner.suffix:
        return outer
    if outer.kind != "prefix" or outer.suffix:
        return None
    n = outer.length
    if inner.kind == "prefix":
        body = inner.length
        if n <= body:
            return Transform("prefix", n)
        return inner if n >= body + len(inner.suffix) else None
    if inner.kind == "trunc_hour":
        # The hour keeps the first 13 characters (yyyy-MM-dd HH) of a timestamp.
        return Transform("prefix", n) if n <= 13 else (inner if n >= 19 else None)
    keep = _TRUNC_KEEP.get(inner.kind)
    if keep is None:
        return None
    if n >= 10:
        return Transform(inner.kind, suffix=inner.suffix[: n - 10])
    return Transform("prefix", n) if n <= keep else None
