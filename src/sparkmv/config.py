"""Settings resolved once per process from arguments and environment.

Resolution order for each setting: explicit argument, environment variable, default.
The result is an immutable :class:`Settings` passed down explicitly; nothing reads the
environment deep inside the layers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Where sparkmv keeps its state and how it reaches Spark.

    Attributes:
        home: directory holding ``catalog.db`` (SQLite default) and ``warehouse/``.
        catalog_url: SQLAlchemy URL of the metadata catalog (SQLite file or
            ``postgresql+psycopg://...``); the pyiceberg catalog tables live in the same
            database.
        warehouse: directory of Iceberg table data and metadata.
        spark_master: Spark master URL (``local[*]`` by default).
        spark_conf: extra Spark configuration, ``key -> value``.
    """

    home: Path
    catalog_url: str
    warehouse: Path
    spark_master: str = "local[*]"
    spark_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        home: str | os.PathLike[str] | None = None,
        catalog_url: str | None = None,
        master: str | None = None,
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> Settings:
        """Build settings from arguments, then ``SPARKMV_HOME``, ``SPARKMV_CATALOG_URL``,
        ``SPARKMV_SPARK_MASTER``, then defaults (``./.sparkmv``, SQLite, ``local[*]``)."""
        environ = os.environ if env is None else env
        home_path = Path(home or environ.get("SPARKMV_HOME") or ".sparkmv").absolute()
        url = catalog_url or environ.get("SPARKMV_CATALOG_URL") or f"sqlite:///{home_path}/catalog.db"
        spark_master = master or environ.get("SPARKMV_SPARK_MASTER") or "local[*]"
        return cls(
            home=home_path,
            catalog_url=url,
            warehouse=home_path / "warehouse",
            spark_master=spark_master,
            spark_conf=dict(conf or {}),
        )

    @property
    def is_sqlite(self) -> bool:
        """True when the catalog is a SQLite database."""
        return self.catalog_url.startswith("sqlite")
