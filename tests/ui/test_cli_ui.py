"""``sparkmv ui`` as a process: it serves the catalog, prints the token with --allow-actions,
and fails with one ``error:`` line (exit 1) on a missing catalog or a port in use."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.ui.server import env, running_ui, sparkmv_argv
from tests.ui.states import build


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_serves_the_catalog_read_only(tmp_path: Path) -> None:
    build(tmp_path / "home", tmp_path / "data").close()
    with running_ui(tmp_path / "home") as (url, line):
        assert url.startswith("http://127.0.0.1:") and line.strip().endswith("(read-only)")
        status, body = _get(url + "api/objects")
        assert status == 200
        assert {o["name"]: o["state"] for o in json.loads(body)["objects"]}["mv_refreshing"] == "refreshing"
        data = urllib.parse.urlencode({"token": "anything"}).encode()
        try:
            urllib.request.urlopen(urllib.request.Request(url + "objects/mv_fresh/refresh", data=data), timeout=30)
            raise AssertionError("an action was accepted with actions off")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403


def test_allow_actions_prints_a_token_that_works(tmp_path: Path) -> None:
    build(tmp_path / "home", tmp_path / "data").close()
    with running_ui(tmp_path / "home", "--allow-actions") as (url, line):
        token = re.search(r"token=(\S+)", line)
        assert token is not None
        status, body = _get(f"{url}objects/mv_refreshing?token={token.group(1)}")
        assert status == 200 and 'id="do-cancel"' in body


def test_missing_catalog_is_an_error(tmp_path: Path) -> None:
    out = subprocess.run(sparkmv_argv(tmp_path / "nothing", "ui"), capture_output=True, text=True, env=env())
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"error: no sparkmv catalog at {tmp_path / 'nothing' / 'catalog.db'} "
        "(give --home or --catalog-url of an existing catalog)"
    )
    assert not (tmp_path / "nothing").exists()


def test_damaged_catalog_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "catalog.db").write_bytes(b"not a database")
    out = subprocess.run(sparkmv_argv(tmp_path / "home", "ui"), capture_output=True, text=True, env=env())
    assert out.returncode == 1 and out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1


def test_port_in_use_is_an_error(tmp_path: Path) -> None:
    build(tmp_path / "home", tmp_path / "data").close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = sparkmv_argv(tmp_path / "home", "ui", "--port", str(port))
        out = subprocess.run(argv, capture_output=True, text=True, env=env())
    assert out.returncode == 1
    assert out.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
