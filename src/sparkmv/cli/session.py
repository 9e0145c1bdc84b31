"""The state of one ``sparkmv`` invocation shared by its commands: the consoles and the
global options (set by :func:`sparkmv.cli.main.main_options`, read by every command,
including :mod:`sparkmv.cli.pipeline`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from sparkmv.client.client import Client

console = Console()
if not console.is_terminal:
    console = Console(width=160)  # logs and pipes: do not wrap tables at 80 columns
err_console = Console(stderr=True)


class _State:
    """Global options of one invocation (set by the callback, read by commands)."""

    def __init__(self) -> None:
        self.home: str | None = None
        self.catalog_url: str | None = None
        self.master: str | None = None
        self.remote: str | None = None
        self.conf: dict[str, str] = {}
        self.debug = False
        self.rewrite = True
        self._client: Client | None = None

    def client(self, recover: bool = True) -> Client:
        if self._client is None:
            from sparkmv.client.client import Client

            self._client = Client(
                self.home,
                self.catalog_url,
                master=self.master,
                conf=self.conf,
                recover=recover,
                remote=self.remote,
                rewrite=self.rewrite,
            )
        return self._client


state = _State()
