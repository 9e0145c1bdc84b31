from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()
SCHEMA = "customer_id BIGINT, name STRING, city STRING"

# one streaming table per coast, defined in a loop over a fixed (additive) list
for coast in ("west", "east"):

    @dp.table(name=f"customers_us_{coast}", comment=f"customers of the {coast} coast")
    def coast_customers(folder: str = f"data/{coast}") -> DataFrame:
        return spark.readStream.format("json").schema(SCHEMA).load(folder)
