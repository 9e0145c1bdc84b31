"""Expressions over aggregates under the delta rules (TPC-H Q14's
``100.00 * sum(CASE ...) / sum(l_extendedprice * (1 - l_discount))``, Q8's share, ``sum(x) / 7.0``).

An output column that is an expression over ``SUM`` and ``COUNT`` calls (no column outside
them, no DISTINCT) is not a sum itself, but each call is: the MV keeps every call as hidden
state (a SUM with its non-NULL count, so a SUM of only NULLs stays NULL), the delta rules
merge the state like any SUM or COUNT, and the column is computed from the merged state by
the same expression with each call replaced by its state column (the *formula*). This is how
Snowflake and Databricks maintain such a column: the aggregates are the state, the
expression is applied on read or after the merge.

>>> from sqlglot import exp
>>> from sparkmv.analysis.query import parse_query
>>> item = parse_query("SELECT 100 * sum(a) / count(*) AS r FROM t").expressions[0].unalias()
>>> formula_of(2, item)
(('__smv_f2_0', '__smv_f2_0_nn', '__smv_f2_1'), '100 * __smv_f2_0 / __smv_f2_1')
>>> formula_of(0, parse_query("SELECT max(a) + 1 FROM t").expressions[0]) is None
True
"""

from __future__ import annotations

from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate
from sparkmv.analysis.query import DIALECT

STATE = "__smv_f"


def _calls(expr: exp.Expr) -> list[exp.Expr]:
    return [n for n in expr.dfs() if is_aggregate(n)]


def formula_of(position: int, expr: exp.Expr) -> tuple[tuple[str, ...], str] | None:
    """The hidden state columns and the formula (Spark SQL over them) of select item
    ``position`` when it is an expression over SUM / COUNT calls, else None.

    State columns, for the ``j``-th call: ``__smv_f<position>_<j>`` (the SUM or COUNT), and
    for a SUM also ``__smv_f<position>_<j>_nn`` (its non-NULL count)."""
    calls = _calls(expr)
    if not calls or any(not isinstance(c, exp.Sum | exp.Count) for c in calls):
        return None
    if any(isinstance(a, exp.Distinct) for c in calls for a in c.iter_expressions()):
        return None
    if any(n.find_ancestor(exp.Window) is not None for c in calls for n in [c]):
        return None
    inside = {id(n) for c in calls for n in c.dfs()}
    if any(isinstance(n, exp.Column) and id(n) not in inside for n in expr.dfs()):
        return None  # a column outside the aggregates (a group key) is left to another technique
    state: list[str] = []
    formula = expr.copy()
    for j, call in enumerate(_calls(formula)):
        name = f"{STATE}{position}_{j}"
        state += [name, f"{name}_nn"] if isinstance(call, exp.Sum) else [name]
        call.replace(exp.column(name))
    return tuple(state), formula.sql(DIALECT)


def formula_state_calls(position: int, expr: exp.Expr) -> list[exp.Expr]:
    """The aggregate calls computing the state columns of :func:`formula_of`, aliased:
    ``SUM(x) AS __smv_f<p>_<j>, COUNT(x) AS __smv_f<p>_<j>_nn`` for a SUM, the COUNT as
    written for a COUNT."""
    out: list[exp.Expr] = []
    for j, call in enumerate(_calls(expr)):
        name = f"{STATE}{position}_{j}"
        out.append(exp.alias_(call.copy(), name))
        if isinstance(call, exp.Sum):
            out.append(exp.alias_(exp.Count(this=call.this.copy()), f"{name}_nn"))
    return out


def blank_formulas(query: exp.Query, formulas: dict[int, str]) -> exp.Query:
    """A copy of aggregate ``query`` (one SELECT) with select item ``i`` of ``formulas``
    (position -> output name) replaced by ``NULL AS <name>``: the delta terms carry only
    the formulas' state (a partial SUM of a signed delta may be 0, and dividing by it would
    fail); the merge computes the formula.

    >>> from sparkmv.analysis.query import parse_query
    >>> blank_formulas(parse_query("SELECT k, sum(a) / sum(b) AS r FROM t GROUP BY k"), {1: "r"}).sql()
    'SELECT k, NULL AS r FROM t GROUP BY k'
    """
    out = query.copy()
    assert isinstance(out, exp.Select)
    for i, name in formulas.items():
        out.expressions[i].replace(exp.alias_(exp.null(), name))
    return out
