"""The class-data archive of the local driver JVM: keyed by the Java runtime and the
driver class path, used only when one exists for the current key, written under a temporary
name and renamed into place only when the JVM wrote it whole; and, with a real JVM, a session
started after a build loads Spark's classes from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkmv.errors import StorageError
from sparkmv.storage import jvm_archive
from sparkmv.storage.spark import JAVA_OPTIONS, LOCAL_JAVA_OPTIONS, QUICK_JAVA_OPTIONS, _with_local_java_options

ROOT = Path(__file__).resolve().parents[2]


def _java_home(root: Path) -> Path:
    """A fake Java home: bin/java, release, lib/modules, lib/server/libjvm.so."""
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "server").mkdir(parents=True)
    (root / "bin" / "java").write_text("#!/bin/sh\n")
    (root / "bin" / "java").chmod(0o755)
    (root / "release").write_text('JAVA_VERSION="17.0.15"\n')
    (root / "lib" / "modules").write_bytes(b"m" * 10)
    (root / "lib" / "server" / "libjvm.so").write_bytes(b"j" * 10)
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    java = _java_home(tmp_path / "jdk")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"c" * 100)
    return {
        "JAVA_HOME": str(java),
        "SPARK_HOME": str(tmp_path / "spark"),
        "SPARKMV_JVM_ARCHIVE_DIR": str(tmp_path / "archives"),
    }


def test_the_key_follows_java_and_the_class_path(env: dict[str, str], tmp_path: Path) -> None:
    key = jvm_archive.archive_key({}, env)
    assert key is not None and len(key) == 16
    assert jvm_archive.archive_key({}, env) == key, "stable"
    (tmp_path / "spark" / "jars" / "extra.jar").write_bytes(b"x")
    with_jar = jvm_archive.archive_key({}, env)
    assert with_jar != key, "a jar added to Spark's jars"
    (tmp_path / "jdk" / "release").write_text('JAVA_VERSION="17.0.16"\n')
    upgraded = jvm_archive.archive_key({}, env)
    assert upgraded != with_jar, "another Java release"
    assert jvm_archive.archive_key({"spark.driver.extraClassPath": "/x.jar"}, env) != upgraded
    assert jvm_archive.archive_key({}, {**env, "SPARK_CONF_DIR": "/etc/spark"}) != upgraded
    assert jvm_archive.archive_key({}, {**env, "JAVA_HOME": str(tmp_path / "nowhere")}) is None


def test_options_only_for_an_archive_of_the_current_key(env: dict[str, str]) -> None:
    assert jvm_archive.java_options("", {}, env) == "", "no archive built"
    path = jvm_archive.archive_path({}, env)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    assert jvm_archive.java_options("", {}, env) == f"-XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds*=off"
    assert jvm_archive.java_options("-Xmx1g", {"spark.driver.extraClassPath": "/x.jar"}, env) == "", "other key"
    assert jvm_archive.java_options("-XX:SharedArchiveFile=/mine.jsa", {}, env) == "", "the user's own wins"
    assert jvm_archive.java_options("-Xshare:off", {}, env) == ""
    assert jvm_archive.java_options("", {}, {**env, "SPARKMV_JVM_ARCHIVE": "off"}) == ""


def test_local_driver_options(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    path = jvm_archive.archive_path({})
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    options = _with_local_java_options("local[2]", {})[JAVA_OPTIONS]
    assert options == f"{LOCAL_JAVA_OPTIONS} -XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds*=off"
    # both JIT tiers: the first alone made heavy refreshes 2x slower and filled a 48 MiB code cache
    assert LOCAL_JAVA_OPTIONS.split()[0] == "-XX:TieredStopAtLevel=4"
    own = _with_local_java_options("local[*]", {JAVA_OPTIONS: "-XX:TieredStopAtLevel=4 -Dx=1"})[JAVA_OPTIONS]
    assert own == f"-XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds*=off -XX:TieredStopAtLevel=4 -Dx=1"
    assert JAVA_OPTIONS not in _with_local_java_options("spark://h:7077", {}), "not a local driver"
    quick = _with_local_java_options("local[2]", {}, quick_start=True)[JAVA_OPTIONS]
    assert quick == f"{QUICK_JAVA_OPTIONS} -XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds*=off"
    assert QUICK_JAVA_OPTIONS.split()[0] == "-XX:TieredStopAtLevel=1"
    own = _with_local_java_options("local[2]", {JAVA_OPTIONS: "-XX:-TieredCompilation"}, quick_start=True)
    assert own[JAVA_OPTIONS].endswith("-Xlog:cds*=off -XX:-TieredCompilation"), "a user's own tier choice wins"


class _Jvm:
    """Stands in for the driver JVM: writes the archive it was told to at exit (or not)."""

    def __init__(self, status: int, writes: bytes) -> None:
        self.status, self.writes, self.target = status, writes, None

    def start(self, options: str) -> Any:
        self.target = Path(options.split()[0].removeprefix("-XX:ArchiveClassesAtExit="))
        return self

    def exit(self, spark: Any, timeout: float) -> int:
        if self.writes and self.target is not None:
            self.target.write_bytes(self.writes)
        return self.status


def test_build_renames_a_whole_archive_and_drops_other_keys(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    directory = Path(env["SPARKMV_JVM_ARCHIVE_DIR"])
    directory.mkdir()
    stale = directory / "driver-0123456789abcdef.jsa"
    stale.write_bytes(b"old")
    jvm = _Jvm(0, b"archive")
    monkeypatch.setattr(jvm_archive, "_exit_jvm", jvm.exit)
    path = jvm_archive.build_archive(jvm.start, lambda spark: None, {})
    assert path == jvm_archive.archive_path({}) and path.read_bytes() == b"archive"
    assert sorted(p.name for p in directory.iterdir()) == [path.name], "stale key and temporary file gone"


@pytest.mark.parametrize(("status", "writes"), [(1, b"half"), (0, b""), (0, b"-")])
def test_build_keeps_nothing_the_jvm_did_not_write_whole(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, status: int, writes: bytes
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    jvm = _Jvm(status, writes)
    monkeypatch.setattr(jvm_archive, "_exit_jvm", jvm.exit)

    def workload(spark: Any) -> None:
        if writes == b"-":
            raise RuntimeError("workload failed")

    with pytest.raises((StorageError, RuntimeError)):
        jvm_archive.build_archive(jvm.start, workload, {})
    assert list(Path(env["SPARKMV_JVM_ARCHIVE_DIR"]).iterdir()) == []


BUILD = """
from sparkmv.storage import jvm_archive
from sparkmv.storage.spark import get_spark
path = jvm_archive.build_archive(
    lambda options: get_spark("local[1]", {"spark.driver.extraJavaOptions": options}),
    lambda spark: spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect(),
    {},
)
print(path)
"""
USE = """
import sys
from sparkmv.storage.spark import get_spark
spark = get_spark("local[1]", {"spark.driver.extraJavaOptions": "-Xlog:class+load=info:file=" + sys.argv[1]})
print(spark.sparkContext.getConf().get("spark.driver.extraJavaOptions"))
"""


def test_a_built_archive_is_used_by_the_next_local_driver(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "SPARKMV_JVM_ARCHIVE_DIR": str(tmp_path / "archives"),
        "SPARKMV_JVM_ARCHIVE": "on",
    }
    built = subprocess.run([sys.executable, "-c", BUILD], env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    path = Path(built.stdout.strip().splitlines()[-1])
    assert path.is_file() and path.parent == tmp_path / "archives"
    log = tmp_path / "classes.log"
    used = subprocess.run([sys.executable, "-c", USE, str(log)], env=env, capture_output=True, text=True, timeout=600)
    assert used.returncode == 0, used.stderr[-2000:]
    assert f"-XX:SharedArchiveFile={path}" in used.stdout
    assert "SharedArchiveFile" not in used.stderr and "cds" not in used.stderr, "nothing about CDS printed"
    classes = log.read_text()
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in classes
