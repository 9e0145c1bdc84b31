"""Modules imported on first use of one of their attributes.

pyarrow and numpy take ~70 MB of memory once imported; modules a read-only process (the web
UI) imports for pinning and catalog reads use them only where rows are read, so they name
them through :func:`lazy_module` and the UI never loads them.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
    """Stands for the module of its name; imports it at the first attribute access."""

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)  # later accesses skip this method
        return getattr(module, attr)


def lazy_module(name: str) -> Any:
    """A stand-in for module ``name`` (e.g. ``pyarrow.compute``) that imports it when one of
    its attributes is first used.

    >>> pc = lazy_module("json")
    >>> pc.dumps([1])
    '[1]'
    """
    return _LazyModule(name)
