"""sparkmv: materialized views and refreshable tables that stay fresh on Apache Spark."""

from importlib import metadata as _metadata

from sparkmv.errors import SparkMvError

__all__ = ["Client", "SparkMvError", "__version__"]
try:  # the installed distribution's version (pyproject.toml), one source of truth
    __version__ = _metadata.version("sparkmv")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"


def __getattr__(name: str) -> object:
    # Lazy, so that importing sparkmv (e.g. for the CLI's --help) does not import PySpark.
    if name == "Client":
        from sparkmv.client.client import Client

        return Client
    raise AttributeError(name)
