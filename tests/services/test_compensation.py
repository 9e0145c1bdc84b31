"""Which partitions of a stale MV a rewrite computes from the base (no Spark): the PCT
planner's choice over the version map, mapped back to base partitions through the lineage."""

from __future__ import annotations

import dataclasses

from sparkmv.analysis.lineage import Lineage, PartitionMapping, Transform
from sparkmv.analysis.rewrite import BaseFilter
from sparkmv.names import ObjectName
from sparkmv.refresh.planner import PlanInput
from sparkmv.refresh.properties import MvProperties
from sparkmv.services.compensation import stale_partitions
from tests.refresh.test_planner import DIM, FACT, table, versions

QUERY = "SELECT trunc(d, 'MM') AS m, sum(v) AS s FROM fact GROUP BY 1"
DAY_SCHEMA = '{"type": "struct", "fields": [{"name": "d", "type": "date", "nullable": true, "metadata": {}}]}'


def _input(changed: dict[str, str], lineage: Lineage | None = None, dim_changed: bool = False) -> PlanInput:
    days = {"1995-01-05": "v1", "1995-01-20": "v1", "1995-02-03": "v1", "__HIVE_DEFAULT_PARTITION__": "v1"}
    fact = dataclasses.replace(table(FACT, days), schema_json=DAY_SCHEMA)
    dim = table(DIM, {"": "v1"}, column=None)
    vmap = versions(fact, dim)
    now_fact = dataclasses.replace(table(FACT, {**days, **changed}), schema_json=DAY_SCHEMA)
    now_dim = table(DIM, {"": "v2" if dim_changed else "v1"}, column=None)
    month = PartitionMapping(FACT, "d", Transform("trunc_month"))
    return PlanInput(
        partition_by="m",
        lineage=lineage if lineage is not None else Lineage({FACT: month}, complete=True),
        pinned={FACT: now_fact, DIM: now_dim},
        version_map=vmap,
        mv_partitions={"1995-01-01", "1995-02-01", None},
        refreshed_before=True,
        properties=MvProperties(),
        partition_kind="date",
    )


def test_stale_months_and_the_base_days_feeding_them() -> None:
    stale = stale_partitions(_input({"1995-01-20": "v2", "__HIVE_DEFAULT_PARTITION__": "v2"}), QUERY)
    assert not isinstance(stale, str) and stale is not None
    assert (stale.column, stale.kind, stale.values, stale.query) == ("m", "date", (None, "1995-01-01"), QUERY)
    # every day of a stale month is read, not only the changed one; the NULL partition as NULL
    assert stale.base_filters == (
        BaseFilter(ObjectName("default", "fact"), "d", "date", (None, "1995-01-05", "1995-01-20")),
    )


def test_a_new_base_partition_makes_its_month_stale() -> None:
    stale = stale_partitions(_input({"1995-03-01": "v1"}), QUERY)
    assert not isinstance(stale, str) and stale is not None
    assert stale.values == ("1995-03-01",)
    assert stale.base_filters == (BaseFilter(ObjectName("default", "fact"), "d", "date", ("1995-03-01",)),)


def test_nothing_stale_and_what_cannot_be_compensated() -> None:
    assert stale_partitions(_input({}), QUERY) is None
    assert stale_partitions(_input({}, dim_changed=True), QUERY) == "non-reference table default.dim changed"
    unknown = Lineage({}, "partition column 'm' does not derive from a base partition column")
    assert stale_partitions(_input({"1995-01-20": "v2"}, lineage=unknown), QUERY) == (
        "partition column 'm' does not derive from a base partition column"
    )
    incomplete = Lineage({FACT: PartitionMapping(FACT, "d", Transform("trunc_month"))}, complete=False)
    outer = "SELECT trunc(d, 'MM') AS m, count(*) AS n FROM dim LEFT JOIN fact ON dim.k = fact.k GROUP BY 1"
    assert stale_partitions(_input({"1995-01-20": "v2"}, lineage=incomplete), outer) == (
        "its query has an outer join: a base change may reach partitions the lineage does not map"
    )
    no_partition = dataclasses.replace(_input({"1995-01-20": "v2"}), partition_by=None)
    assert stale_partitions(no_partition, QUERY) == "unpartitioned MV"


def test_incomplete_lineage_reads_the_base_whole() -> None:
    month = PartitionMapping(FACT, "d", Transform("trunc_month"))
    stale = stale_partitions(_input({"1995-02-03": "v2"}, lineage=Lineage({FACT: month}, complete=False)), QUERY)
    assert not isinstance(stale, str) and stale is not None
    assert stale.values == ("1995-02-01",) and stale.base_filters == ()
