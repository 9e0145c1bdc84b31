"""Scheduler: periodic and on-change triggers, ASYNC requests, DAG order, recovery."""
