"""Serving the app: bind the socket first (a port in use is a clear error), then uvicorn."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Callable
from typing import Any

from sparkmv.errors import CatalogError, SparkMvError


def check_catalog_exists(catalog_url: str) -> None:
    """A UI only reads: refuse a SQLite catalog file that does not exist (opening it would
    create an empty one).

    Raises:
        CatalogError: ``no sparkmv catalog at <path>``.
    """
    from sparkmv.catalog.database import sqlite_path

    path = sqlite_path(catalog_url)
    if path is not None and not path.exists():
        raise CatalogError(f"no sparkmv catalog at {path} (give --home or --catalog-url of an existing catalog)")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``.

    Raises:
        SparkMvError: ``cannot listen on HOST:PORT: <reason>`` (port in use, bad address).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family = infos[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(infos[0][4])
        sock.listen(128)
    except OSError as exc:
        raise SparkMvError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def serve(
    app_factory: Callable[[str], Any], host: str, port: int, allow_actions: bool, echo: Callable[[str], None]
) -> None:
    """Bind, compute every MV's freshness, print the address (and the token when actions are
    on), serve until interrupted. ``app_factory(token)`` makes the app (:func:`create_app`).

    Raises:
        SparkMvError: when the address cannot be bound (see :func:`bind`).
    """
    import uvicorn

    sock = bind(host, port)
    token = secrets.token_urlsafe(24)
    app = app_factory(token)
    app.state.ui.warm()  # every MV's freshness, before the first page asks for it
    bound_port = sock.getsockname()[1]
    url = f"http://{host}:{bound_port}/"
    if allow_actions:
        echo(f"sparkmv ui: {url}?token={token}  (actions allowed with token {token})")
    else:
        echo(f"sparkmv ui: {url}  (read-only)")
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
