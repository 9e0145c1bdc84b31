"""Dependency order of refreshable objects (pure, no catalog, no Spark).

Nodes are qualified object names; ``deps[n]`` are the objects ``n`` reads. Only edges
between nodes of the graph matter (base tables that are not refreshed, such as external
Parquet tables, are simply absent). Upstream objects come first; a cycle is an error at
CREATE and, if one is found in an old catalog anyway, its members are left out of the
order and reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sparkmv.errors import AnalysisError


def find_cycle(deps: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle of the graph as a closed path ``[a, b, ..., a]``, or None.

    >>> find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    True
    >>> find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    ['a', 'b', 'c', 'a']
    >>> find_cycle({"a": ["a"]})
    ['a', 'a']
    """
    white, grey, black = 0, 1, 2
    colour: dict[str, int] = {}
    for root in sorted(deps):
        if colour.get(root, white) != white:
            continue
        path: list[str] = [root]
        stack = [iter(sorted(deps.get(root, ())))]
        colour[root] = grey
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                stack.pop()
                continue
            state = colour.get(nxt, white)
            if state == grey:
                return [*path[path.index(nxt) :], nxt]
            if state == white:
                colour[nxt] = grey
                path.append(nxt)
                stack.append(iter(sorted(deps.get(nxt, ()))))
    return None


def check_no_cycle(
    name: str,
    bases: Iterable[str],
    deps: Mapping[str, Iterable[str]],
    display: Callable[[str], str] = str,
) -> None:
    """Reject a new or changed object ``name`` reading ``bases`` if that closes a cycle;
    ``display`` turns node names into the names shown in the error.

    Raises:
        AnalysisError: naming the cycle, e.g. ``a -> b -> a``.

    >>> check_no_cycle("a", ["b"], {"b": ["t"]})
    >>> check_no_cycle("a", ["b"], {"b": ["a"]})
    Traceback (most recent call last):
    ...
    sparkmv.errors.AnalysisError: materialized view 'a' would create a dependency cycle: a -> b -> a
    """
    graph = {k: list(v) for k, v in deps.items()}
    graph[name] = list(bases)
    cycle = find_cycle(graph)
    if cycle is not None and name in cycle:
        i = cycle.index(name)
        closed = cycle[i:-1] + cycle[:i] + [name]
        path = " -> ".join(display(n) for n in closed)
        raise AnalysisError(f"materialized view '{display(name)}' would create a dependency cycle: {path}")


def topological_order(deps: Mapping[str, Iterable[str]]) -> tuple[list[str], set[str]]:
    """Nodes upstream first (ties by name), and the nodes left out because of a cycle.

    Edges to names that are not nodes are ignored. Nodes downstream of a cycle are left
    out too (they can never be ordered after it).

    >>> topological_order({"c": ["b"], "b": ["a"], "a": ["t"], "x": []})
    (['a', 'b', 'c', 'x'], set())
    >>> order, cyclic = topological_order({"a": ["b"], "b": ["a"], "c": ["a"], "d": []})
    >>> order, sorted(cyclic)
    (['d'], ['a', 'b', 'c'])
    """
    nodes = set(deps)
    edges = {n: {d for d in deps[n] if d in nodes and d != n} for n in nodes}
    self_loops = {n for n in nodes if n in set(deps[n])}
    indegree = {n: len(edges[n]) for n in nodes}
    downstream: dict[str, set[str]] = {n: set() for n in nodes}
    for n, ds in edges.items():
        for d in ds:
            downstream[d].add(n)
    ready = sorted(n for n in nodes if indegree[n] == 0 and n not in self_loops)
    order: list[str] = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for m in sorted(downstream[n]):
            indegree[m] -= 1
            if indegree[m] == 0 and m not in self_loops:
                ready.append(m)
        ready.sort()
    return order, nodes - set(order)


def downstream_closure(deps: Mapping[str, Iterable[str]], roots: Iterable[str]) -> set[str]:
    """Every node that reads (directly or transitively) one of ``roots``, roots excluded.

    >>> sorted(downstream_closure({"b": ["a"], "c": ["b"], "d": ["x"]}, ["a"]))
    ['b', 'c']
    """
    readers: dict[str, set[str]] = {}
    for n, ds in deps.items():
        for d in ds:
            readers.setdefault(d, set()).add(n)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        for m in readers.get(todo.pop(), ()):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen - set(roots)
