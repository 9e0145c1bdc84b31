"""Base tables written as an outside writer would: pyiceberg tables in an external SQLite
Iceberg catalog ``lake`` (namespace ``db``) that sparkmv reads, and DuckDB's result of a
query over what pyiceberg reads now (the oracle)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa


class Lake:
    """The tables of ``schemas`` (name -> Arrow schema) under ``tmp_path``, registered in
    ``client`` as the external catalog ``lake``; ``query`` (``{p}`` before each table name)
    is what :meth:`oracle` computes."""

    def __init__(self, client: Any, tmp_path: Path, schemas: dict[str, pa.Schema], query: str) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        self.schemas, self.query = schemas, query
        uri, warehouse = f"sqlite:///{tmp_path / 'lake.db'}", tmp_path / "lake"
        warehouse.mkdir()
        self.catalog = SqlCatalog("lake", uri=uri, warehouse=warehouse.as_uri())
        self.catalog.create_namespace("db")
        for name, schema in schemas.items():
            self.catalog.create_table(("db", name), schema=schema)
        client.execute(
            'CREATE EXTERNAL CATALOG lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "sql", '
            f'"uri" = "{uri}", "warehouse" = "{warehouse.as_uri()}")'
        )

    def load(self, table: str) -> Any:
        """The pyiceberg table ``db.<table>``."""
        return self.catalog.load_table(("db", table))

    def append(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Append ``rows`` (tuples in the schema's column order) in one commit."""
        names = self.schemas[table].names
        self.load(table).append(
            pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=self.schemas[table])
        )

    def oracle(self) -> list[tuple[Any, ...]]:
        """The query's rows computed by DuckDB over every table as pyiceberg reads it now,
        sorted."""
        con = duckdb.connect()
        for name in self.schemas:
            arrow = self.load(name).scan().to_arrow()  # noqa: F841 (read by DuckDB by name)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM arrow")
        return sorted((tuple(r) for r in con.execute(self.query.format(p="")).fetchall()), key=repr)
