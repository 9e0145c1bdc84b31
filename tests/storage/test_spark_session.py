"""Where Spark is reached: master URLs and Spark Connect URLs are checked before anything
starts, and a client takes a master or a remote, never both (no Spark started here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkmv.client.client import Client
from sparkmv.config import Settings
from sparkmv.errors import SparkMvError, StorageError
from sparkmv.storage.spark_log import check_master, remote_address


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("sc://127.0.0.1:15099", ("127.0.0.1", 15099)),
        ("sc://localhost", ("localhost", 15002)),
        ("sc://spark-connect.example.com:443/;use_ssl=true;token=abc", ("spark-connect.example.com", 443)),
        ("sc://[::1]:15002/", ("::1", 15002)),
    ],
)
def test_remote_address(url: str, address: tuple[str, int]) -> None:
    assert remote_address(url) == address


@pytest.mark.parametrize("url", ["http://host:15002", "sc://", "sc://host:0", "sc://host:70000", "sc://a b", "host"])
def test_remote_address_refuses_what_is_not_a_connect_url(url: str) -> None:
    with pytest.raises(StorageError) as raised:
        remote_address(url)
    assert str(raised.value) == f"Spark Connect URL {url!r} is not valid: use sc://HOST:PORT"


@pytest.mark.parametrize("master", ["local[*]", "local[2]", "spark://10.0.0.1:7077", "yarn", "k8s://https://h:6443"])
def test_check_master_accepts(master: str) -> None:
    check_master(master)


def test_check_master_points_a_connect_url_to_the_remote() -> None:
    with pytest.raises(StorageError) as raised:
        check_master("sc://127.0.0.1:15002")
    assert str(raised.value) == (
        "Spark master 'sc://127.0.0.1:15002' is a Spark Connect URL: give it as the remote "
        "(--remote, SPARKMV_SPARK_REMOTE or Client(remote=...))"
    )


def test_remote_from_the_environment_unless_a_master_is_given() -> None:
    env = {"SPARKMV_SPARK_REMOTE": "sc://h:1", "SPARKMV_SPARK_MASTER": "spark://m:7077"}
    assert Settings.resolve("/h", env=env).spark_remote == "sc://h:1"
    assert Settings.resolve("/h", env=env, remote="sc://other:2").spark_remote == "sc://other:2"
    chosen = Settings.resolve("/h", master="local[1]", env=env)
    assert (chosen.spark_master, chosen.spark_remote) == ("local[1]", None)


def test_client_takes_a_master_or_a_remote_not_both(tmp_path: Path) -> None:
    with pytest.raises(SparkMvError) as raised:
        Client(home=tmp_path / "home", master="local[1]", remote="sc://127.0.0.1:15002")
    assert str(raised.value) == "give a Spark master or a Spark Connect remote, not both"
    assert not (tmp_path / "home").exists(), "nothing was created"
