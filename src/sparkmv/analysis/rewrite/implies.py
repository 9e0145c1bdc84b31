"""Does one predicate imply another? Ranges and IN lists over the same expression.

Both predicates are canonical (:func:`sparkmv.analysis.rewrite.normalize.canonical`), so a
comparison is ``<``, ``<=`` or ``=`` with its operands in a fixed order. Literals compare
when both are numbers, or both strings of the same type (a ``CAST('1995-01-01' AS DATE)``
compares with another date as text: ISO dates sort as text).

>>> from sparkmv.analysis.rewrite.normalize import canonical
>>> from sqlglot import parse_one
>>> def c(text): return canonical(parse_one(text, read="spark"))
>>> implies(c("x >= 10"), c("x > 5")), implies(c("x > 5"), c("x >= 10"))
(True, False)
>>> implies(c("x = 3"), c("x IN (1, 3)")), implies(c("x IN (1, 2)"), c("x IN (1, 2, 3)"))
(True, True)
>>> implies(c("d < CAST('1995-03-01' AS DATE)"), c("CAST('1996-01-01' AS DATE) > d"))
True
"""

from __future__ import annotations

from sqlglot import exp

Value = tuple[str, float | str]
"""A comparable literal: (kind, value); kind ``number`` or the type text of a cast string."""

_FLIP = {"<": ">", "<=": ">=", "=": "="}
_OPS: dict[type[exp.Expr], str] = {exp.LT: "<", exp.LTE: "<=", exp.EQ: "="}


def _value(node: exp.Expr) -> Value | None:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and node.this.is_number:
        return ("number", -float(node.this.this))
    if isinstance(node, exp.Literal):
        return ("number", float(node.this)) if node.is_number else ("string", node.this)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        return (node.to.sql().lower(), node.this.this)
    return None


def _bound(pred: exp.Expr) -> tuple[exp.Expr, str, Value] | None:
    """``(expression, op, literal)`` for ``expression op literal``, op in < <= = >= >."""
    op = _OPS.get(type(pred))
    if op is None:
        return None
    left, right = pred.this, pred.expression
    value = _value(right)
    if value is not None and _value(left) is None:
        return left, op, value
    value = _value(left)
    if value is not None and _value(right) is None:
        return right, _FLIP[op], value
    return None


def _in_list(pred: exp.Expr) -> tuple[exp.Expr, list[Value]] | None:
    if isinstance(pred, exp.In) and not pred.args.get("query") and not pred.args.get("is_global"):
        values = [_value(v) for v in pred.expressions]
        if values and all(v is not None for v in values):
            return pred.this, [v for v in values if v is not None]
    bound = _bound(pred)
    if bound is not None and bound[1] == "=":
        return bound[0], [bound[2]]
    return None


def implies(query: exp.Expr, mv: exp.Expr) -> bool:
    """True when canonical predicate ``query`` implies canonical predicate ``mv`` (False when
    it cannot tell)."""
    if query == mv:
        return True
    q_in, m_in = _in_list(query), _in_list(mv)
    if q_in is not None and m_in is not None and isinstance(mv, exp.In):
        return q_in[0] == m_in[0] and all(v in m_in[1] for v in q_in[1])
    q, m = _bound(query), _bound(mv)
    if q is None or m is None or q[0] != m[0] or q[2][0] != m[2][0]:
        return False
    (_, q_op, (_, qv)), (_, m_op, (_, mv_)) = q, m
    return _range_implies(q_op, qv, m_op, mv_)


def _range_implies(q_op: str, qv: float | str, m_op: str, mv: float | str) -> bool:
    """``x q_op qv`` implies ``x m_op mv`` (values of one kind)."""
    if m_op in (">", ">="):
        if q_op not in (">", ">=", "="):
            return False
        return qv > mv or (qv == mv and (m_op == ">=" or q_op == ">"))  # type: ignore[operator]
    if m_op in ("<", "<="):
        if q_op not in ("<", "<=", "="):
            return False
        return qv < mv or (qv == mv and (m_op == "<=" or q_op == "<"))  # type: ignore[operator]
    return q_op == "=" and qv == mv
