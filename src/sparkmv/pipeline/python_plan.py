"""A Python materialized view's DataFrame as a Spark SQL query over sparkmv's tables.

A query function returns a DataFrame, not SQL; to refresh it by PCT or INCREMENTAL as a SQL
MV is refreshed, its **analyzed logical plan** (Catalyst's resolved plan, read through py4j:
``df._jdf.queryExecution().analyzed()``) is translated, operator by operator, into one Spark
SQL query over the tables it reads by their sparkmv names. Each operator becomes a
``SELECT`` over its children as derived tables; every attribute is renamed after its
expression id, to its own name where that is unique in the plan and ``<name>_<n>`` else
(in the order the plan first shows them, so the same function gives the same text on every
run), and the outermost ``SELECT`` names the DataFrame's own columns. Expressions are
printed by Catalyst itself (``Expression.sql()``) after their attributes were renamed
(``withName``, no qualifier), so functions, casts and literals keep Spark's exact meaning.

Translated: ``Project``, ``Filter``, ``Join`` (inner, cross, left, right, full, semi, anti),
``Aggregate`` (plain ``GROUP BY``), ``Union`` (``UNION ALL``), ``Distinct``,
``Deduplicate`` of every column, ``Intersect``, ``Except``, ``Window``, ``Sort`` (dropped: an
MV's rows have no order), ``SubqueryAlias``, ``ResolvedHint`` and ``Repartition*`` (no effect on
the rows), a ``View`` of a pipeline temporary view (read through), and a ``View`` that
sparkmv bound to one of its tables (a leaf: that table). Anything else — a LIMIT, sampling,
``Generate`` (explode), grouping sets, a file or Spark table read directly, rows made on the
driver, a subquery expression, a Python or Scala UDF, a non-deterministic expression — is
refused with ``<construct> is not incrementally maintainable: <why>``; the MV is then
recomputed whole, as before.

The translation is then checked by Spark: the query, run over the same temporary views, must
be analyzed to the DataFrame's column names and types, and its optimized plan must give the
same result as the DataFrame's (Catalyst's ``sameResult``: the canonical plans are equal).
A translation that fails either check is not used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlglot
from sqlglot import exp

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
_BARE_ALIAS = re.compile(r"(none#\d+L?) AS #\d+L?")
_TRANSPARENT = {"SubqueryAlias", "ResolvedHint", "Repartition", "RepartitionByExpression", "RebalancePartitions"}
_UDF_CLASSES = ("PythonUDF", "ScalaUDF", "ScalaUDAF", "ScalaAggregator", "PythonUDAF", "HiveGenericUDF")
_JOIN_TYPES = {
    "Inner": "JOIN",
    "Cross": "CROSS JOIN",
    "LeftOuter": "LEFT OUTER JOIN",
    "RightOuter": "RIGHT OUTER JOIN",
    "FullOuter": "FULL OUTER JOIN",
    "LeftSemi": "LEFT SEMI JOIN",
    "LeftAnti": "LEFT ANTI JOIN",
}
_REFUSED = {
    "GlobalLimit": ("LIMIT", "which rows it keeps depends on every row of its input"),
    "LocalLimit": ("LIMIT", "which rows it keeps depends on every row of its input"),
    "Tail": ("tail()", "which rows it keeps depends on every row of its input"),
    "Offset": ("OFFSET", "which rows it skips depends on every row of its input"),
    "Sample": ("sample()", "its rows are drawn at random"),
    "Generate": ("explode / a generator", "sparkmv does not translate generators to SQL"),
    "Expand": ("grouping sets / ROLLUP / CUBE", "sparkmv does not translate grouping sets to SQL"),
    "LocalRelation": ("rows made on the driver (createDataFrame, an RDD)", "they are not a table sparkmv tracks"),
    "LogicalRDD": ("rows made on the driver (createDataFrame, an RDD)", "they are not a table sparkmv tracks"),
    "Range": ("spark.range()", "it is not a table sparkmv tracks"),
    "OneRowRelation": ("a SELECT without FROM", "it is not a table sparkmv tracks"),
}


class NotTranslatable(Exception):
    """The plan holds an operator or expression sparkmv cannot write as exact SQL; the
    message is ``<construct> is not incrementally maintainable: <why>``."""


@dataclass(frozen=True)
class Translation:
    """A DataFrame's plan as SQL: ``query`` over sparkmv's names, or ``reason`` why not.

    Attributes:
        query: the Spark SQL SELECT (tables by their qualified sparkmv names), or None.
        reason: why there is no query (``<construct> is not incrementally maintainable: ...``).
    """

    query: str | None
    reason: str | None = None


def translate(df: DataFrame, tables: Mapping[str, str]) -> Translation:
    """The SQL query equal to ``df``, checked by Spark (module docstring).

    ``tables``: each temporary view sparkmv bound to one of its tables (lower-case view name)
    to that table's qualified name (``"default.sales"``); the views must still be bound.
    The plan's SQL is first simplified by sqlglot (derived tables merged into the queries
    reading them, so sparkmv's analysis sees one join and one aggregate, as a SQL author
    writes them); when the simplified form fails Spark's check, the plain form is tried.
    A plan that cannot be translated exactly is a Translation with ``reason`` set (never an
    exception): the MV is then recomputed whole.
    """
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return Translation(
            None, "a Spark Connect DataFrame is not incrementally maintainable: its plan is not readable"
        )
    columns = list(df.columns)
    if len({c.lower() for c in columns}) != len(columns):
        return Translation(
            None, f"a DataFrame with duplicate column names is not incrementally maintainable: {columns}"
        )
    try:
        writer = _Writer(df.sparkSession, tables)
        raw = writer.query(jdf.queryExecution().analyzed(), columns)
    except NotTranslatable as exc:
        return Translation(None, str(exc))
    problem = None
    for candidate in (_simplified(raw, writer.schemas), _parse(raw)):
        if candidate is None:
            continue
        candidate = _unquoted(candidate)
        problem = check(df, candidate.sql(dialect="spark"))
        if problem is None:
            return Translation(_over_tables(candidate, tables).sql(dialect="spark"))
    return Translation(None, problem)


def _parse(sql: str) -> exp.Expression | None:
    """``sql`` parsed by sqlglot (Spark), None when it cannot be."""
    try:
        return cast(exp.Expression, sqlglot.parse_one(sql, dialect="spark"))
    except sqlglot.errors.SqlglotError:
        return None


def _simplified(sql: str, schemas: Mapping[str, list[str]]) -> exp.Expression | None:
    """``sql`` with its derived tables merged where sqlglot can (``qualify`` with the views'
    columns, then ``merge_subqueries``); None when sqlglot cannot."""
    from sqlglot.optimizer.merge_subqueries import merge_subqueries
    from sqlglot.optimizer.qualify import qualify

    tree = _parse(sql)
    if tree is None:
        return None
    schema: dict[str, object] = {view: dict.fromkeys(cols, "string") for view, cols in schemas.items()}
    try:
        return merge_subqueries(qualify(tree, schema=schema, dialect="spark", quote_identifiers=True))
    except Exception:  # best effort: the plain form is tried next
        return None


def _unquoted(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the backticks dropped from identifiers that need none (lower-case
    letters, digits, underscores; not a keyword), as a SQL author writes them."""
    from sqlglot.dialects.spark import Spark

    keywords = Spark.Tokenizer.KEYWORDS

    def plain(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Identifier) and node.quoted:
            name = node.this
            if _PLAIN.match(name) and name.upper() not in keywords:
                return exp.Identifier(this=name, quoted=False)
        return node

    return tree.transform(plain)


def _over_tables(tree: exp.Expression, tables: Mapping[str, str]) -> exp.Expression:
    """``tree`` with each bound view read as its sparkmv table (alias kept)."""

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name.lower() in tables:
            namespace, _, name = tables[node.name.lower()].rpartition(".")
            catalog, _, db = namespace.rpartition(".")
            table = exp.table_(name, db=db, catalog=catalog or None)
            alias = node.args.get("alias")
            if alias is not None:
                table.set("alias", alias)
            return table
        return node

    return tree.copy().transform(swap)


def check(df: DataFrame, sql: str) -> str | None:
    """Why ``sql`` (run on ``df``'s session) is not provably ``df``: other column names or
    types, or an optimized plan whose result may differ; None when it is."""
    spark: SparkSession = df.sparkSession
    try:
        other = spark.sql(sql)
        schema = other.schema
    except Exception as exc:  # a translation Spark refuses is sparkmv's gap, never the user's error
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"the DataFrame's plan is not incrementally maintainable: its SQL form is refused by Spark ({first})"
    mine = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    theirs = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    if mine != theirs:
        return (
            f"the DataFrame's plan is not incrementally maintainable: its SQL form gives columns {theirs}, not {mine}"
        )
    if not same_result(df._jdf.queryExecution().optimizedPlan(), other._jdf.queryExecution().optimizedPlan()):
        return "the DataFrame's plan is not incrementally maintainable: its SQL form is not provably the same query"
    return None


def same_result(a: Any, b: Any) -> bool:
    """Whether optimized plans ``a`` and ``b`` (JVM objects) give the same rows: Catalyst's
    ``sameResult`` (equal canonical plans), or equal canonical plans once every alias of a
    bare column is removed (renaming a column changes no value; the SQL form renames the
    columns it must keep apart) over pairwise equal leaves (the same relations, in order)."""
    if a.sameResult(b):
        return True
    ca, cb = a.canonicalized(), b.canonicalized()
    if _BARE_ALIAS.sub(r"\1", str(ca.treeString())) != _BARE_ALIAS.sub(r"\1", str(cb.treeString())):
        return False
    la, lb = _seq(ca.collectLeaves()), _seq(cb.collectLeaves())
    return len(la) == len(lb) and all(x.equals(y) for x, y in zip(la, lb, strict=True))


class _Writer:
    """Writes one analyzed plan as SQL (attribute names fixed on the first call)."""

    def __init__(self, spark: SparkSession, tables: Mapping[str, str]) -> None:
        self._jvm: Any = spark.sparkContext._jvm
        self._tables = tables
        self._names: dict[int, str] = {}
        self._used: set[str] = set()
        self._alias = 0
        self._set_ops: set[str] = set()
        self.schemas: dict[str, list[str]] = {}
        """The columns of each bound view the plan reads."""

    def query(self, plan: Any, columns: list[str]) -> str:
        """The SQL of ``plan`` whose output columns are named ``columns`` (the bound views
        read by their own names)."""
        out = _seq(plan.output())
        if len(out) != len(columns):  # pragma: no cover - the plan's output is the DataFrame's
            raise NotTranslatable("the DataFrame's plan is not incrementally maintainable: its columns differ")
        for attr, column in zip(out, columns, strict=True):  # the output keeps the DataFrame's names
            self._names.setdefault(int(attr.exprId().id()), column)
            self._used.add(column.lower())
        inner = self._plan(plan)
        if [self._names[int(a.exprId().id())] for a in out] == columns:
            return inner
        select = ", ".join(f"{self._name(a)} AS {_quote(c)}" for a, c in zip(out, columns, strict=True))
        return f"SELECT {select} FROM ({inner}) AS {self._next()}"

    def _next(self) -> str:
        self._alias += 1
        return f"q{self._alias}"

    def _name(self, attr: Any) -> str:
        """The SQL name of an attribute (by expression id)."""
        key = int(attr.exprId().id())
        if key not in self._names:
            base = str(attr.name()).lower()
            name, n = base, 1
            while name.lower() in self._used:
                n += 1
                name = f"{base}_{n}"
            self._used.add(name.lower())
            self._names[key] = name
        return _quote(self._names[key])

    def _cols(self, plan: Any) -> str:
        return ", ".join(self._name(a) for a in _distinct(_seq(plan.output())))

    def _from(self, child: Any) -> str:
        return f"({self._plan(child)}) AS {self._next()}"

    def _plan(self, node: Any) -> str:
        kind = str(node.nodeName())
        handler = getattr(self, f"_op_{kind}", None)
        if kind in _TRANSPARENT or kind == "Sort":
            return self._plan(node.child())
        if handler is not None:
            return str(handler(node))
        if kind in _REFUSED:
            construct, why = _REFUSED[kind]
            raise NotTranslatable(f"{construct} is not incrementally maintainable: {why}")
        raise NotTranslatable(
            f"{kind} is not incrementally maintainable: sparkmv does not translate this operator of the "
            "DataFrame's plan to SQL"
        )

    def _op_View(self, node: Any) -> str:
        view = str(node.desc().identifier().table()).lower()
        if view not in self._tables:
            return self._plan(node.child())  # a pipeline temporary view: read through
        output = _seq(node.output())
        self.schemas[view] = [str(a.name()) for a in output]
        cols = ", ".join(f"{_quote(str(a.name()))} AS {self._name(a)}" for a in output)
        return f"SELECT {cols} FROM {_quote(view)}"

    def _op_LogicalRelation(self, node: Any) -> str:
        raise NotTranslatable(
            "a file read (spark.read...) is not incrementally maintainable: it is not a sparkmv table "
            "(register it with CREATE EXTERNAL TABLE and read it by name)"
        )

    def _op_Project(self, node: Any) -> str:
        source = self._from(node.child())
        # a column selected twice is one column of the SQL (the plan reads it by expression id;
        # a UNION branch that needs both fails Spark's check of the translation)
        exprs = ", ".join(self._named(e) for e in _distinct(_seq(node.projectList())))
        return f"SELECT {exprs} FROM {source}"

    def _op_Filter(self, node: Any) -> str:
        source = self._from(node.child())
        return f"SELECT {self._cols(node)} FROM {source} WHERE {self._expr(node.condition())}"

    def _op_Join(self, node: Any) -> str:
        how = _JOIN_TYPES.get(str(node.joinType().toString()))
        if how is None:
            raise NotTranslatable(
                f"a {node.joinType().toString()} join is not incrementally maintainable: sparkmv does not translate it"
            )
        left, right = self._from(node.left()), self._from(node.right())
        cond = node.condition()
        on = f" ON {self._expr(cond.get())}" if cond.isDefined() else ""
        if how == "JOIN" and not on:
            how = "CROSS JOIN"
        return f"SELECT {self._cols(node)} FROM {left} {how} {right}{on}"

    def _op_Aggregate(self, node: Any) -> str:
        source = self._from(node.child())
        exprs = ", ".join(self._named(e) for e in _seq(node.aggregateExpressions()))
        groups = [self._expr(e) for e in _seq(node.groupingExpressions())]
        group_by = f" GROUP BY {', '.join(groups)}" if groups else ""
        return f"SELECT {exprs} FROM {source}{group_by}"

    def _op_Window(self, node: Any) -> str:
        child = node.child()
        source = self._from(child)
        exprs = [self._name(a) for a in _seq(child.output())]
        exprs += [self._named(e) for e in _seq(node.windowExpressions())]
        return f"SELECT {', '.join(exprs)} FROM {source}"

    def _op_Distinct(self, node: Any) -> str:
        source = self._from(node.child())
        return f"SELECT DISTINCT {self._cols(node)} FROM {source}"

    def _op_Deduplicate(self, node: Any) -> str:
        keys = {int(a.exprId().id()) for a in _seq(node.keys())}
        if keys != {int(a.exprId().id()) for a in _seq(node.child().output())}:
            raise NotTranslatable(
                "dropDuplicates on some columns is not incrementally maintainable: which row of each group "
                "it keeps is arbitrary"
            )
        return self._op_Distinct(node)

    def _op_Union(self, node: Any) -> str:
        if node.byName() or node.allowMissingCol():  # pragma: no cover - resolved by the analyzer
            raise NotTranslatable("an unresolved union is not incrementally maintainable: its columns are not known")
        # the branches are the query (its columns are named by the first one, as the plan's
        # are): a UNION ALL is read as its branches, with no SELECT around it
        return self._set_query(" UNION ALL ".join(self._branch(c) for c in _seq(node.children())))

    def _branch(self, node: Any) -> str:
        """A set operation's operand: the child's SELECT (in a derived table when it is a
        set operation itself, whose precedence could differ)."""
        text = self._plan(node)
        return f"SELECT * FROM ({text}) AS {self._next()}" if text in self._set_ops else text

    def _set_query(self, text: str) -> str:
        self._set_ops.add(text)
        return text

    def _set_op(self, node: Any, word: str) -> str:
        all_ = " ALL" if node.isAll() else " DISTINCT"
        return self._set_query(f"{self._branch(node.left())} {word}{all_} {self._branch(node.right())}")

    def _op_Intersect(self, node: Any) -> str:
        return self._set_op(node, "INTERSECT")

    def _op_Except(self, node: Any) -> str:
        return self._set_op(node, "EXCEPT")

    def _named(self, expr: Any) -> str:
        """A select-list entry: an attribute, or an alias written ``<sql> AS <name>``."""
        kind = str(expr.nodeName())
        if kind == "AttributeReference":
            return self._name(expr)
        if kind != "Alias":  # pragma: no cover - the analyzer names every output expression
            raise NotTranslatable(f"{kind} is not incrementally maintainable: an unnamed output expression")
        return f"{self._expr(expr.child())} AS {self._name(expr.toAttribute())}"

    def _expr(self, expr: Any) -> str:
        return str(self._rename(expr).sql())

    def _rename(self, expr: Any) -> Any:
        """``expr`` with every attribute renamed to its SQL name (no qualifier).

        Raises:
            NotTranslatable: a UDF, a subquery, an outer reference or a non-deterministic
                expression.
        """
        kind = str(expr.nodeName())
        cls = str(expr.getClass().getSimpleName())
        if cls in _UDF_CLASSES or kind in _UDF_CLASSES:
            raise NotTranslatable(
                f"a user-defined function ({_udf_name(expr)}) is not incrementally maintainable: "
                "sparkmv cannot write it as SQL"
            )
        if self._jvm.org.apache.spark.sql.catalyst.expressions.SubqueryExpression.hasSubquery(expr):
            raise NotTranslatable(
                "a subquery expression is not incrementally maintainable: sparkmv does not translate it from a "
                "DataFrame's plan"
            )
        if not expr.deterministic():
            raise NotTranslatable(f"{expr.prettyName()} is not incrementally maintainable: it is not deterministic")
        if kind == "AttributeReference":
            key = int(expr.exprId().id())
            if key not in self._names:
                raise NotTranslatable(
                    f"column {expr.name()} is not incrementally maintainable: it is not an output of the plan below"
                )
            return expr.withName(self._names[key]).withQualifier(_to_seq(self._jvm, []))
        if kind == "OuterReference":
            raise NotTranslatable("an outer reference is not incrementally maintainable: it is a correlated subquery")
        kids = _seq(expr.children())
        if not kids:
            return expr
        renamed = [self._rename(k) for k in kids]
        return expr.withNewChildren(_to_seq(self._jvm, renamed))


def _udf_name(expr: Any) -> str:
    """The name a UDF was given (``PythonUDF.name``), else Catalyst's pretty name."""
    try:
        return str(expr.name())
    except Exception:  # py4j: this UDF class has no name()
        return str(expr.prettyName())


def _distinct(exprs: list[Any]) -> list[Any]:
    """``exprs`` without a repeated attribute (by expression id; other expressions kept)."""
    seen: set[int] = set()
    out = []
    for e in exprs:
        if str(e.nodeName()) == "AttributeReference":
            key = int(e.exprId().id())
            if key in seen:
                continue
            seen.add(key)
        out.append(e)
    return out


def _seq(scala_seq: Any) -> list[Any]:
    """A Scala collection's elements."""
    it = scala_seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def _to_seq(jvm: Any, items: list[Any]) -> Any:
    """A Scala ``Seq`` of ``items``."""
    array = jvm.java.util.ArrayList()
    for item in items:
        array.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(array).toSeq()


def _quote(name: str) -> str:
    """``name`` as a Spark SQL identifier (always in backticks: a column may be named as a keyword)."""
    return "`" + name.replace("`", "``") + "`"
