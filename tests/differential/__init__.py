"""Differential tests of materialized views against DuckDB (issue 10); see test_differential.py."""
