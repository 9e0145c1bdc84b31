from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
SCHEMA = "customer_id BIGINT, name STRING, city STRING"


@dp.table
def west_files() -> DataFrame:
    return spark.readStream.format("parquet").schema(SCHEMA).load("data/west")


@dp.table
def east_files() -> DataFrame:
    return spark.readStream.format("parquet").schema(SCHEMA).load("data/east")
