from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col

spark = SparkSession.active()
ORDERS = "order_number BIGINT, customer_id BIGINT, order_datetime STRING, amount DOUBLE"


@dp.table
def orders() -> DataFrame:
    return spark.readStream.format("json").schema(ORDERS).load(spark.conf.get("corpus.orders_path"))


@dp.materialized_view
def customers() -> DataFrame:
    return (
        spark.read.format("csv")
        .option("header", True)
        .schema("customer_id BIGINT, state STRING")
        .load(spark.conf.get("corpus.customers_path"))
    )


@dp.materialized_view
def customer_orders() -> DataFrame:
    return (
        spark.table("orders")
        .join(spark.table("customers"), "customer_id")
        .select(
            "customer_id",
            "order_number",
            "state",
            col("order_datetime").cast("date").alias("order_date"),
        )
    )


@dp.materialized_view
def daily_orders_by_state() -> DataFrame:
    return (
        spark.table("customer_orders").groupBy("state", "order_date").count().withColumnRenamed("count", "order_count")
    )
