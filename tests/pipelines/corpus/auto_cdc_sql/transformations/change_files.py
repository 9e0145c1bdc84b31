from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.table
def change_files() -> DataFrame:
    schema = "product_id BIGINT, category STRING, price DOUBLE, op STRING, seq BIGINT"
    return spark.readStream.format("parquet").schema(schema).load("data/changes")
