from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.table(comment="reading files as they arrive")
def reading_files() -> DataFrame:
    schema = "sensor STRING, site STRING, reading DOUBLE, ts BIGINT"
    return spark.readStream.format("parquet").schema(schema).load("data/readings")
