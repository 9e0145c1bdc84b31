"""Refresh: the planner (what to refresh, which mode, chunks), the one run lifecycle
(:mod:`sparkmv.refresh.lifecycle`) and its job kinds (:mod:`sparkmv.refresh.jobs`)."""
