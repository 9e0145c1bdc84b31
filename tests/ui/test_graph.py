"""The graph's layout (``dot`` or our own layered one) and its SVG."""

from __future__ import annotations

import shutil

import pytest

from sparkmv.ui import graph
from sparkmv.ui.graph import NODE_W, PX, graph_svg, layout
from sparkmv.ui.model import ObjectView

NAMES = ["a", "b", "c", "d"]
EDGES = [("a", "c"), ("b", "c"), ("c", "d")]


def _clear_cache() -> None:
    graph._CACHE.clear()


def test_own_layout_puts_each_node_right_of_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_cache()
    monkeypatch.setattr(graph.shutil, "which", lambda _name: None)
    lay = layout(NAMES, EDGES)
    column = {n: round(x / ((NODE_W + 1.0) * PX) - 0.5 * NODE_W / (NODE_W + 1.0)) for n, (x, _y) in lay.nodes.items()}
    assert column == {"a": 0, "b": 0, "c": 1, "d": 2}
    assert set(lay.edges) == set(EDGES)
    _clear_cache()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed (make install-dev)")
def test_dot_layout_left_to_right() -> None:
    _clear_cache()
    lay = layout(NAMES, EDGES)
    assert lay.nodes["a"][0] < lay.nodes["c"][0] < lay.nodes["d"][0]
    assert set(lay.edges) == set(EDGES) and all(len(p) >= 2 for p in lay.edges.values())
    assert layout(NAMES, list(reversed(EDGES))) is lay  # cached by structure
    _clear_cache()


def test_svg_names_state_in_text_and_escapes() -> None:
    views = [
        ObjectView("t", "base table", "base table", "base table"),
        ObjectView("m", "materialized view", "failed", "failed: <b>x</b>", base_tables=["t"]),
        ObjectView(
            "r",
            "materialized view",
            "refreshing",
            "refreshing: run 3, chunk 1 of 4",
            base_tables=["m"],
            chunks_done=1,
            chunks_planned=4,
        ),
    ]
    svg = graph_svg(views)
    assert svg.startswith("<svg") and svg.count('class="node"') == 3
    assert "failed: &lt;b&gt;x&lt;/b&gt;" in svg and "<b>" not in svg
    assert 'data-name="r" data-state="refreshing"' in svg and 'class="bar"' in svg
    assert svg.count("marker-end=") == 2  # two edges
