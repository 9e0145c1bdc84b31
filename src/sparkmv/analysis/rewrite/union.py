r"""Partition compensation (union rewrite): reading an MV whose partitions are partly stale.

When some partitions of a partitioned MV are stale (their base data changed since they
were refreshed), query rewrite may still use the MV under ``query_rewrite_consistency =
CHECKED``: the MV is replaced by

.. code-block:: sql

    (SELECT <MV columns> FROM <mv> WHERE <partition column> is none of the stale values
     UNION ALL
     SELECT CAST(<column> AS <type>) ... FROM (<the MV's stored query, its reference tables
       restricted to the base partitions behind the stale values>) AS __smv_q
     WHERE <partition column> is one of the stale values) AS <alias of the MV>

and the query's own compensation and rollup apply on top of it. The stored query is the
defining query, augmented with the hidden state columns when the MV's table has them
(:func:`sparkmv.analysis.incremental.stored_query`), so both branches have the MV table's
columns. Which partitions are stale and which base partitions feed them is decided by the
caller (:mod:`sparkmv.services.compensation`, through the refresh planner); this module only
renders it, with typed literals (:func:`sparkmv.analysis.query.partition_literal`).

>>> from sparkmv.analysis.rewrite.shape import MvCandidate
>>> from sparkmv.names import ObjectName
>>> stale = StalePartitions("m", "string", ("1995-02", None), "SELECT m, sum(q) AS s FROM li GROUP BY m",
...     (BaseFilter(ObjectName("default", "li"), "m", "string", ("1995-02",)),))
>>> mv = MvCandidate(ObjectName("default", "by_m"), "", (("m", "string"), ("s", "bigint")), stale=stale)
>>> sql = union_source(mv, "default__by_m").sql("spark")
>>> for cut in (" UNION ALL ", " FROM (SELECT m", " AS __smv_q "):
...     sql = sql.replace(cut, "\n" + cut.lstrip())
>>> print(sql)
(SELECT `m`, `s` FROM default.by_m WHERE NOT `m` IS NULL AND NOT `m` IN ('1995-02')
UNION ALL SELECT CAST(`__smv_q`.`m` AS STRING) AS `m`, CAST(`__smv_q`.`s` AS BIGINT) AS `s`
FROM (SELECT m, SUM(q) AS s FROM (SELECT * FROM li WHERE m IN ('1995-02')) AS li GROUP BY m)
AS __smv_q WHERE `__smv_q`.`m` IN ('1995-02') OR `__smv_q`.`m` IS NULL) AS default__by_m
>>> stale.describe()
'2 stale partitions and consistency CHECKED: compensated from base'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from sparkmv.analysis.incremental import stored_query
from sparkmv.analysis.query import DIALECT, partition_predicate, restrict_tables
from sparkmv.analysis.rewrite.stale import BaseFilter, StalePartitions

if TYPE_CHECKING:
    from sparkmv.analysis.rewrite.shape import MvCandidate

__all__ = ["BaseFilter", "StalePartitions", "union_source"]  # the first two re-exported from .stale
_INNER = "__smv_q"


def union_source(candidate: MvCandidate, alias: str) -> exp.Subquery:
    """The source replacing ``candidate``'s MV table in a rewrite (module docstring):
    its fresh partitions UNION ALL its stale ones computed from the base, aliased ``alias``.

    Raises:
        PartitionValueError: when a stale value is not of the partition column's kind.
    """
    stale = candidate.stale
    assert stale is not None
    names = [name for name, _ in candidate.columns]
    column = exp.column(stale.column, quoted=True)
    fresh = (
        exp.select(*[exp.column(n, quoted=True) for n in names])
        .from_(exp.to_table(candidate.name.qualified))
        .where(partition_predicate(column, stale.values, stale.kind, exclude=True))
    )
    conditions = {f.table: f.condition() for f in stale.base_filters}
    query = restrict_tables(stored_query(stale.query, names), conditions)
    items = [
        exp.cast(exp.column(n, _INNER, quoted=True), exp.DataType.build(kind, dialect=DIALECT)).as_(n, quoted=True)
        for n, kind in candidate.columns
    ]
    inner = exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(_INNER)))
    own = exp.column(stale.column, _INNER, quoted=True)
    base = exp.select(*items).from_(inner).where(partition_predicate(own, stale.values, stale.kind))
    union = exp.union(fresh, base, distinct=False)
    return exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier(alias)))
