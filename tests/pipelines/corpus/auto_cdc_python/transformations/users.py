from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
CHANGES = "user_id BIGINT, name STRING, city STRING, op STRING, seq BIGINT"


@dp.table
def user_changes() -> DataFrame:
    return spark.readStream.format("json").schema(CHANGES).load("data/changes")


dp.create_streaming_table("users")

dp.create_auto_cdc_flow(
    target="users",
    source="user_changes",
    keys=["user_id"],
    sequence_by="seq",
    apply_as_deletes="op = 'DELETE'",
    except_column_list=["op", "seq"],
    stored_as_scd_type=1,
)


@dp.materialized_view
def users_per_city() -> DataFrame:
    return spark.table("users").groupBy("city").count()
