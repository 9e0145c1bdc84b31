"""The ``sparkmv`` command line (typer). Thin: parse, call the Client, print with rich.

Exit codes: 0 success (a refresh that ends SKIPPED or MERGED is a success); 1 an error
(one ``error: <message>`` line: a :class:`SparkMvError`, a file that cannot be read, an
error from Spark in one line, a synchronous refresh that ends FAILED or CANCELLED, the
first failing statement of a script); 2 a usage error (the usage line and ``error: ...``);
130 interrupted. ``--debug`` shows the traceback. Spark's own log goes to
``<home>/logs/spark.log``, never to the terminal.
"""

from __future__ import annotations

import logging
import sys
import traceback
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

try:  # recent typer vendors click and raises its own copies of click's exceptions
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # type: ignore[assignment,no-redef]

from sparkmv.cli.session import console, err_console, state
from sparkmv.errors import InputFileError, ScriptError, SparkMvError

if TYPE_CHECKING:
    from sparkmv.client.client import Client
    from sparkmv.services.status import MvStatus

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Materialized views that stay fresh on Spark.",
    pretty_exceptions_enable=False,  # main() prints every error as one line
)


class OutputFormat(StrEnum):
    """How query results and listings print (``--format``)."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"


FormatOption = Annotated[OutputFormat, typer.Option("--format", help="table, csv or json.")]
NoRewriteOption = Annotated[
    bool,
    typer.Option(
        "--no-rewrite",
        help="Run queries as written: no query rewrite over materialized views "
        "(as SET enable_materialized_view_rewrite = false).",
    ),
]


def _parse_conf(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--conf expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _print_version(value: bool) -> None:
    """``--version``: print ``sparkmv <version>`` and exit 0 (before any other option acts)."""
    if value:
        from sparkmv import __version__

        typer.echo(f"sparkmv {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    home: Annotated[str | None, typer.Option(help="State directory (SPARKMV_HOME, default ./.sparkmv).")] = None,
    catalog_url: Annotated[
        str | None, typer.Option(help="Catalog database URL (SPARKMV_CATALOG_URL, default SQLite in home).")
    ] = None,
    master: Annotated[
        str | None,
        typer.Option(help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://URL (SPARKMV_SPARK_MASTER)."),
    ] = None,
    remote: Annotated[
        str | None, typer.Option(help="Spark Connect server sc://HOST:PORT instead of a master (SPARKMV_SPARK_REMOTE).")
    ] = None,
    conf: Annotated[list[str] | None, typer.Option(help="Spark configuration key=value (repeatable).")] = None,
    debug: Annotated[bool, typer.Option(help="Show tracebacks and debug logs.")] = False,
    no_rewrite: NoRewriteOption = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Global options."""
    if master and remote:
        raise typer.BadParameter("give --master or --remote, not both", param_hint="'--remote'")
    state.home, state.catalog_url, state.master, state.remote = home, catalog_url, master, remote
    state.conf = _parse_conf(conf or [])
    state.debug = debug
    state.rewrite = not no_rewrite
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("py4j").setLevel(logging.DEBUG if debug else logging.ERROR)
    logging.getLogger("pyspark").setLevel(logging.DEBUG if debug else logging.ERROR)


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
    format: FormatOption = OutputFormat.TABLE,
    no_rewrite: NoRewriteOption = False,
) -> None:
    """Run SQL statements; query results print as a table, CSV or JSON.

    Queries are answered from fresh-enough materialized views when they can be (query
    rewrite) unless --no-rewrite is given (here or before the command).

    A script is parsed whole before its first statement runs; statements then run in
    order and the first one that fails (or whose synchronous refresh ends FAILED or
    CANCELLED) stops the script with exit code 1.
    """
    from sparkmv.sql.script import parse_script

    if (statement is None) == (file is None):
        raise SparkMvError("give one statement or -f FILE")
    text = statement if statement is not None else read_script(file)  # type: ignore[arg-type]
    script = parse_script(text)
    if not script:
        raise SparkMvError("no statement to run" + (f" in {file}" if file is not None else ""))
    if no_rewrite:
        state.rewrite = False
    client = state.client()
    for item in script:
        try:
            result = _progress_runner(client, item.text)
        except Exception as exc:
            if len(script) == 1 or not _is_user_error(exc):
                raise
            where = f"statement {item.number} (line {item.line})"
            raise ScriptError(f"{where} failed: {_one_line(exc)}", item.number, item.line) from exc
        if result.rows is not None:  # read from the catalog alone: printed without Spark
            _print_rows(result.rows.columns, [list(r) for r in result.rows.rows], format)
        elif result.dataframe is not None:
            df = result.dataframe
            rows = [list(r) for r in df.collect()]
            _print_rows(df.columns, rows, format)
        elif result.message:
            console.print(result.message, highlight=False, soft_wrap=True)


def read_script(path: Path) -> str:
    """The text of script ``path`` (UTF-8).

    Raises:
        InputFileError: ``cannot read script <path>: <reason>`` when it is missing, a
            directory, unreadable, or not text.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"cannot read script {path}: {exc.strerror or exc}") from exc
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, data.index(b"\x00"), data.index(b"\x00") + 1, "NUL byte")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"cannot read script {path}: not a UTF-8 text file (byte {exc.start})") from exc


@app.command()
def status(
    name: Annotated[str | None, typer.Argument(help="One MV (default: all).")] = None,
    format: FormatOption = OutputFormat.TABLE,
    check: Annotated[
        bool, typer.Option("--check", help="Exit 1 when an MV is past its freshness_error_after (for cron and CI).")
    ] = False,
) -> None:
    """The materialized views: state, rows, partitions, last refresh duration, freshness (and
    its WARN / ERROR past ``freshness_warn_after`` / ``freshness_error_after``); then (as a
    table) the other datasets of the pipelines run: Python datasets, views, sinks."""
    from sparkmv.cli.render import pipeline_dataset_rows, status_rows
    from sparkmv.names import ObjectName

    client = state.client()
    datasets = client.pipeline_datasets()
    wanted = ObjectName.parse(name) if name else None
    if wanted is not None and any(d.name == wanted for d in datasets) and not client.status_has(wanted):
        cols, rows = pipeline_dataset_rows([d for d in datasets if d.name == wanted], set())
        _print_rows(cols, rows, format, title="pipeline datasets")
        return
    statuses = client.status(name)
    cols, rows = status_rows(statuses)
    _print_rows(cols, rows, format, title="materialized views")
    others = pipeline_dataset_rows(datasets, {s.name for s in statuses})
    if wanted is None and others[1] and format == OutputFormat.TABLE:
        _print_rows(*others, format, title="pipeline datasets")
    late = [s for s in statuses if s.freshness_alert == "ERROR"]
    if check and late:
        names = ", ".join(f"{s.name} ({_staleness_words(s)})" for s in late)
        _error(f"{len(late)} materialized view(s) past freshness_error_after: {names}")
        raise typer.Exit(1)


@app.command()
def runs(
    name: Annotated[str, typer.Argument(help="The MV or table.")],
    chunks: Annotated[bool, typer.Option(help="Also list each chunk of the newest run.")] = True,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Newest runs to list (1 to 10000).")] = 50,
    format: FormatOption = OutputFormat.TABLE,
) -> None:
    """The refresh runs of one object, newest first, their expectations' results (rows passed
    and failed per run), and the chunks of the newest run that has any."""
    from sparkmv.cli.render import chunk_rows, expectation_rows, run_rows

    client = state.client()
    all_runs = client.runs(name, limit)
    cols, rows = run_rows(all_runs)
    _print_rows(cols, rows, format, title=f"refresh runs of {name}")
    results = client.expectation_results(name, [r.run_id for r in all_runs])
    if results:
        cols, rows = expectation_rows(results)
        _print_rows(cols, rows, format, title=f"expectations of {name}")
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
    """The TPC-H demo: generate data, create three MVs, refresh, check against DuckDB."""
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


@app.command()
def ui(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free port).")] = 8765,
    allow_actions: Annotated[
        bool, typer.Option(help="Offer refresh, cancel, pause and resume (POST with the token printed here).")
    ] = False,
) -> None:
    """Serve the web UI: the MV graph, freshness, runs and live progress (no Spark is started)."""
    import importlib

    from sparkmv.config import Settings

    # The ui sits beside the cli (layer contract): loaded by name, as the demo is.
    server = importlib.import_module("sparkmv.ui.server")
    create_app = importlib.import_module("sparkmv.ui.app").create_app
    server.check_catalog_exists(Settings.resolve(state.home, state.catalog_url).catalog_url)
    client = state.client(recover=False)  # recovery would start Spark: the scheduler does it
    server.serve(
        lambda token: create_app(client, allow_actions=allow_actions, token=token),
        host,
        port,
        allow_actions,
        _print_flushed,
    )


@app.command("jvm-archive")
def jvm_archive(
    if_missing: Annotated[bool, typer.Option(help="Build only when none exists for this Java and Spark.")] = False,
) -> None:
    """Build this machine's class-data archive of the local Spark driver JVM: later cold runs
    load Spark's classes from it (seconds faster). Keyed by the Java runtime and Spark's jars;
    rebuild after upgrading either (`make install` does)."""
    from sparkmv.cli.jvm_archive import build, existing
    from sparkmv.config import Settings

    settings = Settings.resolve(state.home, state.catalog_url, state.master, state.conf)
    path = existing(settings.spark_conf) if if_missing else None
    path = path or build(settings.spark_master, settings.spark_conf)
    console.print(f"JVM archive: {path} ({path.stat().st_size / 2**20:.0f} MiB)", highlight=False)


def _add_pipeline_commands() -> None:
    """``sparkmv pipeline ...`` (in :mod:`sparkmv.cli.pipeline`) and ``sparkmv events``
    (:mod:`sparkmv.cli.events`)."""
    from sparkmv.cli.pipeline import pipeline_app

    app.add_typer(pipeline_app, name="pipeline")
    from sparkmv.cli.events import events_command

    app.command("events")(events_command)


_add_pipeline_commands()


def _print_flushed(line: str) -> None:
    """Print a line at once, also into a pipe (whoever started the server waits for it)."""
    console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.file.flush()


def main() -> None:
    """Entry point of the ``sparkmv`` script: runs the command and turns every error into
    one ``error:`` line and an exit code (see the module docstring)."""
    code = 0
    try:
        result = app(standalone_mode=False, prog_name="sparkmv")
        if isinstance(result, int):
            code = result  # typer.Exit(n) inside a command, returned in this mode
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        _error("interrupted")
        code = 130
    except NoArgsIsHelpError:
        code = 2  # the help was printed: nothing was asked for
    except UsageError as exc:
        usage = exc.ctx.get_usage() if exc.ctx is not None else "Usage: sparkmv [OPTIONS] COMMAND [ARGS]..."
        err_console.print(usage, highlight=False, markup=False, soft_wrap=True)
        _error(exc.format_message())
        code = 2
    except ClickException as exc:
        _error(exc.format_message())
        code = exc.exit_code
    except Exception as exc:
        code = _report(exc)
    finally:
        if state._client is not None:
            if state.debug and state._client.runtime.has_spark and code == 0:
                _print_log_path(state._client.settings.home)
            state._client.close()
    if code:
        sys.exit(code)


def _report(exc: Exception) -> int:
    """Print a command's error as one line (the traceback too with --debug); exit code 1.

    An error that is neither sparkmv's nor Spark's is a bug: it keeps its traceback.
    """
    from sparkmv.storage.spark_log import is_spark_error

    spark_error = is_spark_error(exc)
    if not _is_user_error(exc):
        raise exc
    if state.debug:
        # The plain traceback: rich's highlighted one takes seconds on sqlglot's large frames.
        traceback.print_exception(exc, file=sys.stderr)
    _error(_one_line(exc))
    client = state._client
    if (client is not None and client.runtime.has_spark) or spark_error:
        _print_log_path(client.settings.home if client is not None else Path(state.home or ".sparkmv").absolute())
    return 1


def _is_user_error(exc: BaseException) -> bool:
    """sparkmv's errors and Spark's (a query Spark rejects, a cluster it cannot reach) are
    reported as one line; anything else is a bug and keeps its traceback."""
    from sparkmv.storage.spark_log import is_spark_error

    return isinstance(exc, SparkMvError) or is_spark_error(exc)


def _one_line(exc: BaseException) -> str:
    from sparkmv.storage.spark_log import spark_error_line

    return str(exc) if isinstance(exc, SparkMvError) else spark_error_line(exc)


def _print_log_path(home: Path) -> None:
    from sparkmv.storage.spark_log import log_path

    err_console.print(f"Spark's log: {log_path(home)}", highlight=False, markup=False, soft_wrap=True)


def _error(message: str) -> None:
    err_console.print(f"error: {message}", highlight=False, markup=False, soft_wrap=True)


if __name__ == "__main__":
    main()


def _staleness_words(st: MvStatus) -> str:
    """How late an MV is, for ``sparkmv status --check``."""
    return f"{st.staleness_seconds:.0f} s stale" if st.last_refresh_end is not None else "never refreshed"
