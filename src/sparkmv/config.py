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
        warehouse: where Iceberg table data and metadata go: ``<home>/warehouse`` by
            default, or ``SPARKMV_WAREHOUSE``: a local directory (a ``Path``) or an
            object-store URL such as ``s3://bucket/warehouse`` (text; see the README's
            "Object-store warehouse").
        spark_master: Spark master URL (``local[*]`` by default).
        spark_remote: Spark Connect URL (``sc://host:port``); when set, Spark is reached
            through Connect and ``spark_master`` is not used.
        spark_conf: extra Spark configuration, ``key -> value``.
        jdbc_jars: JDBC driver jars from ``SPARKMV_JDBC_JARS`` (paths separated by
            ``os.pathsep``); None when unset, empty when set to nothing (no driver jar:
            PostgreSQL sources are then read with psycopg).
        fault: fault injection point ``<point>[:<chunk>]`` from ``SPARKMV_FAULT`` (crash tests),
            None when unset; fault_mode: ``exit``, ``kill`` or ``stall`` (``SPARKMV_FAULT_MODE``).
    """

    home: Path
    catalog_url: str
    warehouse: Path | str
    spark_master: str = "local[*]"
    spark_remote: str | None = None
    spark_conf: dict[str, str] = field(default_factory=dict)
    jdbc_jars: tuple[str, ...] | None = None
    fault: str | None = None
    fault_mode: str = "exit"

    @classmethod
    def resolve(
        cls,
        home: str | os.PathLike[str] | None = None,
        catalog_url: str | None = None,
        master: str | None = None,
        conf: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        remote: str | None = None,
    ) -> Settings:
        """Build settings from arguments, then ``SPARKMV_HOME``, ``SPARKMV_CATALOG_URL``,
        ``SPARKMV_SPARK_MASTER``, ``SPARKMV_SPARK_REMOTE``, then defaults (``./.sparkmv``,
        SQLite, ``local[*]``, no remote); the warehouse (``SPARKMV_WAREHOUSE``, default
        ``<home>/warehouse``), the JDBC driver jars and fault injection come from the
        environment only. A ``master`` argument overrides ``SPARKMV_SPARK_REMOTE`` (it
        asks for a classic session); callers refuse ``master`` and ``remote`` together.

        >>> env = {"SPARKMV_JDBC_JARS": "/a.jar:/b.jar", "SPARKMV_FAULT": "before_publish"}
        >>> s = Settings.resolve(home="/h", env=env)
        >>> s.jdbc_jars, s.fault, s.fault_mode, s.catalog_url
        (('/a.jar', '/b.jar'), 'before_publish', 'exit', 'sqlite:////h/catalog.db')
        >>> env = {"SPARKMV_SPARK_REMOTE": "sc://127.0.0.1:15002"}
        >>> Settings.resolve(home="/h", env=env).spark_remote
        'sc://127.0.0.1:15002'
        >>> Settings.resolve(home="/h", master="yarn", env=env).spark_remote is None
        True
        >>> Settings.resolve(home="/h", env={"SPARKMV_WAREHOUSE": "s3://bucket/wh"}).warehouse
        's3://bucket/wh'
        >>> str(Settings.resolve(home="/h", env={}).warehouse)
        '/h/warehouse'
        """
        environ = os.environ if env is None else env
        home_path = Path(home or environ.get("SPARKMV_HOME") or ".sparkmv").absolute()
        url = catalog_url or environ.get("SPARKMV_CATALOG_URL") or f"sqlite:///{home_path}/catalog.db"
        spark_master = master or environ.get("SPARKMV_SPARK_MASTER") or "local[*]"
        spark_remote = remote or (None if master else environ.get("SPARKMV_SPARK_REMOTE")) or None
        return cls(
            home=home_path,
            catalog_url=url,
            warehouse=_warehouse(environ.get("SPARKMV_WAREHOUSE"), home_path),
            spark_master=spark_master,
            spark_remote=spark_remote,
            spark_conf=dict(conf or {}),
            jdbc_jars=_path_list(environ.get("SPARKMV_JDBC_JARS")),
            fault=environ.get("SPARKMV_FAULT") or None,
            fault_mode=environ.get("SPARKMV_FAULT_MODE") or "exit",
        )

    @property
    def is_sqlite(self) -> bool:
        """True when the catalog is a SQLite database."""
        return self.catalog_url.startswith("sqlite")


def _warehouse(raw: str | None, home: Path) -> Path | str:
    """``SPARKMV_WAREHOUSE``: a URL (``s3://...``) as text, a local path as an absolute
    ``Path``; ``<home>/warehouse`` when unset or empty."""
    if not raw:
        return home / "warehouse"
    if "://" in raw and not raw.startswith("file://"):
        return raw
    return Path(raw.removeprefix("file://")).absolute()


def _path_list(raw: str | None) -> tuple[str, ...] | None:
    """``a:b`` -> ``("a", "b")``; None stays None (unset differs from set-but-empty)."""
    if raw is None:
        return None
    return tuple(p for p in raw.split(os.pathsep) if p)
