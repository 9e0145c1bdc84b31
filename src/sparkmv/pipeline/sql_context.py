"""The state a SQL definition file carries from one statement to the next, as Spark's SDP
keeps it (``SqlGraphRegistrationContext``): ``SET`` confs and the current schema, plus
``${key}`` variables substituted into each statement before it is parsed.

>>> ctx = FileContext("default", "default")
>>> ctx.apply("SET spark.sql.shuffle.partitions = 4")
True
>>> ctx.apply("USE SCHEMA sales")
True
>>> ctx.conf, ctx.namespace
({'spark.sql.shuffle.partitions': '4'}, 'sales')
>>> ctx.apply("CREATE MATERIALIZED VIEW x AS SELECT 1")
False
>>> substitute("SELECT ${n} AS a, '${spark:n}' AS b, '${nope}' AS c", {"n": "7"})
"SELECT 7 AS a, '7' AS b, '' AS c"
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparkmv.errors import SparkMvError
from sparkmv.names import is_identifier
from sparkmv.sql.cursor import tokenize

SPARK_CATALOGS = ("spark_catalog",)
"""The catalogs ``SET CATALOG`` / ``USE NAMESPACE c.s`` may name: sparkmv keeps a pipeline's
datasets in its own catalog, which stands for Spark's session catalog."""

_SET = re.compile(r"SET\s+(`[^`]+`|[^\s=]+)\s*(?:=\s*(.*))?\Z", re.IGNORECASE | re.DOTALL)
_USE = re.compile(r"USE\s+(SCHEMA|DATABASE|NAMESPACE)\s+(.+?)\s*\Z", re.IGNORECASE | re.DOTALL)
_SET_CATALOG = re.compile(r"SET\s+CATALOG\s+(.+?)\s*\Z", re.IGNORECASE | re.DOTALL)
_USE_OTHER = re.compile(r"USE\b", re.IGNORECASE)
_VARIABLE = re.compile(r"\$\{(?:(spark|sparkconf|env|hiveconf|hivevar|system):)?([^}]+)\}")


@dataclass
class FileContext:
    """Per file: ``pipeline_namespace`` (the spec's database; temporary views always live
    there), ``namespace`` (the current schema: ``USE SCHEMA``), ``conf`` (``SET``s so far)."""

    pipeline_namespace: str
    namespace: str
    conf: dict[str, str] = field(default_factory=dict)

    def apply(self, sql: str) -> bool:
        """Apply ``sql`` when it is a ``SET`` / ``USE`` statement (True), else False.

        ``SET k = v`` (the value as written, trimmed, as Spark's parser keeps it) sets ``k``
        for the datasets after it in this file; ``USE SCHEMA|DATABASE|NAMESPACE [c.]s``
        names those datasets (and the tables their queries read without a schema) in ``s``;
        ``SET CATALOG c`` goes back to the pipeline's schema (Spark clears the schema there).

        Raises:
            SparkMvError: ``SET`` without a value (SDP: "Invalid SET command without value")
                or without a key, ``USE <name>`` / ``USE CATALOG`` (not SDP statements), a
                catalog other than ``spark_catalog``, a schema name of more than two parts.
        """
        text = _strip_comments(sql)
        if (m := _SET_CATALOG.match(text)) is not None:
            self._catalog(_unquote(m.group(1)))
            self.namespace = self.pipeline_namespace
            return True
        if (m := _SET.match(text)) is not None:
            key, value = _unquote(m.group(1)), m.group(2)
            if value is None or not value.strip():
                raise SparkMvError(f"SET {key}: a SET in a pipeline's SQL file needs a value (SET key = value)")
            self.conf[key] = value.strip()
            return True
        if text.upper().startswith("SET"):
            raise SparkMvError("SET: a SET in a pipeline's SQL file needs a key and a value (SET key = value)")
        if (m := _USE.match(text)) is not None:
            parts = [_unquote(p.strip()) for p in m.group(2).split(".")]
            if len(parts) > 2 or not all(is_identifier(p) for p in parts):
                raise SparkMvError(f"USE {m.group(1).upper()} {m.group(2)}: give a schema name (or catalog.schema)")
            if len(parts) == 2:
                self._catalog(parts[0])
            self.namespace = parts[-1].lower()
            return True
        if _USE_OTHER.match(text):
            raise SparkMvError(
                f"{text.split(chr(10))[0]}: not a statement of a pipeline's SQL file "
                "(use USE SCHEMA name or SET CATALOG name, as Spark's SDP)"
            )
        return False

    @staticmethod
    def _catalog(name: str) -> None:
        if name.lower() not in SPARK_CATALOGS:
            raise SparkMvError(
                f"catalog `{name}` is not supported: sparkmv keeps the pipeline's datasets in its own catalog "
                "(spark_catalog)"
            )


def substitute(sql: str, variables: Mapping[str, str]) -> str:
    """``sql`` with ``${key}`` (also ``${spark:key}``, ``${sparkconf:key}``) replaced by the
    spec's configuration value and ``${env:NAME}`` by the environment's, as Spark's parser
    substitutes variables (``spark.sql.variable.substitute``) from the session's conf, which
    ``spark-pipelines`` builds from the spec's ``configuration``; an unknown variable becomes
    the empty string, as Spark's substitution makes it. A ``SET`` earlier in the file does not count: SDP parses
    the whole file before it applies any ``SET``."""

    def one(m: re.Match[str]) -> str:
        prefix, key = m.group(1), m.group(2)
        if prefix == "env":
            return os.environ.get(key, m.group(0))
        if prefix in (None, "spark", "sparkconf", "hiveconf"):
            return variables.get(key, "")
        return m.group(0)

    return _VARIABLE.sub(one, sql) if "${" in sql else sql


def _strip_comments(sql: str) -> str:
    """``sql`` from its first token (comments before it dropped)."""
    tokens = tokenize(sql)
    return sql[tokens[0].start :].strip() if tokens else ""


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] in "`'\"" else text
