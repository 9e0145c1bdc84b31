from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


@dp.materialized_view
def numbers_mv() -> DataFrame:
    # The template's spark.range(10), read from files so that runs see changes.
    return spark.read.format("parquet").load("data/numbers")
