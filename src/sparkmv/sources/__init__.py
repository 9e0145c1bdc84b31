"""Change detection and pinned reads per base-table kind (Parquet path, Iceberg, MV)."""
