"""Partition lineage over tables of external Iceberg catalogs: three-part names and Iceberg
partition transforms.

A table of an external catalog is pinned per partition of its *source* column, each key
the first value the partition covers (``days(ts)``: ``ts=2024-01-05 00:00:00``). The lineage
of :mod:`sparkmv.analysis.lineage` maps that value through the MV partition expression;
the mapping is right only when the MV expression is at least as coarse as the Iceberg
transform (every value of a day falls into the one month of its first instant, not into
one hour), which :func:`covers` decides. A table whose transform the MV expression does
not cover, or that the pin found no reference table (``bucket``, ``truncate``, spec
evolution), is left out of the mappings with the reason.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from sparkmv.analysis.lineage import Lineage, Transform, partition_lineage
from sparkmv.analysis.query import table_name

_EXTERNAL_PREFIX = "__smv_ext_"
_COARSE = {
    "hour": {"trunc_hour", "trunc_week", "trunc_month", "trunc_quarter", "trunc_year"},
    "day": {"trunc_week", "trunc_month", "trunc_quarter", "trunc_year"},
    "month": {"trunc_month", "trunc_quarter", "trunc_year"},
    "year": {"trunc_year"},
}
_PREFIX_MAX = {"hour": 13, "day": 10, "month": 7, "year": 4}
"""The longest prefix of ``yyyy-MM-dd HH:mm:ss`` constant over one partition of a transform."""


def covers(iceberg_transform: str, transform: Transform) -> bool:
    """True when MV partition expression ``transform`` maps every value of one partition of
    ``iceberg_transform`` onto the same MV partition (it is as coarse or coarser).

    >>> covers("day", Transform("trunc_month")), covers("day", Transform("trunc_hour"))
    (True, False)
    >>> covers("month", Transform("prefix", 7)), covers("month", Transform("trunc_week"))
    (True, False)
    >>> covers("identity", Transform("identity")), covers("day", Transform("identity"))
    (True, False)
    """
    if iceberg_transform == "identity":
        return True
    if transform.kind == "prefix":
        return 0 < transform.length <= _PREFIX_MAX.get(iceberg_transform, 0)
    return transform.kind in _COARSE.get(iceberg_transform, set())


def external_lineage(
    query: exp.Query,
    partition_by: str,
    schema: dict[str, dict[str, str]],
    partition_columns: dict[str, list[str]],
    transforms: dict[str, list[str]],
    reasons: dict[str, str],
) -> Lineage:
    """:func:`~sparkmv.analysis.lineage.partition_lineage` with three-part names and
    Iceberg transforms.

    Args:
        transforms: qualified table -> the Iceberg transform of each partition column
            (missing or empty: identity).
        reasons: qualified table -> why it is no reference table (from its pin).

    Returns:
        The lineage; tables a transform or a pin reason rules out are left out of
        ``mappings`` and named in ``reason``.
    """
    flat = {q: _flat(q) for q in {*schema, *partition_columns} if q.count(".") == 2}
    back = {v: k for k, v in flat.items()}
    bound = query.copy()
    for ref in bound.find_all(exp.Table):
        if ref.args.get("catalog") is not None and not isinstance(ref.this, exp.Func):
            qualified = table_name(ref).qualified
            if qualified in flat:
                ref.set("catalog", None)
                ref.set("db", exp.to_identifier(flat[qualified].split(".", 1)[0]))
    lineage = partition_lineage(
        bound,
        partition_by,
        {flat.get(t, t): v for t, v in schema.items()},
        {flat.get(t, t): ([] if t in reasons else v) for t, v in partition_columns.items()},
    )
    mappings = {}
    problems = [reasons[t] for t in sorted(reasons)]
    for key, mapping in lineage.mappings.items():
        table = back.get(key, key)
        names = transforms.get(table) or []
        iceberg = names[0] if names else "identity"
        if not covers(iceberg, mapping.transform):
            problems.append(
                f"base table '{table}' is partitioned by {iceberg}({mapping.base_column}): the MV partition "
                f"expression {mapping.transform.describe(mapping.base_column)} is finer, so it is no reference table"
            )
            continue
        mappings[table] = dataclasses.replace(mapping, base_table=table)
    reason = lineage.reason
    for f, q in back.items():
        reason = reason.replace(f, q) if reason else reason
    if problems:
        reason = "; ".join([*([reason] if reason else []), *problems])
    sources = tuple(sorted((back.get(t, t), c) for t, c in lineage.sources))
    complete = lineage.complete and not problems and bool(mappings)
    return Lineage(mappings, reason, complete=complete, sources=sources)


def _flat(qualified: str) -> str:
    """A two-part stand-in for a three-part name (sqlglot's lineage wants one depth).

    >>> _flat("lake.db.events")
    '__smv_ext_lake__db.events'
    """
    catalog, namespace, name = qualified.split(".")
    return f"{_EXTERNAL_PREFIX}{catalog}__{namespace}.{name}"
