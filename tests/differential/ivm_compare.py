"""Typed multiset comparison of an MV's rows with the oracle's, for the incremental-refresh
differential tests: exact for every value but DOUBLE (relative tolerance :data:`REL_TOL`), so a
DECIMAL must equal its oracle value digit for digit and keep its type."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import date
from decimal import Decimal
from typing import Any

Row = tuple[Any, ...]

REL_TOL = 1e-9
# Near zero a relative tolerance means nothing: 0.1 + 0.2 - 0.3 is 5.6e-17 in one order of
# summation and 0.0 in another. The generated doubles are below 100, so sums differing only by
# rounding differ by far less than this.
ABS_TOL = 1e-12


def canon(value: Any) -> Any:
    """The exact, type-tagged form of a non-DOUBLE value (a DECIMAL is not an integer).

    >>> canon(Decimal("1.50")) == canon(Decimal("1.5")), canon(Decimal("1")) == canon(1)
    (True, False)
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, Decimal):
        return ("decimal", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, date):
        return (type(value).__name__, value.isoformat())
    return ("other", repr(value))


def _split(row: Row) -> tuple[tuple[Any, ...], tuple[float, ...]]:
    """(exact part with DOUBLE positions marked, the DOUBLE values)."""
    exact = tuple("<double>" if isinstance(v, float) else canon(v) for v in row)
    return exact, tuple(v for v in row if isinstance(v, float))


def _close(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL) for x, y in zip(a, b, strict=True))


def _matched(got: list[tuple[float, ...]], want: list[tuple[float, ...]]) -> tuple[list[Any], list[Any]]:
    """Pair DOUBLE parts within tolerance; returns (unmatched wanted, unmatched got)."""
    left = sorted(got)
    missing = []
    for w in sorted(want):
        hit = next((i for i, g in enumerate(left) if _close(g, w)), None)
        if hit is None:
            missing.append(w)
        else:
            left.pop(hit)
    return missing, left


def _join(exact: tuple[Any, ...], doubles: tuple[float, ...]) -> tuple[Any, ...]:
    it = iter(doubles)
    return tuple(next(it) if e == "<double>" else e for e in exact)


def compare(
    columns: list[str], actual: Iterable[Row], oracle_columns: list[str], expected: Iterable[Row]
) -> str | None:
    """None when the two row multisets are equal, else a readable diff.

    Values compare exactly and by type (DECIMAL, integer, string, date), DOUBLE values with
    relative tolerance :data:`REL_TOL`. ``actual`` is in ``columns`` order (the MV's),
    ``expected`` in ``oracle_columns`` order, reordered by name.

    >>> compare(["a", "b"], [(0.1 + 0.2, 1)], ["b", "a"], [(1, 0.3)]) is None
    True
    >>> print(compare(["a"], [(Decimal("0.33"),)], ["a"], [(Decimal("0.330001"),)]))
    columns: ['a']
    MV rows: 1, oracle rows: 1
      missing from MV: (('decimal', Decimal('0.330001')),)
      extra in MV:     (('decimal', Decimal('0.33')),)
    """
    if sorted(c.lower() for c in columns) != sorted(c.lower() for c in oracle_columns):
        return f"columns differ: MV {columns}, oracle {oracle_columns}"
    index = [[c.lower() for c in oracle_columns].index(c.lower()) for c in columns]
    got: dict[tuple[Any, ...], list[tuple[float, ...]]] = {}
    want: dict[tuple[Any, ...], list[tuple[float, ...]]] = {}
    n_got = n_want = 0
    for r in actual:
        exact, doubles = _split(tuple(r))
        got.setdefault(exact, []).append(doubles)
        n_got += 1
    for r in expected:
        exact, doubles = _split(tuple(r[i] for i in index))
        want.setdefault(exact, []).append(doubles)
        n_want += 1
    missing: list[Row] = []
    extra: list[Row] = []
    for key in set(got) | set(want):
        lacking, surplus = _matched(got.get(key, []), want.get(key, []))
        missing += [_join(key, d) for d in lacking]
        extra += [_join(key, d) for d in surplus]
    if not missing and not extra:
        return None
    lines = [f"columns: {columns}", f"MV rows: {n_got}, oracle rows: {n_want}"]
    lines += [f"  missing from MV: {r}" for r in sorted(missing, key=repr)[:40]]
    lines += [f"  extra in MV:     {r}" for r in sorted(extra, key=repr)[:40]]
    if len(missing) > 40 or len(extra) > 40:
        lines.append(f"  ... ({len(missing)} missing, {len(extra)} extra in all)")
    return "\n".join(lines)
