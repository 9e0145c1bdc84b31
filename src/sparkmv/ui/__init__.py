"""``sparkmv ui``: the web application over the catalog (graph, objects, runs, live progress).

A front end beside the CLI: it reads the catalog through the client and the status service
and never imports pyspark.
"""
