"""Expectations: data-quality rules over the rows of a dataset, as Databricks' pipelines
define them (``CONSTRAINT name EXPECT (condition) [ON VIOLATION { DROP ROW | FAIL UPDATE }]``,
``@dp.expect``, ``@dp.expect_or_drop``, ``@dp.expect_or_fail``).

A row *passes* an expectation when its condition is TRUE; FALSE or NULL is a violation (a
filter keeps exactly the passing rows, as Spark's ``WHERE``). The action says what a
violation does:

- ``warn`` (no ``ON VIOLATION``): the row is kept and counted;
- ``drop`` (``DROP ROW``): the row is dropped before the dataset is written, and counted;
- ``fail`` (``FAIL UPDATE``): the refresh fails, the dataset unchanged.

A condition is a deterministic boolean expression over one output row: no aggregate,
window, subquery or non-deterministic function (:func:`condition_problem`). Its type is
checked against the query's schema when the dataset is created.

>>> e = Expectation("valid_id", "id IS NOT NULL", "drop")
>>> Expectation.from_json(e.to_json()) == e
True
>>> drop_condition([e, Expectation("pos", "amount > 0", "warn")])
'(id IS NOT NULL)'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from sparkmv.analysis.constructs import is_aggregate, node_problem
from sparkmv.analysis.ivm import IvmAnalysis
from sparkmv.analysis.query import DIALECT
from sparkmv.errors import AnalysisError

WARN, DROP, FAIL = "warn", "drop", "fail"
ACTIONS = (WARN, DROP, FAIL)
ON_VIOLATION = {"DROP ROW": DROP, "FAIL UPDATE": FAIL}
"""``ON VIOLATION`` clause text (upper case, single spaces) -> action."""
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Expectation:
    """One expectation of a dataset.

    Attributes:
        name: its name, unique within the dataset (the metrics are kept under it).
        condition: a Spark SQL boolean expression over the dataset's columns, as written.
        action: :data:`WARN`, :data:`DROP` or :data:`FAIL`.
    """

    name: str
    condition: str
    action: str = WARN

    def to_json(self) -> dict[str, str]:
        """``{"name", "condition", "action"}``."""
        return {"name": self.name, "condition": self.condition, "action": self.action}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Expectation:
        """Inverse of :meth:`to_json`."""
        return cls(str(data["name"]), str(data["condition"]), str(data.get("action") or WARN))

    @property
    def clause(self) -> str:
        """The SQL clause that defines it (the name backquoted when it is not a plain word; a
        line break before the closing parenthesis when the condition holds a ``--`` comment).

        >>> Expectation("ok", "x > 0", "fail").clause
        'CONSTRAINT ok EXPECT (x > 0) ON VIOLATION FAIL UPDATE'
        >>> Expectation("not null", "id IS NOT NULL").clause
        'CONSTRAINT `not null` EXPECT (id IS NOT NULL)'
        """
        violation = {DROP: " ON VIOLATION DROP ROW", FAIL: " ON VIOLATION FAIL UPDATE"}.get(self.action, "")
        condition = self.condition + ("\n" if "--" in self.condition else "")
        return f"CONSTRAINT {quoted_name(self.name)} EXPECT ({condition}){violation}"


def quoted_name(name: str) -> str:
    """``name`` as written in a clause: as it is when a plain word, else backquoted.

    >>> quoted_name("valid_id"), quoted_name("a`b c")
    ('valid_id', '`a``b c`')
    """
    return name if _PLAIN_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def expectations_of(options: Mapping[str, Any] | None) -> tuple[Expectation, ...]:
    """The expectations stored in an object's ``options`` (key ``expectations``)."""
    return tuple(Expectation.from_json(e) for e in (options or {}).get("expectations") or [])


def drop_condition(expectations: Iterable[Expectation]) -> str | None:
    """The condition a row must meet to be written: the AND of the ``drop`` expectations'
    conditions (None when there is none)."""
    drops = [f"({e.condition})" for e in expectations if e.action == DROP]
    return " AND ".join(drops) or None


def condition_problem(condition: str) -> str | None:
    """Why ``condition`` cannot be an expectation (None when it can): not one expression,
    or not a function of one row (an aggregate, a window, a subquery, a non-deterministic
    function such as ``rand()`` or ``current_timestamp()``).

    >>> condition_problem("amount > 0 AND id IS NOT NULL") is None
    True
    >>> condition_problem("rand() > 0.5")
    'rand() is not deterministic'
    >>> condition_problem("sum(x) > 0")
    'sum(x) is an aggregate, not a condition over one row'
    """
    try:
        parsed = sqlglot.parse(condition, read=DIALECT)
    except sqlglot.errors.ParseError as exc:
        return f"it does not parse: {str(exc).splitlines()[0]}"
    if len(parsed) != 1 or parsed[0] is None or not isinstance(parsed[0], exp.Expr):
        return "it is not one expression"
    node = parsed[0]
    if isinstance(node, exp.Query) or not node.find(exp.Column, exp.Literal, exp.Boolean, exp.Func, exp.Null):
        return "it is not an expression"
    for sub in node.walk():
        text = sub.sql(dialect=DIALECT, normalize_functions="lower")
        if isinstance(sub, exp.Query | exp.Subquery):
            return f"{text} is a subquery, not a condition over one row"
        if isinstance(sub, exp.Window):
            return f"{text} is a window function, not a condition over one row"
        if is_aggregate(sub):
            return f"{text} is an aggregate, not a condition over one row"
        problem = node_problem(sub)
        if problem and "non-deterministic" in problem:
            return f"{text} is not deterministic"
    return None


def check_expectations(dataset: str, expectations: Sequence[Expectation]) -> None:
    """Refuse expectations that cannot be kept: an empty or repeated name, an unknown action,
    a condition :func:`condition_problem` refuses.

    Raises:
        AnalysisError: ``expectation 'e' of 'ds' ...``, naming the first problem.
    """
    seen: set[str] = set()
    for e in expectations:
        if not e.name.strip():
            raise AnalysisError(f"an expectation of '{dataset}' has no name")
        if e.name.lower() in seen:
            raise AnalysisError(f"expectation '{e.name}' of '{dataset}' is defined twice")
        seen.add(e.name.lower())
        if e.action not in ACTIONS:
            raise AnalysisError(f"expectation '{e.name}' of '{dataset}' has unknown action '{e.action}'")
        problem = condition_problem(e.condition)
        if problem is not None:
            raise AnalysisError(
                f"expectation '{e.name}' of '{dataset}' must be a deterministic boolean over the row: "
                f"{e.condition!r}: {problem}"
            )


WHY_EXPECTATIONS = (
    "an aggregate with expectations is maintained only by recomputing its touched groups "
    "(a merge would add to rows an expectation dropped)"
)


def row_level(analysis: IvmAnalysis, query: exp.Query, columns: Mapping[str, Any] | None = None) -> IvmAnalysis:
    """``analysis`` of an MV with expectations: maintained by a technique whose delta is
    whole output rows, so the expectations apply to it as a filter (linear over a Z-set):
    the delta rules of a non-aggregate query, or affected-key recomputation. An aggregate the
    delta rules would merge into its stored rows is recomputed by its touched keys instead
    (the query as written, else resolved by ``columns``), or refused with
    :data:`WHY_EXPECTATIONS` when it cannot be.
    """
    if analysis.reason is not None or not analysis.aggregate or analysis.keyed is not None:
        return analysis
    from sparkmv.analysis.incremental import keyed_analysis, without_correlation
    from sparkmv.analysis.keyed import is_keyed_shape
    from sparkmv.analysis.qualify import qualify_unqualified

    if analysis.correlated is not None:
        again = without_correlation(analysis)
        if again.reason is None:
            return again
    for form in (query, qualify_unqualified(query, columns) if columns else None):
        keyed = keyed_analysis(form) if form is not None and is_keyed_shape(form) else None
        if keyed is not None and keyed.reason is None:
            return keyed
    return IvmAnalysis(WHY_EXPECTATIONS, True, (), (), analysis.augmented_sql)
