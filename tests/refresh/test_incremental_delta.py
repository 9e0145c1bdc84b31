"""The merge of a signed aggregate delta (:mod:`sparkmv.refresh.incremental.delta`) on small
Spark DataFrames: which groups a retraction makes recompute (only those whose retracted
value reaches the merged MIN / MAX), and that the recomputation reads only those groups.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

from sparkmv.analysis.incremental import analyze_incremental
from sparkmv.analysis.query import parse_query
from sparkmv.analysis.signed import RETRACTED
from sparkmv.refresh.incremental.merge_rows import combine, recompute_retracted

pytestmark = [pytest.mark.spark]

QUERY = "SELECT k, count(*) AS n, min(v) AS lo, max(v) AS hi FROM t GROUP BY k"
SCHEMA = "k string, n bigint, lo bigint, hi bigint, __smv_count bigint"
DELTA = f"{SCHEMA}, {RETRACTED} struct<r0: bigint, r1: bigint>"


def _merged(spark: Any) -> Any:
    """MV groups a..e (lo, hi) = (1, 9) each plus one delta row per group: a loses 5 (inside
    the range), b loses its MIN 1, c loses its MAX 9, d loses 9 but gains 12 (its new MAX
    comes from the insert), e loses only a NULL value (retracted extremes NULL)."""
    analysis = analyze_incremental(parse_query(QUERY))
    current = spark.createDataFrame([(k, 3, 1, 9, 3) for k in "abcde"], SCHEMA)
    delta = spark.createDataFrame(
        [
            ("a", -1, None, None, -1, (5, 5)),
            ("b", -1, None, None, -1, (1, 1)),
            ("c", -1, None, None, -1, (9, 9)),
            ("d", 0, 12, 12, 0, (9, 9)),
            ("e", -1, None, None, -1, (None, None)),
        ],
        DELTA,
    )
    target = current.schema
    return combine(current.unionByName(delta, allowMissingColumns=True), analysis, target), analysis


def test_only_groups_whose_retracted_value_reaches_the_extreme_are_flagged(spark: Any) -> None:
    merged, _ = _merged(spark)
    flags = {r["k"]: r[RETRACTED] for r in merged.collect()}
    assert flags == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 0}


def test_recompute_reads_only_the_flagged_groups(spark: Any) -> None:
    merged, analysis = _merged(spark)
    # A group other than b and c read from the fresh input fails the job: the filter on the
    # flagged keys must be applied before any other row is evaluated.
    fresh = spark.createDataFrame([(k, 2, 2, 8, 2) for k in "abcde"], SCHEMA).select(
        "k",
        "n",
        F.when(F.col("k").isin("b", "c"), F.col("lo"))
        .otherwise(F.raise_error(F.lit("read an unflagged group")))
        .alias("lo"),
        "hi",
        "__smv_count",
    )
    rows = {r["k"]: (r["n"], r["lo"], r["hi"]) for r in recompute_retracted(merged, fresh, analysis).collect()}
    assert rows == {"a": (2, 1, 9), "b": (2, 2, 8), "c": (2, 2, 8), "d": (3, 1, 12), "e": (2, 1, 9)}


def test_nothing_flagged_does_not_read_the_fresh_input(spark: Any) -> None:
    merged, analysis = _merged(spark)
    unflagged = merged.where(F.col("k").isin("a", "d", "e"))
    fresh = spark.range(1).select(F.raise_error(F.lit("the fresh input was read")).alias("k"))
    rows = sorted((r["k"], r["hi"]) for r in recompute_retracted(unflagged, fresh, analysis).collect())
    assert rows == [("a", 9), ("d", 12), ("e", 9)]


def test_key_filter_by_semi_join_on_a_stage_key_column(spark: Any) -> None:
    """More keys than are inlined as literals make a semi-join; a key column named like an
    inner stage's (``__smv_k0``, TPC-H Q17's decorrelated stage) must not make it ambiguous."""
    from sparkmv.refresh.incremental.merge_rows import KEYS_INLINE, key_filter

    n = KEYS_INLINE + 100
    frame = spark.createDataFrame([(i, i * 10) for i in range(2 * n)], "__smv_k0 int, v int")
    keys = spark.createDataFrame([(i,) for i in range(0, 2 * n, 2)] + [(None,)], "__smv_k0 int")
    restrict = key_filter(keys, ["__smv_k0"], frame)
    assert restrict is not None
    kept = sorted(r[0] for r in restrict(frame, True).collect())
    dropped = sorted(r[0] for r in restrict(frame, False).collect())
    assert kept == list(range(0, 2 * n, 2)) and dropped == list(range(1, 2 * n, 2))


def test_key_filter_semi_join_reads_only_the_keys_range(spark: Any, tmp_path: Any) -> None:
    """Behind the semi-join, the keys' range is a filter Spark pushes into the Parquet scan
    (new keys above the old ones: the old file is skipped by its statistics); a NULL key
    still keeps the rows whose key is NULL."""
    from sparkmv.refresh.incremental.merge_rows import KEYS_INLINE, key_filter

    n = KEYS_INLINE + 50
    old = spark.createDataFrame([(i, i) for i in range(n)] + [(None, -1)], "k long, v long")
    new = spark.createDataFrame([(i, i) for i in range(10 * n, 12 * n)], "k long, v long")
    old.coalesce(1).write.parquet(str(tmp_path / "t"))
    new.coalesce(1).write.mode("append").parquet(str(tmp_path / "t"))
    frame = spark.read.parquet(str(tmp_path / "t"))
    keys = spark.createDataFrame([(i,) for i in range(10 * n, 11 * n)] + [(None,)], "k long")
    restrict = key_filter(keys, ["k"], frame)
    assert restrict is not None
    kept = restrict(frame, True)
    assert sorted((r[0] is None, r[0] or 0) for r in kept.collect()) == [
        *((False, i) for i in range(10 * n, 11 * n)),
        (True, 0),
    ]
    plan = kept._jdf.queryExecution().executedPlan().toString()
    assert f"GreaterThanOrEqual(k,{10 * n})" in plan and f"LessThanOrEqual(k,{11 * n - 1})" in plan, plan
    assert restrict(frame, False).count() == n + n  # the old keys and the new ones not among the keys
