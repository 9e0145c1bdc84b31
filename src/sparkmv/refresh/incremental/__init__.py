"""Incremental refresh (IVM): choosing the technique of a run (:mod:`.decide`, with the
cost model of :mod:`.candidates`) and computing an MV's delta and its merge with Spark
(:mod:`.delta`). The job kind that runs it is :mod:`sparkmv.refresh.jobs.incremental`."""
