"""Iceberg table storage: Spark writes Parquet data files, pyiceberg commits them."""
