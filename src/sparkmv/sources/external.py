"""External Iceberg catalogs: their properties, loading them with pyiceberg, and their tables.

``CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" =
"sql" | "rest" | "hive" | "glue", ...)``: the properties are stored as written and handed to
pyiceberg's ``load_catalog`` when a table of the catalog is read, with
``iceberg.catalog.type`` as pyiceberg's ``type``, ``"type" = "iceberg"`` dropped,
``iceberg.catalog.name`` as the name the catalog is loaded under (default: the sparkmv
name), and the ``sparkmv.*`` properties (sparkmv's own settings) kept back.

Secrets are never stored in clear text: a value ``env:NAME`` is the value of environment
variable ``NAME`` of the process that loads the catalog; a property whose key names a secret
(``password``, ``secret``, ``token``, ``credential``) must be such a reference.

Plain Python and pyiceberg (no Spark).
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any

from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
from pyiceberg.table import Table

from sparkmv.errors import SourceError, SparkMvError
from sparkmv.names import ObjectName

CATALOG_TYPES = ("sql", "rest", "hive", "glue")
"""Values of ``iceberg.catalog.type`` (pyiceberg's catalog types)."""
TYPE_PROPERTY = "iceberg.catalog.type"
NAME_PROPERTY = "iceberg.catalog.name"
"""The name the catalog is loaded under in pyiceberg (default: the sparkmv catalog name). A
SQL catalog keeps the tables of each catalog name apart: this is the name its writers use."""
ENV_PREFIX = "env:"
"""A property value ``env:NAME`` is read from environment variable ``NAME`` at load time."""
SECRET_WORDS = ("password", "secret", "token", "credential")
MAX_DELETE_FILES_PROPERTY = "sparkmv.max-delete-files"
"""Catalog property: the most delete files a pinned snapshot of one of its tables may carry
(they are applied by pyiceberg on the driver); more fail the refresh. Default 100."""
DEFAULT_MAX_DELETE_FILES = 100
_SPARKMV_PREFIX = "sparkmv."

_URL_PASSWORD = re.compile(r"://[^/@:\s]+:[^/@\s]+@")
"""``scheme://user:password@host``: a password inside a URL."""

_catalogs: dict[str, Catalog] = {}
_lock = threading.Lock()


def check_properties(name: str, props: dict[str, str]) -> str:
    """Validate the properties of ``CREATE EXTERNAL CATALOG name``; returns the Iceberg
    catalog type (``sql``, ``rest``, ``hive`` or ``glue``).

    Raises:
        SparkMvError: a ``type`` other than ``iceberg``, a missing or unknown
            ``iceberg.catalog.type``, a secret given as a literal, a bad
            ``sparkmv.max-delete-files``.

    >>> check_properties("lake", {"type": "iceberg", "iceberg.catalog.type": "REST", "uri": "http://x"})
    'rest'
    >>> check_properties("lake", {"type": "iceberg", "iceberg.catalog.type": "sql", "token": "abc"})
    Traceback (most recent call last):
    ...
    sparkmv.errors.SparkMvError: catalog 'lake': property 'token' looks like a secret; give it as an ...
    """
    keys = {k.lower(): v for k, v in props.items()}
    kind = keys.get("type", "").lower()
    if kind != "iceberg":
        raise SparkMvError(f'catalog \'{name}\': unsupported catalog type {kind or None!r}; only "type" = "iceberg"')
    catalog_type = keys.get(TYPE_PROPERTY, "").lower()
    if catalog_type not in CATALOG_TYPES:
        raise SparkMvError(
            f"catalog '{name}': unknown {TYPE_PROPERTY} {catalog_type or None!r}; use one of {', '.join(CATALOG_TYPES)}"
        )
    for key, value in props.items():
        if value.startswith(ENV_PREFIX):
            continue
        if any(w in key.lower() for w in SECRET_WORDS):
            raise SparkMvError(
                f"catalog '{name}': property '{key}' looks like a secret; give it as an environment variable "
                f"reference '{ENV_PREFIX}NAME', never in clear text"
            )
        if _URL_PASSWORD.search(value):
            raise SparkMvError(
                f"catalog '{name}': property '{key}' holds a URL with a password; give the whole value as an "
                f"environment variable reference '{ENV_PREFIX}NAME', never in clear text"
            )
    max_deletes(name, props)
    return catalog_type


def max_deletes(name: str, props: dict[str, str]) -> int:
    """The ``sparkmv.max-delete-files`` of catalog ``name`` (default 100).

    Raises:
        SparkMvError: when it is not a non-negative integer.
    """
    raw = props.get(MAX_DELETE_FILES_PROPERTY, str(DEFAULT_MAX_DELETE_FILES))
    if not raw.strip().isdigit():
        raise SparkMvError(f"catalog '{name}': {MAX_DELETE_FILES_PROPERTY} must be a non-negative integer, not {raw!r}")
    return int(raw)


def pyiceberg_properties(name: str, props: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The properties handed to pyiceberg's ``load_catalog``: ``iceberg.catalog.type`` as
    ``type``, ``env:NAME`` references resolved, ``type`` = ``iceberg``, ``iceberg.catalog.name``
    and ``sparkmv.*`` left out; a SQL catalog's tables are never created
    (``init_catalog_tables`` = ``false`` unless given).

    Raises:
        SourceError: when a referenced environment variable is not set.

    >>> pyiceberg_properties("lake", {"type": "iceberg", "iceberg.catalog.type": "rest", "uri": "http://h",
    ...                      "token": "env:TOK", "sparkmv.max-delete-files": "5"}, {"TOK": "t0"})
    {'type': 'rest', 'uri': 'http://h', 'token': 't0'}
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, value in props.items():
        low = key.lower()
        if low in ("type", NAME_PROPERTY) or low.startswith(_SPARKMV_PREFIX):
            continue
        if value.startswith(ENV_PREFIX):
            var = value[len(ENV_PREFIX) :]
            if var not in env:
                raise SourceError(f"catalog '{name}': environment variable {var!r} of property '{key}' is not set")
            value = env[var]
        out["type" if low == TYPE_PROPERTY else key] = value.lower() if low == TYPE_PROPERTY else value
    if out.get("type") == "sql":
        # Reading a catalog never writes to it: pyiceberg would create its tables in any database.
        out.setdefault("init_catalog_tables", "false")
    return out


def open_catalog(name: str, props: dict[str, str]) -> Catalog:
    """The pyiceberg catalog of external catalog ``name`` (loaded once per process and
    properties).

    Raises:
        SourceError: when pyiceberg cannot load or reach it (the cause named).
    """
    resolved = pyiceberg_properties(name, props)
    loaded_as = next((v for k, v in props.items() if k.lower() == NAME_PROPERTY), name)
    key = name + "\0" + loaded_as + "\0" + json.dumps(resolved, sort_keys=True)
    with _lock:
        found = _catalogs.get(key)
    if found is not None:
        return found
    try:
        catalog = load_catalog(loaded_as, **resolved)
        catalog.list_namespaces()  # reachable: a wrong URI fails here, not at the first refresh
    except Exception as exc:  # pyiceberg raises many kinds (connection, auth, import errors)
        raise SourceError(f"catalog '{name}' is unreachable: {_first_line(exc)}") from exc
    with _lock:
        _catalogs[key] = catalog
    return catalog


def forget(name: str) -> None:
    """Drop the loaded catalogs of ``name`` (after DROP CATALOG)."""
    with _lock:
        for key in [k for k in _catalogs if k.split("\0", 1)[0] == name]:
            del _catalogs[key]


def load_table(name: ObjectName, props: dict[str, str] | None) -> Table:
    """Table ``catalog.namespace.name`` of its external catalog.

    Raises:
        SourceError: when the catalog is not registered (``props`` None), unreachable, or
            has no such table.
    """
    if props is None:
        raise SourceError(f"catalog '{name.catalog}' of table '{name.qualified}' does not exist")
    catalog = open_catalog(name.catalog, props)
    try:
        return catalog.load_table((name.namespace, name.name))
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise SourceError(f"table '{name.qualified}' does not exist in catalog '{name.catalog}'") from exc


def _first_line(exc: Any) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
