"""The doctests of the modules `make mutation` mutates, as tests of mutmut's runs.

`make test` runs these doctests through ``--doctest-modules``. mutmut runs only the test
paths of ``[tool.mutmut]``, and its mutated copy of a module holds each docstring once per
mutant, so collecting that copy with ``--doctest-modules`` would run every mutant's
doctests. This file runs each module's own doctests (not the mutants' copies) and only
under mutmut (which sets ``MUTANT_UNDER_TEST``): in `make test` they would run twice.
"""

from __future__ import annotations

import doctest
import importlib
import os

import pytest

MODULES = [
    "sparkmv.analysis.incremental",
    "sparkmv.analysis.maintenance_plan",
    "sparkmv.analysis.correlated",
    "sparkmv.analysis.lineage",
    "sparkmv.analysis.query",
    "sparkmv.analysis.signed",
    "sparkmv.analysis.transforms",
    "sparkmv.analysis.rewrite",
    "sparkmv.analysis.rewrite.derive",
    "sparkmv.analysis.rewrite.implies",
    "sparkmv.analysis.rewrite.normalize",
    "sparkmv.analysis.rewrite.union",
    "sparkmv.refresh.chunking",
    "sparkmv.refresh.planner",
    "sparkmv.storage.partition_values",
]


@pytest.mark.skipif("MUTANT_UNDER_TEST" not in os.environ, reason="runs under mutmut only (make test runs doctests)")
@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    module = importlib.import_module(name)
    # mutmut names its copies x_<function>__mutmut_<n> and xǁ<Class>ǁ<method>__mutmut_<n>
    tests = [t for t in doctest.DocTestFinder().find(module) if "__mutmut_" not in t.name and t.examples]
    assert tests, f"{name} has no doctests"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    outcome = runner.summarize(verbose=False)
    assert outcome.failed == 0, f"{outcome.failed} of {outcome.attempted} doctest examples of {name} failed"
