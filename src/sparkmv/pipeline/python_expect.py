"""Expectations of Python definitions: Databricks' ``@dp.expect`` decorators.

pyspark's SDP Python API (``pyspark.pipelines``) has no expectations. While sparkmv loads a
project's Python files (:func:`sparkmv.pipeline.python_defs.load_python_file`), the module
has six decorators more (:func:`installed`; put back as they were afterwards), as Databricks
names them:

- ``@dp.expect(name, condition)``: count the rows that violate ``condition``;
- ``@dp.expect_or_drop(name, condition)``: drop them;
- ``@dp.expect_or_fail(name, condition)``: fail the update;
- ``@dp.expect_all({name: condition, ...})``, ``@dp.expect_all_or_drop({...})``,
  ``@dp.expect_all_or_fail({...})``: several at once.

They decorate a dataset's query function, stacked with its ``@dp.materialized_view`` or
``@dp.table`` in either order, several of them at once. Below the dataset decorator (as
Databricks writes them) they mark the function before it is registered; above it (the
dataset decorator returns None) they mark the function of the flow registered last. Either
way they are kept on the function (:func:`expectations_of_function`), in the order written,
top to bottom, and become :attr:`~sparkmv.pipeline.model.Dataset.expectations`. A wrong
argument raises ``TypeError`` (reported with the decorator's file and line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sparkmv.analysis.expectations import DROP, FAIL, WARN, Expectation

ATTRIBUTE = "__sparkmv_expectations__"
"""The attribute of a query function holding its expectations (a list)."""

Decorator = Callable[[Any], Any]


def expect(name: str, condition: str) -> Decorator:
    """``@dp.expect``: violating rows are kept and counted."""
    return _decorator("expect", [_one("expect", name, condition, WARN)])


def expect_or_drop(name: str, condition: str) -> Decorator:
    """``@dp.expect_or_drop``: violating rows are dropped (and counted)."""
    return _decorator("expect_or_drop", [_one("expect_or_drop", name, condition, DROP)])


def expect_or_fail(name: str, condition: str) -> Decorator:
    """``@dp.expect_or_fail``: a violating row fails the update."""
    return _decorator("expect_or_fail", [_one("expect_or_fail", name, condition, FAIL)])


def expect_all(expectations: Mapping[str, str]) -> Decorator:
    """``@dp.expect_all({name: condition, ...})``: several :func:`expect`."""
    return _decorator("expect_all", _many("expect_all", expectations, WARN))


def expect_all_or_drop(expectations: Mapping[str, str]) -> Decorator:
    """``@dp.expect_all_or_drop({name: condition, ...})``: several :func:`expect_or_drop`."""
    return _decorator("expect_all_or_drop", _many("expect_all_or_drop", expectations, DROP))


def expect_all_or_fail(expectations: Mapping[str, str]) -> Decorator:
    """``@dp.expect_all_or_fail({name: condition, ...})``: several :func:`expect_or_fail`."""
    return _decorator("expect_all_or_fail", _many("expect_all_or_fail", expectations, FAIL))


DECORATORS: dict[str, Callable[..., Decorator]] = {
    f.__name__: f for f in (expect, expect_or_drop, expect_or_fail, expect_all, expect_all_or_drop, expect_all_or_fail)
}
"""The names :func:`installed` gives ``pyspark.pipelines``."""


def expectations_of_function(function: Any) -> list[Expectation]:
    """The expectations the decorators put on query ``function`` (top to bottom; [] when none)."""
    return list(getattr(function, ATTRIBUTE, None) or [])


@contextmanager
def installed() -> Iterator[None]:
    """``pyspark.pipelines`` with :data:`DECORATORS` for the block (what it had of those names
    before is put back after it)."""
    import pyspark.pipelines as module

    missing = object()
    saved = {name: getattr(module, name, missing) for name in DECORATORS}
    for name, function in DECORATORS.items():
        setattr(module, name, function)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is missing:
                delattr(module, name)
            else:
                setattr(module, name, old)


def _one(decorator: str, name: Any, condition: Any, action: str) -> Expectation:
    """One expectation, its arguments checked.

    Raises:
        TypeError: ``dp.<decorator>: the name must be a string, not int`` (also the condition).
    """
    for what, value in (("name", name), ("condition", condition)):
        if not isinstance(value, str):
            raise TypeError(f"dp.{decorator}: the {what} must be a string, not {type(value).__name__}")
    return Expectation(name, condition.strip(), action)


def _many(decorator: str, expectations: Any, action: str) -> list[Expectation]:
    """The expectations of a ``{name: condition}`` dict, in its order.

    Raises:
        TypeError: not a dict, or one of its keys or values not a string.
    """
    if not isinstance(expectations, Mapping):
        raise TypeError(
            f"dp.{decorator}: give a dict of expectation names to conditions, not {type(expectations).__name__}"
        )
    return [_one(decorator, name, condition, action) for name, condition in expectations.items()]


def _decorator(decorator: str, expectations: list[Expectation]) -> Decorator:
    """The decorator putting ``expectations`` on the query function (the one decorated, or,
    above a dataset decorator that returned None, the function of the flow registered last)."""

    def decorate(obj: Any) -> Any:
        function = _last_flow_function(decorator) if obj is None else obj
        if not callable(function):
            raise TypeError(f"dp.{decorator} decorates a query function, not {type(obj).__name__}")
        setattr(function, ATTRIBUTE, [*expectations, *expectations_of_function(function)])
        return obj

    return decorate


def _last_flow_function(decorator: str) -> Any:
    """The query function of the flow the active registry registered last.

    Raises:
        TypeError: no flow was registered (the decorator is not stacked with a dataset's).
    """
    from pyspark.pipelines.graph_element_registry import get_active_graph_element_registry

    flows = getattr(get_active_graph_element_registry(), "flows", None) or []
    if not flows:
        raise TypeError(
            f"dp.{decorator} decorates a dataset's query function: put it with @dp.materialized_view or @dp.table"
        )
    return flows[-1].func
