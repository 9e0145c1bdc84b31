"""Refresh: the planner (what to refresh, which mode, chunks) and the executor (phases,
progress, resume, publish, cancel)."""
