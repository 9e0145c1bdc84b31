"""The class-data sharing (AppCDS) archive of a local Spark driver JVM: Spark's classes as the
JVM laid them out in memory, loaded from one mapped file instead of ~300 jars in a cold process.

A cold ``local`` driver spends seconds loading and verifying classes before its first job
(``bench/RESULTS.md``, Spark Declarative Pipelines). A *dynamic* archive (JDK 13+) is written by a JVM started with
``-XX:ArchiveClassesAtExit=FILE`` when it exits, and used by later JVMs started with
``-XX:SharedArchiveFile=FILE``. It is built on this machine by :func:`build_archive` (the
``sparkmv jvm-archive`` command, run by ``make install``), never downloaded.

An archive is valid only for the JVM and the class path that wrote it. Its file name carries a
key (:func:`archive_key`) over the Java runtime (the ``java`` Spark's launcher runs, its
``release`` file and the size and time of its ``libjvm.so`` and ``lib/modules``) and over the
driver's class path (the name, size and time of every jar of Spark's ``jars`` directory, the
environment variables and the ``spark.driver.extraClassPath`` the launcher adds): after a JDK or
pyspark upgrade the key differs, no archive has that name, and the JVM starts without one
until the archive is built again (which removes archives of other keys). The JVM checks the
archive too and falls back silently (``-Xshare:auto``, its CDS log off); but a *truncated*
archive crashes JDK 17, so an archive is written under a temporary name and renamed into place
only after its JVM exited with status 0.

Where: ``$SPARKMV_JVM_ARCHIVE_DIR``, else ``$XDG_CACHE_HOME/sparkmv/jvm``, else
``~/.cache/sparkmv/jvm``. ``SPARKMV_JVM_ARCHIVE=off`` disables the archive.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sparkmv.errors import StorageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ARCHIVE_OPTIONS = ("SharedArchiveFile", "ArchiveClassesAtExit", "Xshare")
"""Java options that choose an archive themselves: a user's own wins over sparkmv's."""
QUIET = "-Xlog:cds*=off"
"""The JVM's CDS log off: it would print a mismatched archive's warning to the terminal."""
CLASSPATH_ENV = ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_DIST_CLASSPATH", "HADOOP_CONF_DIR", "YARN_CONF_DIR")
EXTRA_CLASSPATH = "spark.driver.extraClassPath"
PREFIX = "driver-"
SUFFIX = ".jsa"


def archive_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The directory of the archives, or None when ``SPARKMV_JVM_ARCHIVE=off``."""
    env = os.environ if env is None else env
    if env.get("SPARKMV_JVM_ARCHIVE", "").strip().lower() in ("off", "0", "false", "no"):
        return None
    if env.get("SPARKMV_JVM_ARCHIVE_DIR"):
        return Path(env["SPARKMV_JVM_ARCHIVE_DIR"])
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "sparkmv" / "jvm"


def java_home(env: Mapping[str, str] | None = None) -> Path | None:
    """The Java home of the ``java`` Spark's launcher runs (``$JAVA_HOME/bin/java``, else
    ``java`` on the ``PATH``, links resolved), or None when there is none."""
    env = os.environ if env is None else env
    java = Path(env["JAVA_HOME"]) / "bin" / "java" if env.get("JAVA_HOME") else None
    if java is None:
        found = shutil.which("java", path=env.get("PATH"))
        java = Path(found) if found else None
    if java is None or not java.exists():
        return None
    return java.resolve().parent.parent


def spark_home(env: Mapping[str, str] | None = None) -> Path:
    """Spark's home as pyspark finds it (``$SPARK_HOME``, else the pyspark package)."""
    env = os.environ if env is None else env
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def archive_key(conf: Mapping[str, str], env: Mapping[str, str] | None = None) -> str | None:
    """A hex key (16 digits) over the Java runtime and the driver class path (see the module
    docstring), or None when no ``java`` is found. Costs a directory listing (~300 stats)."""
    env = os.environ if env is None else env
    home = java_home(env)
    if home is None:
        return None
    digest = hashlib.sha256()
    release = home / "release"
    digest.update(str(home).encode())
    digest.update(release.read_bytes() if release.is_file() else b"")
    for part in (home / "lib" / "server" / "libjvm.so", home / "lib" / "modules"):
        digest.update(_stat(part))
    jars = spark_home(env) / "jars"
    for jar in sorted(jars.iterdir()) if jars.is_dir() else []:
        digest.update(jar.name.encode() + _stat(jar))
    for name in CLASSPATH_ENV:
        digest.update(f"{name}={env.get(name, '')}\0".encode())
    digest.update(f"{EXTRA_CLASSPATH}={conf.get(EXTRA_CLASSPATH, '')}".encode())
    return digest.hexdigest()[:16]


def _stat(path: Path) -> bytes:
    try:
        st = path.stat()
    except OSError:
        return b"-"
    return f"{st.st_size}:{st.st_mtime_ns}\0".encode()


def archive_path(conf: Mapping[str, str], env: Mapping[str, str] | None = None) -> Path | None:
    """Where the archive for ``conf`` and this machine's Java and Spark is (or would be), or
    None when archives are off or there is no ``java``."""
    directory = archive_dir(env)
    key = archive_key(conf, env) if directory is not None else None
    return None if directory is None or key is None else directory / f"{PREFIX}{key}{SUFFIX}"


def java_options(options: str, conf: Mapping[str, str], env: Mapping[str, str] | None = None) -> str:
    """The options that make a local driver JVM use its archive, to put before ``options``
    (the driver's own Java options); empty when ``options`` choose an archive themselves, or
    when no archive for this key exists."""
    if any(name in options for name in ARCHIVE_OPTIONS):
        return ""
    path = archive_path(conf, env)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}"


def build_archive(
    start: Callable[[str], SparkSession],
    workload: Callable[[SparkSession], None],
    conf: Mapping[str, str],
    timeout: float = 900.0,
) -> Path:
    """Write the archive for ``conf`` (see :func:`archive_path`): ``start(options)`` must start
    this process's first SparkSession with ``options`` among the driver's Java options,
    ``workload(spark)`` runs the queries whose classes are wanted; then the session stops, the
    driver JVM is told to exit (its standard input closed: pyspark's gateway server then calls
    ``System.exit``), the JVM writes the archive as it exits, and this waits for it (seconds
    to a minute: the archive is ~150 MB). The archive replaces the one of the same key and
    archives of other keys are deleted.

    Raises:
        StorageError: archives are off, no ``java``, the directory cannot be written, or the
            JVM did not write an archive (its exit status, and Spark's log, say why).
    """
    final = archive_path(conf)
    if final is None:
        raise StorageError("no JVM archive: SPARKMV_JVM_ARCHIVE is off or no java was found")
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(f"cannot create the JVM archive directory {final.parent}: {exc.strerror}") from exc
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    spark = start(f"-XX:ArchiveClassesAtExit={tmp} {QUIET}")
    try:
        workload(spark)
    except BaseException:
        _exit_jvm(spark, timeout)
        tmp.unlink(missing_ok=True)
        raise
    status = _exit_jvm(spark, timeout)
    if status != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"the driver JVM wrote no archive (exit status {status})")
    os.replace(tmp, final)
    for old in final.parent.glob(f"{PREFIX}*{SUFFIX}"):
        if old != final:
            old.unlink(missing_ok=True)
    return final


def _exit_jvm(spark: SparkSession, timeout: float) -> int | None:
    """Stop ``spark``, make its driver JVM exit by itself and wait for it: its exit status."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    spark.stop()
    if proc is None or proc.stdin is None:
        return None
    proc.stdin.close()
    return int(proc.wait(timeout))
