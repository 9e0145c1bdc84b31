"""SQL analysis with sqlglot: base tables, table binding, partition lineage. No Spark here."""
