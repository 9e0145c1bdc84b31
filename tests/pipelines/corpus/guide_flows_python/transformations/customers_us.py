from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import lit

spark = SparkSession.active()

dp.create_streaming_table("customers_us")


@dp.append_flow(target="customers_us")
def append_customers_us_west() -> DataFrame:
    return spark.readStream.table("customers_us_west").withColumn("coast", lit("west"))


@dp.append_flow(target="customers_us")
def append_customers_us_east() -> DataFrame:
    return spark.readStream.table("customers_us_east").withColumn("coast", lit("east"))


@dp.materialized_view
def customers_per_coast() -> DataFrame:
    return spark.table("customers_us").groupBy("coast").count()
