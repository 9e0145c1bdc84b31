from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col

spark = SparkSession.active()
SCHEMA = "trip_id BIGINT, city STRING, year INT, month INT, fare DOUBLE"


@dp.temporary_view
def trips_raw() -> DataFrame:
    return spark.read.format("json").schema(SCHEMA).load("data/trips")


@dp.materialized_view(partition_cols=["year", "month"], table_properties={"quality": "silver"})
def trips_by_month() -> DataFrame:
    return spark.table("trips_raw").where(col("fare").isNotNull())


@dp.materialized_view(comment="fares per city and year")
def fares_per_city() -> DataFrame:
    return spark.table("trips_by_month").groupBy("city", "year").agg({"fare": "sum", "trip_id": "count"})


# every trip also goes to an outside Parquet folder
dp.create_sink("trips_export", format="parquet", options={"path": "out/trips_export"})


@dp.append_flow(target="trips_export")
def export_trips() -> DataFrame:
    return spark.readStream.format("json").schema(SCHEMA).load("data/trips").select("trip_id", "city", "fare")
