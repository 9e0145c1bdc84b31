from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()


# the guide's orders_source: new order files as they arrive
@dp.table
def orders_source() -> DataFrame:
    schema = "order_number BIGINT, customer_id BIGINT, order_datetime BIGINT, amount DOUBLE"
    return spark.readStream.format("parquet").schema(schema).load("data/orders")
