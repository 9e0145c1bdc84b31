"""The definition of a refreshable table: WITH options, validation, stored form.

A refreshable table is stored as one ``smv_objects`` row of kind ``REFRESHABLE_TABLE``;
everything about its associated source lives in the row's ``options`` JSON, written by
:meth:`TableDef.to_options` and read back by :meth:`TableDef.from_row`. Plain Python:
no Spark here.

>>> opts = parse_with_options("t", {"connector": "files", "path": "/", "format": "CSV",
...                                 "refresh_mode": "full_reload"})
>>> (opts["format"], opts["refresh_mode"], opts["vnode_count"], opts["csv.header"])
('csv', 'FULL_RELOAD', 64, True)
>>> parse_with_options("t", {"refresh_interval_sec": "10"})
Traceback (most recent call last):
...
sparkmv.errors.InvalidPropertyError: Table 't': refresh_interval_sec requires refresh_mode = 'FULL_RELOAD'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from sparkmv.catalog.models import ObjectRow
from sparkmv.errors import InvalidPropertyError
from sparkmv.names import CHANGELOG_SUFFIX, ObjectName, changelog_name

__all__ = ["CHANGELOG_SUFFIX", "changelog_name"]  # the rule lives in sparkmv.names
from sparkmv.refresh.properties import LEASE_SECONDS, check_lease
from sparkmv.storage import warehouse

VNODE_COLUMN = "_vnode"
CHANGELOG_LEAF = "__smv_changelog"
"""Leaf directory of staged changelog files (how the publish tells them from table files)."""
SIGN_COLUMN = "sign"
"""The changelog's weight column: +1 for ``I``/``U`` rows, -1 for ``UB``/``D`` rows."""
CHANGELOG_COLUMNS = ("op", "run_id", SIGN_COLUMN)
"""Changelog columns besides the declared ones (so no declared column may be named so)."""
FORMATS = ("csv", "parquet", "json")
CONNECTORS = ("files", "jdbc")
REFRESH_MODES = ("FULL_RELOAD",)

_COMMON = {
    "connector",
    "refresh_mode",
    "refresh_interval_sec",
    "vnode_count",
    "merge_batch_rows",
    "lease_timeout_seconds",
    "lease_renew_seconds",
    "max_refresh_attempts",
}
_FILES = {"path", "format", "match_pattern", "csv.header", "csv.delimiter"}
_JDBC = {"url", "query", "user", "password", "password_env", "password_file", "driver", "jars"}

MAX_INTERVAL_SECONDS = 3650 * 86400
"""Longest ``refresh_interval_sec``: ten years, as for an MV's ``EVERY`` interval."""
_INT_RANGES: dict[str, tuple[int, int, int]] = {
    # name: (min, max, default)
    "vnode_count": (1, 4096, 64),
    "merge_batch_rows": (1, 2**62, 4_000_000),
    **LEASE_SECONDS,
    "max_refresh_attempts": (1, 100, 2),
}


def _positive_int(table: str, key: str, value: str, low: int, high: int) -> int:
    text = value.strip()
    if not text.lstrip("+").isdigit() or not (low <= int(text) <= high):
        raise InvalidPropertyError(f"Table '{table}': {key} must be an integer between {low} and {high}, got '{value}'")
    return int(text)


def _bool(table: str, key: str, value: str) -> bool:
    low = value.strip().lower()
    if low not in ("true", "false"):
        raise InvalidPropertyError(f"Table '{table}': {key} must be 'true' or 'false', got '{value}'")
    return low == "true"


def parse_with_options(table: str, raw: dict[str, str]) -> dict[str, Any]:
    """Validate the WITH options of ``CREATE TABLE`` and return their normal form.

    Args:
        table: the table's display name (for messages).
        raw: option name (lower case) -> text value, as parsed.

    Returns:
        JSON-able dict: ``connector`` (None for a plain table), ``refresh_mode`` (None or
        ``FULL_RELOAD``), ``refresh_interval_sec`` (int or None), ``vnode_count``,
        ``merge_batch_rows``, lease seconds, ``max_refresh_attempts``, and the connector's own options (``path``,
        ``format``, ``match_pattern``, ``csv.header``, ``csv.delimiter`` / ``url``,
        ``query``, ``user``, ``password_env`` / ``password_file``, ``driver``, ``jars``).

    Raises:
        InvalidPropertyError: unknown option, connector or format; a missing required
            option; ``refresh_interval_sec`` not a positive integer or given without
            ``refresh_mode = 'FULL_RELOAD'``; a ``path`` that does not exist; a JDBC
            ``password`` in clear text (option or URL parameter; see :func:`_jdbc_options`).
    """
    opts = {k.strip().lower(): str(v) for k, v in raw.items()}
    connector = opts.get("connector")
    if connector is not None:
        connector = connector.strip().lower()
        if connector not in CONNECTORS:
            raise InvalidPropertyError(
                f"Table '{table}': unknown connector '{opts['connector']}' (supported: {', '.join(CONNECTORS)})"
            )
    allowed = _COMMON | (_FILES if connector == "files" else _JDBC if connector == "jdbc" else set())
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise InvalidPropertyError(f"Table '{table}': unknown option '{unknown[0]}'")
    out: dict[str, Any] = {"connector": connector}
    mode = opts.get("refresh_mode")
    if mode is not None:
        mode = mode.strip().upper()
        if mode not in REFRESH_MODES:
            raise InvalidPropertyError(
                f"Table '{table}': unsupported refresh_mode '{opts['refresh_mode']}' (supported: FULL_RELOAD)"
            )
        if connector is None:
            raise InvalidPropertyError(f"Table '{table}': refresh_mode FULL_RELOAD needs a connector")
    out["refresh_mode"] = mode
    interval = opts.get("refresh_interval_sec")
    if interval is not None:
        if mode != "FULL_RELOAD":
            raise InvalidPropertyError(f"Table '{table}': refresh_interval_sec requires refresh_mode = 'FULL_RELOAD'")
        out["refresh_interval_sec"] = _positive_int(table, "refresh_interval_sec", interval, 1, MAX_INTERVAL_SECONDS)
    else:
        out["refresh_interval_sec"] = None
    for key, (low, high, default) in _INT_RANGES.items():
        out[key] = _positive_int(table, key, opts[key], low, high) if key in opts else default
    check_lease(out["lease_renew_seconds"], out["lease_timeout_seconds"], owner=f"Table '{table}': ")
    if connector == "files":
        _files_options(table, opts, out)
    elif connector == "jdbc":
        _jdbc_options(table, opts, out)
    return out


def _jdbc_options(table: str, opts: dict[str, str], out: dict[str, Any]) -> None:
    """Validate the JDBC options into ``out``. Passwords are never stored: ``password_env``
    names an environment variable, ``password_file`` a file (absolute path) holding it;
    ``jars`` lists driver jars that must exist."""
    from sparkmv.refresh.reload.jdbc import is_env_name, split_jars, url_has_password

    for key in ("url", "query"):
        if not opts.get(key, "").strip():
            raise InvalidPropertyError(f"Table '{table}': connector 'jdbc' needs option '{key}'")
    url = opts["url"].strip()
    if not url.startswith("jdbc:"):
        raise InvalidPropertyError(f"Table '{table}': url must be a JDBC URL (jdbc:...), got '{url}'")
    clear = "option 'password'" if "password" in opts else "a password in the url" if url_has_password(url) else None
    if clear is not None:
        raise InvalidPropertyError(
            f"Table '{table}': {clear} would be stored in clear text in the catalog; "
            "name an environment variable with password_env = 'VAR' or a file with password_file = '/path' instead"
        )
    env, path = opts.get("password_env", "").strip(), opts.get("password_file", "").strip()
    if env and path:
        raise InvalidPropertyError(f"Table '{table}': give password_env or password_file, not both")
    if "password_env" in opts and not is_env_name(env):
        raise InvalidPropertyError(f"Table '{table}': password_env must name an environment variable, got '{env}'")
    if "password_file" in opts and not os.path.isabs(path):
        raise InvalidPropertyError(f"Table '{table}': password_file must be an absolute path, got '{path}'")
    jars = split_jars(opts.get("jars", ""))
    missing = next((j for j in jars if not os.path.isfile(j)), None)  # local driver jars
    if missing is not None:
        raise InvalidPropertyError(f"Table '{table}': jars: driver jar '{missing}' does not exist")
    out.update(
        url=url,
        query=opts["query"],
        user=opts.get("user"),
        password_env=env or None,
        password_file=path or None,
        driver=opts.get("driver"),
        jars=",".join(jars) or None,
    )


def _files_options(table: str, opts: dict[str, str], out: dict[str, Any]) -> None:
    for key in ("path", "format"):
        if not opts.get(key, "").strip():
            raise InvalidPropertyError(f"Table '{table}': connector 'files' needs option '{key}'")
    fmt = opts["format"].strip().lower()
    if fmt not in FORMATS:
        raise InvalidPropertyError(
            f"Table '{table}': unknown format '{opts['format']}' (supported: {', '.join(FORMATS)})"
        )
    path = warehouse.absolute(opts["path"].strip())
    if not warehouse.is_dir(path):
        raise InvalidPropertyError(f"Table '{table}': path '{opts['path']}' does not exist or is not a directory")
    if fmt != "csv" and ("csv.header" in opts or "csv.delimiter" in opts):
        raise InvalidPropertyError(f"Table '{table}': csv.* options need format = 'csv'")
    delimiter = opts.get("csv.delimiter", ",")
    if len(delimiter) != 1:
        raise InvalidPropertyError(f"Table '{table}': csv.delimiter must be one character, got '{delimiter}'")
    out.update(
        {
            "path": path,
            "format": fmt,
            "match_pattern": opts.get("match_pattern", "*").strip() or "*",
            "csv.header": _bool(table, "csv.header", opts["csv.header"]) if "csv.header" in opts else True,
            "csv.delimiter": delimiter,
        }
    )


@dataclass(frozen=True)
class Column:
    """A declared column: name (lower case), Spark type DDL (``int``, ``decimal(12,2)``), NOT NULL."""

    name: str
    type: str
    not_null: bool


@dataclass(frozen=True)
class TableDef:
    """A refreshable table as the reload sees it.

    Attributes:
        object_id: ``smv_objects.id``.
        name: the table.
        columns: declared columns, in order (``_vnode`` is not one of them).
        primary_key: key column names, in declared key order.
        on_conflict: ``OVERWRITE`` (last duplicate wins) or ``IGNORE`` (first wins, an
            existing row keeps its values).
        options: the normal form of :func:`parse_with_options`.
    """

    object_id: int
    name: ObjectName
    columns: list[Column]
    primary_key: list[str]
    on_conflict: str
    options: dict[str, Any]

    @property
    def refreshable(self) -> bool:
        """True when the table has an associated source with ``refresh_mode FULL_RELOAD``."""
        return self.options.get("refresh_mode") == "FULL_RELOAD" and self.options.get("connector") is not None

    @property
    def vnode_count(self) -> int:
        """Number of vnodes (hash buckets of the key)."""
        return int(self.options.get("vnode_count", 64))

    @property
    def value_columns(self) -> list[str]:
        """Declared columns that are not key columns, in order."""
        return [c.name for c in self.columns if c.name not in self.primary_key]

    @property
    def ddl(self) -> str:
        """Spark DDL of the declared columns (``a int, b string``)."""
        return ", ".join(f"`{c.name}` {c.type}" for c in self.columns)

    def to_options(self) -> dict[str, Any]:
        """The JSON stored in ``smv_objects.options``."""
        return {
            **self.options,
            "columns": [[c.name, c.type, c.not_null] for c in self.columns],
            "primary_key": list(self.primary_key),
            "on_conflict": self.on_conflict,
        }

    @classmethod
    def from_row(cls, row: ObjectRow) -> TableDef:
        """Read a ``REFRESHABLE_TABLE`` row back."""
        opts = dict(row.options or {})
        columns = [Column(str(n), str(t), bool(nn)) for n, t, nn in opts.pop("columns", [])]
        pk = [str(k) for k in opts.pop("primary_key", [])]
        on_conflict = str(opts.pop("on_conflict", "OVERWRITE"))
        return cls(row.id, ObjectName(row.namespace, row.name), columns, pk, on_conflict, opts)
