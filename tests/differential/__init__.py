"""Differential tests of materialized views against DuckDB; see test_differential.py."""
