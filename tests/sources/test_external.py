"""External Iceberg catalogs without Spark: the statements, the properties handed to
pyiceberg (REST, Hive, Glue passed through), env-var secrets, and the lineage of
Iceberg partition transforms."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.analysis.lineage import TIME_SUFFIX, Transform
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.transforms import covers, external_lineage
from sparkmv.errors import InvalidNameError, SourceError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.sources import external
from sparkmv.sql.parser import parse_statement
from sparkmv.sql.statements import CreateExternalCatalog, DropCatalog, Show


def test_statements() -> None:
    stmt = parse_statement(
        'CREATE EXTERNAL CATALOG Lake PROPERTIES ("type" = "iceberg", "iceberg.catalog.type" = "rest", '
        '"uri" = "http://rest:8181", "warehouse" = "s3://w", "token" = "env:LAKE_TOKEN")'
    )
    assert stmt == CreateExternalCatalog(
        "lake",
        {
            "type": "iceberg",
            "iceberg.catalog.type": "rest",
            "uri": "http://rest:8181",
            "warehouse": "s3://w",
            "token": "env:LAKE_TOKEN",
        },
    )
    assert parse_statement("DROP CATALOG IF EXISTS lake") == DropCatalog("lake", True)
    assert parse_statement("SHOW CATALOGS") == Show("CATALOGS")
    with pytest.raises(InvalidNameError, match=re.escape("invalid catalog name 'a.b': use letters, digits and _")):
        parse_statement("DROP CATALOG a.b")


def test_three_part_names() -> None:
    name = ObjectName.parse("Lake.DB.Events")
    assert (name.catalog, name.namespace, name.name, name.qualified) == ("lake", "db", "events", "lake.db.events")
    assert ObjectName.parse(name.qualified) == name and name != ObjectName("db", "events")
    with pytest.raises(InvalidNameError):
        ObjectName.parse("a.b.c.d")
    with pytest.raises(InvalidNameError):
        parse_statement("CREATE EXTERNAL TABLE lake.db.t USING parquet LOCATION '/x'")


@pytest.mark.parametrize(
    ("catalog_type", "extra"),
    [
        ("rest", {"uri": "http://rest:8181", "credential": "env:LAKE_CRED", "warehouse": "wh"}),
        ("hive", {"uri": "thrift://hms:9083", "hive.kerberos-authentication": "false"}),
        ("glue", {"glue.region": "eu-west-1", "glue.secret-access-key": "env:LAKE_SECRET", "glue.id": "123"}),
        ("hive", {"uri": "thrift://hms:9083", "iceberg.catalog.name": "prod"}),
        ("sql", {"uri": "env:LAKE_URI", "sparkmv.max-delete-files": "5"}),
    ],
)
def test_properties_are_passed_through(catalog_type: str, extra: dict[str, str], monkeypatch: Any) -> None:
    props = {"type": "iceberg", "iceberg.catalog.type": catalog_type.upper(), **extra}
    assert external.check_properties("lake", props) == catalog_type
    env = {"LAKE_CRED": "id:s3cret", "LAKE_SECRET": "k3y", "LAKE_URI": "postgresql+psycopg://u:pw@h/db"}
    expected = {"type": catalog_type, **({"init_catalog_tables": "false"} if catalog_type == "sql" else {})}
    for key, value in extra.items():
        if not key.startswith(("sparkmv.", "iceberg.catalog.name")):
            expected[key] = env[value[4:]] if value.startswith("env:") else value
    assert external.pyiceberg_properties("lake", props, env) == expected

    # What pyiceberg's load_catalog is given (the catalog itself is not reached here).
    seen: dict[str, Any] = {}

    class Reached(Exception):
        pass

    def fake_load(name: str, **properties: str) -> Any:
        seen.update(name=name, properties=properties)
        raise Reached("stop")

    monkeypatch.setattr(external, "load_catalog", fake_load)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SourceError, match="catalog 'lake' is unreachable: stop"):
        external.open_catalog("lake", props)
    assert seen == {"name": extra.get("iceberg.catalog.name", "lake"), "properties": expected}


def test_secrets_and_bad_properties() -> None:
    base = {"type": "iceberg", "iceberg.catalog.type": "rest"}
    for key in ("password", "s3.secret-access-key", "token", "credential"):
        with pytest.raises(SparkMvError, match=re.escape(f"catalog 'lake': property '{key}' looks like a secret")):
            external.check_properties("lake", {**base, key: "literal"})
    with pytest.raises(SparkMvError, match=re.escape("catalog 'lake': property 'uri' holds a URL with a password")):
        external.check_properties("lake", {**base, "uri": "postgresql://me:pw@db/lake"})
    assert external.check_properties("lake", {**base, "uri": "postgresql://me@db/lake"}) == "rest"
    with pytest.raises(SourceError, match=re.escape("environment variable 'NOPE' of property 'token' is not set")):
        external.pyiceberg_properties("lake", {**base, "token": "env:NOPE"}, {})
    with pytest.raises(SparkMvError, match=re.escape("sparkmv.max-delete-files must be a non-negative integer")):
        external.check_properties("lake", {**base, "sparkmv.max-delete-files": "lots"})
    with pytest.raises(SourceError, match=re.escape("catalog 'x' of table 'x.db.t' does not exist")):
        external.load_table(ObjectName.parse("x.db.t"), None)


def test_transform_coverage() -> None:
    month = Transform("trunc_month", suffix=TIME_SUFFIX)
    assert covers("day", month) and covers("hour", month) and not covers("year", month)
    assert covers("day", Transform("prefix", 10)) and not covers("hour", Transform("identity"))
    assert covers("identity", Transform("identity"))


def test_external_lineage_maps_three_part_names_and_refuses_finer_expressions() -> None:
    schema = {"lake.db.events": {"ts": "timestamp_ntz", "k": "string"}, "default.dim": {"k": "string"}}
    parts = {"lake.db.events": ["ts"], "default.dim": []}
    monthly = parse_query("SELECT date_trunc('month', ts) AS m, count(*) AS n FROM lake.db.events GROUP BY 1")
    got = external_lineage(monthly, "m", schema, parts, {"lake.db.events": ["day"]}, {})
    assert list(got.mappings) == ["lake.db.events"] and got.reason is None
    assert got.mappings["lake.db.events"].transform.apply("2024-01-05 00:00:00") == "2024-01-01 00:00:00"

    hourly = parse_query("SELECT date_trunc('hour', ts) AS h, count(*) AS n FROM lake.db.events GROUP BY 1")
    got = external_lineage(hourly, "h", schema, parts, {"lake.db.events": ["day"]}, {})
    assert got.mappings == {}
    assert got.reason is not None and "base table 'lake.db.events' is partitioned by day(ts)" in got.reason

    reason = "base table 'lake.db.events' is partitioned by bucket[4](ts): not a transform ..."
    got = external_lineage(monthly, "m", schema, parts, {}, {"lake.db.events": reason})
    assert got.mappings == {} and got.reason is not None and reason in got.reason


def test_equality_deletes_are_a_clear_error(tmp_path: Any) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from sparkmv.demo.iceberg_deletes import equality_delete
    from sparkmv.errors import RefreshError
    from sparkmv.sources import external_tables
    from tests.sources.test_external_catalogs import make_events

    (tmp_path / "wh").mkdir()
    cat = SqlCatalog("lake", uri=f"sqlite:///{tmp_path}/lake.db", warehouse=(tmp_path / "wh").as_uri())
    table = make_events(cat)
    name = ObjectName.parse("lake.db.events")
    pinned = external_tables.pin(name, table, {})
    assert pinned.partition_columns == ["ts"] and pinned.partition_transforms == ["day"]
    assert sorted(pinned.partitions) == [
        "ts=2024-01-05 00:00:00",
        "ts=2024-01-20 00:00:00",
        "ts=2024-02-03 00:00:00",
        "ts=2024-03-01 00:00:00",
    ]
    first = next(iter(table.scan().plan_files())).file.partition
    equality_delete(table, "k", 2, pa.array(["b"]), first)
    table = cat.load_table(("db", "events"))
    message = (
        f"base table 'lake.db.events' has equality delete files at snapshot {table.current_snapshot().snapshot_id}, "
        "which sparkmv cannot apply (it applies position deletes only); compact the table (rewrite its data files)"
    )
    with pytest.raises(RefreshError, match=re.escape(message)):
        external_tables.pin(name, table, {})
