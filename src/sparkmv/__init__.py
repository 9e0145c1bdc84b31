"""sparkmv: materialized views and refreshable tables that stay fresh on Apache Spark."""

from sparkmv.errors import SparkMvError

__all__ = ["Client", "SparkMvError", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Lazy, so that importing sparkmv (e.g. for the CLI's --help) does not import PySpark.
    if name == "Client":
        from sparkmv.client.client import Client

        return Client
    raise AttributeError(name)
