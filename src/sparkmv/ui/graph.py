"""The dependency graph as server-side SVG.

Layout: Graphviz ``dot`` (Debian's ``graphviz``) places fixed-size nodes left to right
(``-Tplain``); without ``dot`` a layered layout of our own (layer = longest path from a base
table) is used. Layouts depend only on the graph's structure and are cached, so a state
change redraws without a new layout. Every text is escaped (markupsafe).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from markupsafe import escape

from sparkmv.ui.model import ObjectView

NODE_W, NODE_H = 3.0, 1.0  # inches (dot's unit); 72 px per inch
PX = 72.0
MARGIN = 12.0
COLOURS = {
    "fresh": ("#e3f4e1", "#2e7d32"),
    "stale": ("#fff4d6", "#b26a00"),
    "refreshing": ("#e1ecfb", "#1d5fbf"),
    "paused": ("#ece6f6", "#6a4c9c"),
    "failed": ("#fde3e1", "#c62828"),
    "inactive": ("#e8e8e8", "#616161"),
    "base table": ("#ffffff", "#455a64"),
}


@dataclass(frozen=True)
class Layout:
    """Node centres and edge polylines in px (y down), and the drawing's size in px."""

    nodes: dict[str, tuple[float, float]]
    edges: dict[tuple[str, str], list[tuple[float, float]]]
    width: float
    height: float


_CACHE: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], Layout] = {}
_CACHE_LOCK = threading.Lock()


def _dot_layout(names: Sequence[str], edges: Sequence[tuple[str, str]], dot: str) -> Layout:
    ids = {n: f"n{i}" for i, n in enumerate(names)}
    back = {v: k for k, v in ids.items()}
    lines = [
        "digraph g {",
        "rankdir=LR; nodesep=0.25; ranksep=0.9;",
        f'node [shape=box fixedsize=true width={NODE_W} height={NODE_H} label=""];',
    ]
    lines += [f"{ids[n]};" for n in names]
    lines += [f"{ids[a]} -> {ids[b]};" for a, b in edges]
    lines.append("}")
    out = subprocess.run([dot, "-Tplain"], input="\n".join(lines), capture_output=True, text=True, check=True).stdout
    height = 0.0
    width = 0.0
    nodes: dict[str, tuple[float, float]] = {}
    raw_edges: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for line in out.splitlines():
        f = line.split()
        if f[0] == "graph":
            width, height = float(f[2]) * PX, float(f[3]) * PX
        elif f[0] == "node":
            nodes[back[f[1]]] = (float(f[2]) * PX, height - float(f[3]) * PX)
        elif f[0] == "edge":
            n = int(f[3])
            pts = [(float(f[4 + 2 * i]) * PX, height - float(f[5 + 2 * i]) * PX) for i in range(n)]
            raw_edges[(back[f[1]], back[f[2]])] = pts
    return Layout(nodes, raw_edges, width, height)


def _own_layout(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Layers by longest path from a source, nodes of a layer stacked in name order."""
    preds: dict[str, list[str]] = {n: [] for n in names}
    for a, b in edges:
        preds[b].append(a)
    layer: dict[str, int] = {}

    def depth(n: str, seen: frozenset[str] = frozenset()) -> int:
        if n not in layer:
            layer[n] = 1 + max((depth(p, seen | {n}) for p in preds[n] if p not in seen), default=-1)
        return layer[n]

    for n in names:
        depth(n)
    columns: dict[int, list[str]] = {}
    for n in names:
        columns.setdefault(layer[n], []).append(n)
    col_w, row_h = (NODE_W + 1.0) * PX, (NODE_H + 0.3) * PX
    nodes = {
        n: (col * col_w + NODE_W * PX / 2, row * row_h + NODE_H * PX / 2)
        for col, members in columns.items()
        for row, n in enumerate(members)
    }
    lines = {
        (a, b): [(nodes[a][0] + NODE_W * PX / 2, nodes[a][1]), (nodes[b][0] - NODE_W * PX / 2, nodes[b][1])]
        for a, b in edges
    }
    width = (max(columns, default=0) + 1) * col_w
    height = max((len(m) for m in columns.values()), default=1) * row_h
    return Layout(nodes, lines, width, height)


def layout(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """The layout of this graph (cached by structure): ``dot`` when installed, else our own."""
    key = (tuple(names), tuple(sorted(edges)))
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    dot = shutil.which("dot")
    result = None
    if dot is not None:
        try:
            result = _dot_layout(names, edges, dot)
        except (OSError, subprocess.CalledProcessError, ValueError, IndexError, KeyError):
            result = None  # a dot that fails: draw with our own layout all the same
    if result is None:
        result = _own_layout(names, edges)
    with _CACHE_LOCK:
        if len(_CACHE) > 32:
            _CACHE.clear()
        _CACHE[key] = result
    return result


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_svg(v: ObjectView, cx: float, cy: float) -> str:
    w, h = NODE_W * PX, NODE_H * PX
    x, y = cx - w / 2, cy - h / 2
    fill, stroke = COLOURS.get(v.state, COLOURS["base table"])
    href = f"/objects/{quote(v.name)}"
    parts = [
        f'<a href="{escape(href)}" class="node" data-name="{escape(v.name)}" data-state="{escape(v.state)}">',
        f"<title>{escape(v.name)}: {escape(v.detail)}</title>",
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="6" fill="{fill}" stroke="{stroke}"'
        f' stroke-width="{3 if v.state == "failed" else 1.5}"/>',
        f'<text x="{x + 8:.1f}" y="{y + 20:.1f}" class="n">{escape(_short(v.name, 30))}</text>',
        f'<text x="{x + 8:.1f}" y="{y + 37:.1f}" class="k">{escape(v.kind)}</text>',
        f'<text x="{x + 8:.1f}" y="{y + 55:.1f}" class="s" fill="{stroke}">{escape(_short(v.detail, 38))}</text>',
    ]
    if v.state in ("refreshing", "paused") and v.chunks_planned:
        frac = min(1.0, (v.chunks_done or 0) / v.chunks_planned)
        bw = w - 16
        parts.append(f'<rect x="{x + 8:.1f}" y="{y + h - 12:.1f}" width="{bw:.1f}" height="6" fill="#ffffff"/>')
        parts.append(
            f'<rect class="bar" x="{x + 8:.1f}" y="{y + h - 12:.1f}" width="{bw * frac:.1f}" height="6"'
            f' fill="{stroke}"/>'
        )
    parts.append("</a>")
    return "".join(parts)


def _edge_path(pts: list[tuple[float, float]]) -> str:
    """dot's edges are cubic Bézier control points (1 + 3k of them); ours are straight lines."""
    head = f"M {pts[0][0]:.1f},{pts[0][1]:.1f}"
    if len(pts) > 1 and (len(pts) - 1) % 3 == 0:
        rest = pts[1:]
        curves = [rest[i : i + 3] for i in range(0, len(rest), 3)]
        return head + "".join(" C " + " ".join(f"{x:.1f},{y:.1f}" for x, y in c) for c in curves)
    return head + "".join(f" L {x:.1f},{y:.1f}" for x, y in pts[1:])


def graph_svg(views: Sequence[ObjectView]) -> str:
    """The graph of ``views`` (edges base table -> reader) as one ``<svg>`` element."""
    names = [v.name for v in views]
    present = set(names)
    edges = [(b, v.name) for v in views for b in v.base_tables if b in present]
    lay = layout(names, edges)
    w, h = lay.width + 2 * MARGIN, lay.height + 2 * MARGIN
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="graph" width="{w:.0f}" height="{h:.0f}"'
        f' viewBox="{-MARGIN:.0f} {-MARGIN:.0f} {w:.0f} {h:.0f}" role="img" aria-label="dependency graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8"'
        ' orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#78909c"/></marker></defs>',
    ]
    for pts in lay.edges.values():
        out.append(f'<path d="{_edge_path(pts)}" fill="none" stroke="#78909c" marker-end="url(#arrow)"/>')
    for v in views:
        cx, cy = lay.nodes[v.name]
        out.append(_node_svg(v, cx, cy))
    out.append("</svg>")
    return "\n".join(out)
