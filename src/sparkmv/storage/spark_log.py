"""Where Spark's own log goes, and Spark errors in one line. Plain Python: no pyspark import.

The driver JVM logs through log4j2. sparkmv writes a log4j2 properties file under the home
that sends every Spark log line to ``<home>/logs/spark.log`` (never the terminal) and
hands it to the JVM with ``-Dlog4j2.configurationFile`` in ``spark.driver.extraJavaOptions``
before the JVM starts. The Python side of py4j and pyspark logs to the same file.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOG_DIR = "logs"
LOG_FILE = "spark.log"
CONFIG_FILE = "log4j2.properties"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

_LOG4J2 = """# Written by sparkmv: Spark's own log goes to a file, never to the terminal.
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss}} %p %c: %m%n%ex
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = error
"""

_PYTHON_LOGGERS = ("py4j", "pyspark")
_SPARK_MODULES = (*_PYTHON_LOGGERS, "grpc")  # grpc: the transport of Spark Connect


def log_path(home: Path) -> Path:
    """The Spark log file of ``home``: ``<home>/logs/spark.log``."""
    return home / LOG_DIR / LOG_FILE


def log_conf(home: Path, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` plus the Java option that points log4j2 at a file-only configuration.

    Writes ``<home>/logs/log4j2.properties`` (and creates the directory). A user's own
    ``spark.driver.extraJavaOptions`` is kept; a user's own ``-Dlog4j2.configurationFile``
    wins. Also sends the py4j and pyspark Python loggers to the same log file.

    Raises:
        OSError: when the log directory cannot be created.
    """
    directory = home / LOG_DIR
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_FILE
    text = _LOG4J2.format(log=log_path(home))
    if not config.is_file() or config.read_text() != text:
        config.write_text(text)
    _python_loggers_to_file(log_path(home))
    options = conf.get(JAVA_OPTIONS, "")
    if "log4j2.configurationFile" in options:
        return dict(conf)
    return {**conf, JAVA_OPTIONS: f"{options} -Dlog4j2.configurationFile=file:{config}".strip()}


_MASTER = re.compile(r"^(local(\[(\*|\d+)(,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]|yarn|(spark|k8s)://\S+)$")
_REMOTE = re.compile(r"^sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(?P<port>\d{1,5}))?/?(?:;\S*)?$")
DEFAULT_CONNECT_PORT = 15002
"""The port of a Spark Connect URL that names none (Spark's ``spark.connect.grpc.binding.port``)."""


def check_master(master: str) -> None:
    """Refuse a Spark master URL Spark would refuse, before a JVM is started for it.

    Raises:
        StorageError: for anything but ``local``, ``local[N]``, ``local[*]``, ``local[N,F]``,
            ``local-cluster[...]``, ``yarn``, ``spark://...``, ``k8s://...``; a Spark Connect
            URL (``sc://...``) is refused with a pointer to the remote setting.
    """
    from sparkmv.errors import StorageError

    text = master.strip()
    if text.startswith("sc://"):
        raise StorageError(
            f"Spark master {master!r} is a Spark Connect URL: give it as the remote "
            "(--remote, SPARKMV_SPARK_REMOTE or Client(remote=...))"
        )
    if not _MASTER.match(text):
        raise StorageError(
            f"Spark master {master!r} is not valid: use local[*], local[N], spark://HOST:PORT, yarn or k8s://URL"
        )


def remote_address(remote: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL ``sc://host[:port][/;param=value...]``
    (port 15002 when it names none; the parameters, such as ``token``, are Spark's).

    >>> remote_address("sc://127.0.0.1:15099")
    ('127.0.0.1', 15099)
    >>> remote_address("sc://spark.example.com/;use_ssl=true;token=abc")
    ('spark.example.com', 15002)
    >>> remote_address("sc://[::1]:15002")
    ('::1', 15002)

    Raises:
        StorageError: when ``remote`` is not such a URL, or its port is not 1..65535.
    """
    from sparkmv.errors import StorageError

    found = _REMOTE.match(remote.strip())
    port = int(found.group("port") or DEFAULT_CONNECT_PORT) if found else 0
    if found is None or not 0 < port < 65536:
        raise StorageError(f"Spark Connect URL {remote!r} is not valid: use sc://HOST:PORT")
    return found.group("host").strip("[]"), port


@contextmanager
def console_output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr file descriptors to ``path`` while a JVM starts.

    pyspark starts the driver JVM as a child that inherits both descriptors; whatever the
    JVM prints itself (start-up warnings, ``Exception in thread "main"``) lands in the log
    for its whole life. Python's own streams are restored when the block ends.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        with path.open("ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _python_loggers_to_file(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in _PYTHON_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [h for h in logger.handlers if not isinstance(h, logging.FileHandler)] + [handler]
        logger.propagate = False  # not to the terminal


def is_spark_error(exc: BaseException) -> bool:
    """True for an exception raised by pyspark, py4j or grpc (Spark Connect's transport),
    checked by module, without importing them."""
    return any(cls.__module__.split(".")[0] in _SPARK_MODULES for cls in type(exc).__mro__)


_NOISE = ("JVM stacktrace", "at ", "py4j", "An error occurred while calling", "Traceback", "File ")
_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\] ")
_CLASS_PREFIX = re.compile(r"^(?:[\w$.]+(?:Exception|Error): )+")


def spark_error_line(exc: BaseException, limit: int = 1000) -> str:
    """The first meaningful line of a Spark or py4j error, without Java class names, cut to
    ``limit`` characters.

    >>> spark_error_line(RuntimeError("An error occurred while calling o46.parquet.\\n"
    ...     ": org.apache.spark.SparkException: Could not parse Master URL: 'nonsense://x'\\n\\tat x"))
    "Could not parse Master URL: 'nonsense://x'"
    >>> spark_error_line(RuntimeError("Job aborted: Exception thrown in awaitResult: \\n\\tat x\\n"
    ...     "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error"))
    '[FAILED_READ_FILE.NO_HINT] Encountered error'
    """
    text = str(exc).strip()
    # Spark's own error class (``[FAILED_READ_FILE.NO_HINT] ...``) says what went wrong even
    # when it is only the cause of a wrapper (``Exception thrown in awaitResult``).
    found = _ERROR_CLASS.search(text)
    if found is not None:
        return text[found.start() :].splitlines()[0].strip()[:limit]
    for raw in text.splitlines():
        line = raw.strip().removeprefix(": ")
        if line and not line.startswith(_NOISE):
            return _CLASS_PREFIX.sub("", line)[:limit]
    return type(exc).__name__


def spark_error_text(exc: BaseException) -> str:
    """The error a failed run or a refused query records: :func:`spark_error_line`, kept up
    to 2000 characters."""
    return spark_error_line(exc, limit=2000)
