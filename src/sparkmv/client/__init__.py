"""The Python API (:class:`sparkmv.client.client.Client`)."""
