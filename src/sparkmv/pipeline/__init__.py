"""Spark Declarative Pipelines projects run by sparkmv (``sparkmv pipeline run``).

A project is SDP's ``spark-pipeline.yml`` plus the SQL and Python definition files its
``libraries`` globs name (:mod:`.spec`, :mod:`.sql_defs`, :mod:`.python_defs`); the
definitions become a dataset graph (:mod:`.graph`) whose materialized views are ordinary
sparkmv MVs, created and refreshed through the Client in dependency order (:mod:`.run`).
"""
