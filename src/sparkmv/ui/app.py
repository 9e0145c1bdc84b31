"""``sparkmv ui``: the ASGI web application (Starlette, Jinja2 templates with autoescape).

Pages: ``/`` (the graph and a chart of the newest runs), ``/objects/{name}`` (with its refresh
history chart and, for a dataset with expectations, their newest results and a chart of the rows
failed per run), ``/runs``, ``/runs/{run_id}``, ``/rewrite`` (the rewrite log, ``?mv=``
filters); JSON: ``/api/objects``, ``/api/objects/{name}``, ``/api/objects/{name}/progress``,
``/api/runs``. It reads the catalog through the client's runtime and the status service and
never starts Spark.

Actions (``POST /objects/{name}/{refresh|cancel|pause|resume}``) are refused with 403 unless
the app was made with ``allow_actions`` and the request carries the start-up token (form
field ``token`` or header ``X-Sparkmv-Token``); they write the same catalog rows as the CLI:
a refresh is queued for the scheduler (``REFRESH ... WITH ASYNC MODE``), cancel / pause /
resume are control rows.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from sparkmv.catalog import ObjectKind, RunState
from sparkmv.errors import InvalidNameError, ObjectNotFoundError, SparkMvError
from sparkmv.names import ObjectName
from sparkmv.ui.charts import TECHNIQUE_COLOURS, chart_runs, history_svg, summary_svg
from sparkmv.ui.detail import object_detail
from sparkmv.ui.expectation_chart import expectation_runs, expectations_svg
from sparkmv.ui.graph import COLOURS, graph_svg
from sparkmv.ui.model import STATES, FreshnessCache, display, object_views, run_json, runs_page
from sparkmv.ui.pages import REWRITE_ROWS, recent_runs, rewrite_rows, run_detail

if TYPE_CHECKING:
    from sparkmv.client.client import Client

TOKEN_COOKIE = "sparkmv_token"
ACTIONS = ("refresh", "cancel", "pause", "resume")
RUN_STATES = [s.value for s in RunState]
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"], default=True),
)


@dataclass
class UiState:
    """What one app serves: the client (its catalog), whether actions are allowed, the token."""

    client: Client
    allow_actions: bool
    token: str
    cache: FreshnessCache = field(default_factory=FreshnessCache)

    def warm(self) -> None:
        """Compute every MV's freshness, the graph's layout and the templates once (before
        serving), so that no page waits for them; afterwards freshness is renewed in the
        background (:class:`FreshnessCache`) and a layout is made when the graph changes."""
        graph_svg(object_views(self.client.runtime, self.cache))
        for name in ("graph.html", "object.html", "runs.html", "error.html", "run.html", "rewrite.html"):
            _TEMPLATES.get_template(name)


def _render(request: Request, template: str, status: int = 200, **values: Any) -> HTMLResponse:
    ui: UiState = request.app.state.ui
    values.update(
        colours=COLOURS,
        techniques=TECHNIQUE_COLOURS,
        states=STATES,
        authorized=_authorized(request),
        allow_actions=ui.allow_actions,
    )
    html = _TEMPLATES.get_template(template).render(request=request, **values)
    response = HTMLResponse(html, status_code=status)
    given = request.query_params.get("token")
    if given is not None and secrets.compare_digest(given, ui.token):
        response.set_cookie(TOKEN_COOKIE, ui.token, httponly=True, samesite="strict")
    return response


def _authorized(request: Request, form_token: str | None = None) -> bool:
    """True when actions are on and the request carries the token (query, cookie, form or header)."""
    ui: UiState = request.app.state.ui
    if not ui.allow_actions:
        return False
    for given in (
        form_token,
        request.headers.get("x-sparkmv-token"),
        request.query_params.get("token"),
        request.cookies.get(TOKEN_COOKIE),
    ):
        if given and secrets.compare_digest(given, ui.token):
            return True
    return False


def _not_found(request: Request, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=404)
    return _render(request, "error.html", status=404, title="not found", message=message)


def graph_page(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    views = object_views(ui.client.runtime, ui.cache)
    counts = {s: sum(1 for v in views if v.state == s) for s in STATES}
    summary = summary_svg(recent_runs(ui.client.runtime))
    return _render(
        request, "graph.html", svg=graph_svg(views), views=views, counts=counts, summary=summary, title="graph"
    )


def run_page(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    try:
        run = run_detail(ui.client.runtime, int(request.path_params["run_id"]))
    except ObjectNotFoundError as exc:
        return _not_found(request, str(exc))
    return _render(request, "run.html", run=run, title=f"run {run['run_id']}")


def rewrite_page(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    mv = request.query_params.get("mv") or None
    rows = rewrite_rows(ui.client.runtime, mv)
    return _render(request, "rewrite.html", rows=rows, mv=mv, limit=REWRITE_ROWS, title="query rewrite")


def pipelines_page(request: Request) -> Response:
    """Every dataset of the pipeline projects run (``sparkmv.pipeline_datasets``); the ones
    that are sparkmv objects link to their page."""
    ui: UiState = request.app.state.ui
    rt = ui.client.runtime
    rows = rt.catalog.pipelines.list()
    with rt.catalog.read() as s:
        objects = {ObjectName(r.namespace, r.name).display for r in rt.catalog.objects.list(s)}
    return _render(request, "pipelines.html", rows=rows, objects=objects, title="pipelines")


def graph_svg_fragment(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    return Response(graph_svg(object_views(ui.client.runtime, ui.cache)), media_type="image/svg+xml")


def object_page(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    name = request.path_params["name"]
    try:
        detail = object_detail(ui.client.runtime, ui.cache, name)
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))
    message = request.query_params.get("message")
    history = history_svg(chart_runs(detail["runs"])) if detail["runs"] else None
    expected = expectations_svg(expectation_runs(detail["expectations"])) if detail["expectations"] else None
    return _render(
        request,
        "object.html",
        d=detail,
        o=detail["object"],
        message=message,
        history=history,
        expectations_chart=expected,
        title=name,
    )


def _runs_args(request: Request) -> tuple[str | None, str | None, int, int]:
    q = request.query_params
    name = q.get("name") or None
    state = q.get("state") or None
    if state is not None and state.upper() not in RUN_STATES:
        raise SparkMvError(f"unknown run state {state!r}: one of {', '.join(RUN_STATES)}")
    try:
        page = max(1, int(q.get("page") or 1))
        per_page = min(500, max(1, int(q.get("per_page") or 50)))
    except ValueError as exc:
        raise SparkMvError("page and per_page must be whole numbers") from exc
    return name, state.upper() if state else None, page, per_page


def runs_html(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    try:
        name, state, page, per_page = _runs_args(request)
        result = runs_page(ui.client.runtime, name, state, page, per_page)
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))
    except SparkMvError as exc:
        return _render(request, "error.html", status=400, title="bad request", message=str(exc))
    return _render(request, "runs.html", r=result, run_states=RUN_STATES, title="runs")


def api_objects(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    return JSONResponse({"objects": [v.to_json() for v in object_views(ui.client.runtime, ui.cache)]})


def api_object(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    try:
        return JSONResponse(object_detail(ui.client.runtime, ui.cache, request.path_params["name"]))
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))


def api_progress(request: Request) -> Response:
    """The object's refresh state and its running (or newest) run: what the page polls."""
    ui: UiState = request.app.state.ui
    rt = ui.client.runtime
    try:
        obj = ObjectName.parse(request.path_params["name"], allow_reserved=True)
        with rt.catalog.read() as s:
            row = rt.catalog.objects.get(s, obj)
            runs = rt.catalog.runs.list(s, row.id, 1)
            current = rt.catalog.runs.by_ids(s, [row.current_run_id] if row.current_run_id else [])
            paused = rt.catalog.control.paused_runs(s, list(current))
            body = {
                "name": display(obj.qualified),
                "refresh_state": row.state,
                "paused": bool(paused),
                "current_run": run_json(next(iter(current.values()))) if current else None,
                "newest_run": run_json(runs[0]) if runs else None,
            }
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))
    return JSONResponse(body)


def api_runs(request: Request) -> Response:
    ui: UiState = request.app.state.ui
    try:
        name, state, page, per_page = _runs_args(request)
        r = runs_page(ui.client.runtime, name, state, page, per_page)
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))
    except SparkMvError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse({"runs": r.runs, "total": r.total, "page": r.page, "per_page": r.per_page, "pages": r.pages})


async def action(request: Request) -> Response:
    """POST an action; 403 (nothing written) without actions on and the token."""
    ui: UiState = request.app.state.ui
    # The forms are url-encoded (no multipart parser needed); a body is never larger than a token.
    body = (await request.body())[:4096].decode("utf-8", "replace")
    token = parse_qs(body).get("token", [None])[0]
    if not _authorized(request, token):
        why = "actions are off (start with --allow-actions)" if not ui.allow_actions else "missing or wrong token"
        return Response(f"forbidden: {why}\n", status_code=403, media_type="text/plain")
    name, verb = request.path_params["name"], request.path_params["action"]
    if verb not in ACTIONS:
        return _not_found(request, f"no action {verb!r}")
    from starlette.concurrency import run_in_threadpool

    try:
        message = await run_in_threadpool(_do_action, ui.client, name, verb)
    except (ObjectNotFoundError, InvalidNameError) as exc:
        return _not_found(request, str(exc))
    except SparkMvError as exc:
        message = f"error: {exc}"
    return RedirectResponse(f"/objects/{quote(name)}?message={quote(message)}", status_code=303)


def _do_action(client: Client, name: str, verb: str) -> str:
    """Write the action's catalog rows through the client, as the CLI does."""
    obj = ObjectName.parse(name)
    if verb == "refresh":
        with client.runtime.catalog.read() as s:
            kind = client.runtime.catalog.objects.get(s, obj).kind
        if kind == ObjectKind.REFRESHABLE_TABLE:
            run = client.request_table_refresh(obj)
        else:
            run = client.request_refresh(obj)
        if run.state == RunState.MERGED:
            return f"refresh of '{obj}' recorded as run {run.run_id}: {run.reason}"
        return f"refresh of '{obj}' queued as run {run.run_id} (the scheduler runs it)"
    return str(getattr(client, verb)(obj))


def create_app(client: Client, allow_actions: bool = False, token: str | None = None) -> Starlette:
    """The web application over ``client``'s catalog.

    Args:
        allow_actions: offer refresh, cancel, pause and resume (POST with the token).
        token: the token actions must carry (default: a new random one, ``app.state.ui.token``).
    """
    routes = [
        Route("/", graph_page),
        Route("/graph.svg", graph_svg_fragment),
        Route("/objects/{name}", object_page),
        Route("/objects/{name}/{action}", action, methods=["POST"]),
        Route("/runs", runs_html),
        Route("/runs/{run_id:int}", run_page),
        Route("/rewrite", rewrite_page),
        Route("/pipelines", pipelines_page),
        Route("/api/objects", api_objects),
        Route("/api/objects/{name}", api_object),
        Route("/api/objects/{name}/progress", api_progress),
        Route("/api/runs", api_runs),
    ]
    # Pages read table metadata only: without pyarrow (and pandas) the process stays small.
    client.runtime.iceberg.read_through_fsspec()
    app = Starlette(routes=routes)
    app.state.ui = UiState(client, allow_actions, token or secrets.token_urlsafe(24))
    return app
