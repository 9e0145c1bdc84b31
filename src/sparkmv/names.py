"""Object names: ``name``, ``namespace.name``, or ``catalog.namespace.name`` (a table of an
external Iceberg catalog), plain identifiers only.

Names reach the warehouse as directory names, so anything but ``[A-Za-z_][A-Za-z0-9_]*``
is refused (no quoting tricks, no path characters).

>>> ObjectName.parse("lineitem")
ObjectName(namespace='default', name='lineitem')
>>> ObjectName.parse("Sales.Q1_Summary").qualified
'sales.q1_summary'
>>> ObjectName.parse("../etc")
Traceback (most recent call last):
...
sparkmv.errors.InvalidNameError: invalid name '../etc': use letters, digits and _ (optionally namespace.name)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sparkmv.errors import InvalidNameError

DEFAULT_NAMESPACE = "default"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
RESERVED_NAMESPACES = frozenset({"sparkmv"})
HIDDEN_COLUMN_PREFIX = "__smv_"
"""Columns of an MV's Iceberg table whose lower-case name starts with this are hidden state
of incremental refresh (a group's row count, the sum and count behind an AVG): sparkmv's
readers (``SELECT *``, ``DESCRIBE``, ``Client.table``, MVs reading the MV) never see them;
an outside Iceberg reader should ignore them."""


def is_hidden_column(name: str) -> bool:
    """True for a hidden state column name.

    >>> is_hidden_column("__smv_count"), is_hidden_column("revenue")
    (True, False)
    """
    return name.lower().startswith(HIDDEN_COLUMN_PREFIX)


def is_identifier(text: str) -> bool:
    """True when ``text`` is a plain identifier (letters, digits, underscore)."""
    return bool(_IDENT.match(text))


@dataclass(frozen=True, order=True)
class ObjectName:
    """A qualified object name, lower-cased (SQL identifiers are case-insensitive).

    ``catalog`` is the external catalog of a three-part name (``lake.db.events``); empty
    for sparkmv's own objects.

    >>> ObjectName.parse("Lake.DB.events").qualified
    'lake.db.events'
    """

    namespace: str
    name: str
    catalog: str = ""

    @classmethod
    def parse(cls, text: str, *, allow_reserved: bool = False) -> ObjectName:
        """Parse ``name``, ``namespace.name`` or ``catalog.namespace.name``.

        Raises:
            InvalidNameError: when a part is not a plain identifier, there are more than
                three parts, or the namespace is reserved (``sparkmv`` holds the system tables).
        """
        parts = text.strip().split(".")
        if len(parts) > 3 or not all(is_identifier(p) for p in parts):
            raise InvalidNameError(f"invalid name {text!r}: use letters, digits and _ (optionally namespace.name)")
        if len(parts) == 1:
            return cls(DEFAULT_NAMESPACE, parts[0].lower())
        if len(parts) == 3:
            return cls(parts[1].lower(), parts[2].lower(), parts[0].lower())
        ns = parts[0].lower()
        if ns in RESERVED_NAMESPACES and not allow_reserved:
            raise InvalidNameError(f"invalid name {text!r}: namespace {ns!r} is reserved")
        return cls(ns, parts[1].lower())

    @property
    def qualified(self) -> str:
        """``namespace.name`` (``catalog.namespace.name`` for an external catalog's table)."""
        if self.catalog:
            return f"{self.catalog}.{self.namespace}.{self.name}"
        return f"{self.namespace}.{self.name}"

    @property
    def display(self) -> str:
        """The name as users wrote it when in the default namespace, else qualified."""
        return self.name if self.namespace == DEFAULT_NAMESPACE and not self.catalog else self.qualified

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        # The catalog only when there is one: a two-part name reads as it always did.
        extra = f", catalog={self.catalog!r}" if self.catalog else ""
        return f"ObjectName(namespace={self.namespace!r}, name={self.name!r}{extra})"


CHANGELOG_SUFFIX = "__changelog"


def changelog_name(name: ObjectName) -> ObjectName:
    """The Iceberg changelog table of refreshable table ``name``: ``name__changelog``.

    >>> changelog_name(ObjectName("default", "users")).qualified
    'default.users__changelog'
    """
    return ObjectName(name.namespace, name.name + CHANGELOG_SUFFIX)


REPLACEMENT_PREFIX = "__smv_replace_"
"""Objects whose name starts with this are hidden: the new definition of a materialized
view being built by ``CREATE OR REPLACE`` (:mod:`sparkmv.services.replace`) before it is
swapped in. Listings (``SHOW``, ``sparkmv status``, the system tables, the web UI, query
rewrite) skip them, and a statement cannot name one."""

_REPLACEMENT_NAME_CHARS = 100
"""How much of the replaced MV's name a replacement's name keeps (the rest of the 128
characters: the prefix and ``_<8 hex digits>``)."""


RETIRED_PREFIX = "__smv_retired_"
"""Iceberg tables whose name starts with this are tables replaced by a swap (``CREATE OR
REPLACE``, a Python MV whose columns changed), kept so that a reader that opened the old
table before the swap can finish; ``sparkmv vacuum`` drops them once they are older than the
snapshot retention. Hidden like replacements; a statement cannot name one."""

_RETIRED_NAME_CHARS = 90


def retired_name(name: ObjectName, at: datetime, token: str) -> ObjectName:
    """The hidden name the table replaced as ``name`` at UTC time ``at`` keeps until vacuum
    drops it; ``token``: 8 lower-case hex digits.

    >>> retired_name(ObjectName("default", "sales"), datetime(2026, 11, 28, 9, 5, 7), "0a1b2c3d").name
    '__smv_retired_sales_20261128090507_0a1b2c3d'
    """
    stamp = at.strftime("%Y%m%d%H%M%S")
    return ObjectName(name.namespace, f"{RETIRED_PREFIX}{name.name[:_RETIRED_NAME_CHARS]}_{stamp}_{token}")


def retired_of(candidate: ObjectName) -> tuple[ObjectName, datetime] | None:
    """The name whose replaced table ``candidate`` is (its first 90 characters) and when it
    was retired (UTC, naive); None when ``candidate`` is not a name :func:`retired_name` gives.

    >>> retired_of(ObjectName("default", "__smv_retired_my_sales_20261128090507_0a1b2c3d"))
    (ObjectName(namespace='default', name='my_sales'), datetime.datetime(2026, 11, 28, 9, 5, 7))
    >>> retired_of(ObjectName("default", "sales"))
    """
    if not candidate.name.startswith(RETIRED_PREFIX):
        return None
    rest, _, token = candidate.name[len(RETIRED_PREFIX) :].rpartition("_")
    owner, _, stamp = rest.rpartition("_")
    if len(token) != 8 or any(ch not in "0123456789abcdef" for ch in token):
        return None
    try:
        return ObjectName(candidate.namespace, owner), datetime.strptime(stamp, "%Y%m%d%H%M%S")
    except ValueError:
        return None


def retired_at(candidate: ObjectName, name: ObjectName | None = None) -> datetime | None:
    """When ``candidate`` was retired (:func:`retired_of`), or None when it is not a retired
    table (of ``name``, when given).

    >>> at = datetime(2026, 11, 28, 9, 5, 7)
    >>> retired_at(retired_name(ObjectName("default", "sales"), at, "0a1b2c3d")) == at
    True
    >>> other = ObjectName("default", "__smv_retired_sales_x_20261128090507_0a1b2c3d")
    >>> retired_at(other, ObjectName("default", "sales"))
    """
    found = retired_of(candidate)
    if found is None:
        return None
    owner, at = found
    if name is not None and owner != ObjectName(name.namespace, name.name[:_RETIRED_NAME_CHARS]):
        return None
    return at


PATH_TABLE_PREFIX = "__smv_path_"
"""External tables whose name starts with this are bound to a path reference of a query
(``parquet.`/data/x```, :mod:`sparkmv.analysis.paths`): created by sparkmv when an MV first
reads the path, listed with the other base tables (kind, format, location)."""


def path_table_name(namespace: str, fmt: str, path: str) -> ObjectName:
    """The stable name of the external table bound to path reference ``fmt.`path``` in
    ``namespace``: the prefix, the format and 16 hex digits of the SHA-256 of format and path.

    >>> path_table_name("default", "parquet", "/data/lineitem").name
    '__smv_path_parquet_54a841969e05c4c4'
    """
    import hashlib

    digest = hashlib.sha256(f"{fmt}\0{path}".encode()).hexdigest()[:16]
    return ObjectName(namespace, f"{PATH_TABLE_PREFIX}{fmt}_{digest}")


def is_hidden(name: str) -> bool:
    """True for sparkmv's hidden names: a replacement being built, a retired table.

    >>> is_hidden("__smv_retired_sales_20261128090507_0a1b2c3d"), is_hidden("sales")
    (True, False)
    """
    return is_replacement(name) or name.lower().startswith(RETIRED_PREFIX)


def is_replacement(name: str) -> bool:
    """True for the (hidden) name of a replacement being built.

    >>> is_replacement("__smv_replace_sales_0a1b2c3d"), is_replacement("sales")
    (True, False)
    """
    return name.lower().startswith(REPLACEMENT_PREFIX)


def replacement_name(name: ObjectName, token: str) -> ObjectName:
    """The hidden name under which a new definition of MV ``name`` is built; ``token``: 8
    lower-case hex digits telling replacements apart.

    >>> replacement_name(ObjectName("default", "sales"), "0a1b2c3d").name
    '__smv_replace_sales_0a1b2c3d'
    """
    return ObjectName(name.namespace, f"{REPLACEMENT_PREFIX}{name.name[:_REPLACEMENT_NAME_CHARS]}_{token}")


def is_replacement_of(candidate: ObjectName, name: ObjectName) -> bool:
    """True when ``candidate`` is a name :func:`replacement_name` gives for ``name``.

    >>> sales = ObjectName("default", "sales")
    >>> is_replacement_of(ObjectName("default", "__smv_replace_sales_0a1b2c3d"), sales)
    True
    >>> is_replacement_of(ObjectName("default", "__smv_replace_sales_x_0a1b2c3d"), sales)
    False
    """
    head = f"{REPLACEMENT_PREFIX}{name.name[:_REPLACEMENT_NAME_CHARS]}_"
    token = candidate.name[len(head) :]
    return (
        candidate.namespace == name.namespace
        and candidate.name.startswith(head)
        and len(token) == 8
        and all(ch in "0123456789abcdef" for ch in token)
    )
