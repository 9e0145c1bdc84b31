"""The ``sparkmv`` command line (typer). Thin: parse, call the Client, print with rich.

Errors derived from :class:`SparkMvError` print ``error: <message>`` and exit 1;
``--debug`` shows the traceback.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from sparkmv.errors import SparkMvError

if TYPE_CHECKING:
    from sparkmv.client.client import Client

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Materialized views that stay fresh on Spark.")
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
        self.conf: dict[str, str] = {}
        self.debug = False
        self._client: Client | None = None

    def client(self, recover: bool = True) -> Client:
        if self._client is None:
            from sparkmv.client.client import Client

            self._client = Client(self.home, self.catalog_url, master=self.master, conf=self.conf, recover=recover)
        return self._client


state = _State()


def _parse_conf(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--conf expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


@app.callback()
def main_options(
    home: Annotated[str | None, typer.Option(help="State directory (SPARKMV_HOME, default ./.sparkmv).")] = None,
    catalog_url: Annotated[
        str | None, typer.Option(help="Catalog database URL (SPARKMV_CATALOG_URL, default SQLite in home).")
    ] = None,
    master: Annotated[str | None, typer.Option(help="Spark master (SPARKMV_SPARK_MASTER, default local[*]).")] = None,
    conf: Annotated[list[str] | None, typer.Option(help="Spark configuration key=value (repeatable).")] = None,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and debug logs.")] = False,
) -> None:
    """Global options."""
    state.home, state.catalog_url, state.master = home, catalog_url, master
    state.conf = _parse_conf(conf or [])
    state.debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _print_rows(columns: list[str], rows: list[list[Any]], fmt: str, title: str | None = None) -> None:
    from sparkmv.cli.render import print_rows

    print_rows(console, columns, rows, fmt, title)


def _progress_runner(client: Client, statement: str) -> Any:
    from sparkmv.cli.render import run_with_progress

    return run_with_progress(console, client, statement)


@app.command()
def sql(
    statement: Annotated[str | None, typer.Argument(help="One statement (or use -f).")] = None,
    file: Annotated[Path | None, typer.Option("-f", "--file", help="A file of statements separated by ';'.")] = None,
    format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """Run SQL statements; query results print as a table, CSV or JSON."""
    from sparkmv.sql.parser import split_statements

    if format not in ("table", "csv", "json"):
        raise SparkMvError(f"unknown --format {format!r}: use table, csv or json")
    if (statement is None) == (file is None):
        raise SparkMvError("give one statement or -f FILE")
    text = statement if statement is not None else file.read_text()  # type: ignore[union-attr]
    client = state.client()
    for stmt in split_statements(text):
        result = _progress_runner(client, stmt)
        if result.dataframe is not None:
            df = result.dataframe
            rows = [list(r) for r in df.collect()]
            _print_rows(df.columns, rows, format)
        elif result.message:
            console.print(result.message, highlight=False, soft_wrap=True)


@app.command()
def status(
    name: Annotated[str | None, typer.Argument(help="One MV (default: all).")] = None,
    format: Annotated[str, typer.Option("--format")] = "table",
) -> None:
    """The materialized views: state, rows, partitions, last refresh duration, freshness."""
    from sparkmv.cli.render import status_rows

    cols, rows = status_rows(state.client().status(name))
    _print_rows(cols, rows, format, title="materialized views")


@app.command()
def runs(
    name: Annotated[str, typer.Argument(help="The MV or table.")],
    chunks: Annotated[bool, typer.Option(help="Also list each chunk of the newest run.")] = True,
    format: Annotated[str, typer.Option("--format")] = "table",
) -> None:
    """The refresh runs of one object, newest first, and the chunks of the newest run that has any."""
    from sparkmv.cli.render import chunk_rows, run_rows

    client = state.client()
    all_runs = client.runs(name)
    cols, rows = run_rows(all_runs)
    _print_rows(cols, rows, format, title=f"refresh runs of {name}")
    with_chunks = [r for r in all_runs if r.chunks_planned > 0]
    if chunks and with_chunks:
        newest = with_chunks[0]  # skipped runs have no chunks: show the newest that has
        cols, rows = chunk_rows(client.chunks(newest.run_id))
        _print_rows(cols, rows, format, title=f"chunks of run {newest.run_id}")


@app.command()
def cancel(name: str) -> None:
    """Cancel the running refresh of NAME (stops within seconds; the MV is unchanged)."""
    console.print(state.client(recover=False).cancel(name))


@app.command()
def pause(name: str) -> None:
    """Hold the running refresh of NAME before its next chunk."""
    console.print(state.client(recover=False).pause(name))


@app.command()
def resume(name: str) -> None:
    """Continue a paused refresh of NAME."""
    console.print(state.client(recover=False).resume(name))


@app.command()
def recover() -> None:
    """Resume every refresh whose owner died (lease expired)."""
    outcomes = state.client(recover=False).recover()
    if not outcomes:
        console.print("nothing to recover")
    for o in outcomes:
        detail = f": {o.run.state}" if o.run else ""
        console.print(f"{o.name}: run {o.run_id} {o.action}{detail}")


@app.command()
def vacuum() -> None:
    """Expire old Iceberg snapshots and delete files no snapshot or live run references."""
    from sparkmv.refresh.vacuum import vacuum as do_vacuum

    for line in do_vacuum(state.client().runtime):
        console.print(line)


@app.command()
def demo(
    scale_factor: Annotated[float, typer.Option(help="TPC-H scale factor.")] = 1.0,
    data: Annotated[Path, typer.Option(help="Directory for the TPC-H data.")] = Path("data/tpch"),
) -> None:
    """The TPC-H demo: generate data, create three MVs, refresh, check against the queries."""
    import importlib

    # The demo is a client of the public API that nothing imports (layer contract): load it by name.
    run_demo = importlib.import_module("sparkmv.demo.run").run_demo
    ok = run_demo(state.client(), scale_factor, data, console)
    if not ok:
        raise typer.Exit(1)


@app.command()
def scheduler(
    once: Annotated[bool, typer.Option(help="Run one tick and exit.")] = False,
    max_concurrent_refreshes: Annotated[int, typer.Option(help="Refreshes at once.")] = 1,
    poll_seconds: Annotated[float, typer.Option(help="Seconds between ticks.")] = 1.0,
    metrics_port: Annotated[int | None, typer.Option(help="Serve Prometheus metrics on this port.")] = None,
) -> None:
    """Run the scheduler in the foreground (SIGTERM/SIGINT stop it cleanly)."""
    from sparkmv.scheduler.loop import run_scheduler

    run_scheduler(state.client(), once, max_concurrent_refreshes, poll_seconds, metrics_port, console)


def main() -> None:
    """Entry point of the ``sparkmv`` script."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)  # typer.Exit(n) inside a command, returned in this mode
    except SparkMvError as exc:
        if state.debug:
            # The plain traceback: rich's highlighted one takes seconds on sqlglot's large frames.
            traceback.print_exc(file=sys.stderr)
        err_console.print(f"error: {exc}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(1)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("error: interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    finally:
        if state._client is not None:
            state._client.close()


if __name__ == "__main__":
    main()
