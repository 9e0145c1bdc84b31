"""The defaults of sparkmv's own Spark sessions (:data:`sparkmv.storage.spark.DEFAULT_CONF`)."""

from __future__ import annotations


def test_sparkmv_sessions_send_no_call_sites_to_the_jvm(spark) -> None:  # type: ignore[no-untyped-def]
    """PySpark's per-call call-site capture (four Py4J round trips per DataFrame or Column
    call) is off in sparkmv's sessions: its own calls are no user's code to point at."""
    from pyspark.errors.utils import is_debugging_enabled
    from pyspark.sql import functions as F

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    spark.range(1).select(F.col("id") + 1).collect()
    assert is_debugging_enabled() is False
