"""Refreshable tables: the changelog carries each change with its retraction (``I`` +1,
``U`` +1 with ``UB`` -1, ``D`` -1 with the old values), on both merge paths, and older
changelog tables gain ``sign`` at their next reload."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.names import ObjectName
from tests.refresh.reload_helpers import changelog_ops, contents, refresh, run_counts, write_csv

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HEADER = "id,v,w"
FIRST = [(1, "a", 10), (2, "b", 20), (3, "c", 30), (4, "d", 40), (5, None, 50), (6, "f", 60)]
# 1 unchanged, 2 and 6 updated, 3 deleted, 4 updated to NULL, 5 updated from NULL, 7 new
SECOND = [(1, "a", 10), (2, "b2", 20), (4, None, 40), (5, "e", 50), (6, "f", 61), (7, "g", 70)]
SECOND_OVERWRITE_LOG = [
    ("D", 3, "c", 30, -1),
    ("I", 7, "g", 70, 1),
    ("U", 2, "b2", 20, 1),
    ("U", 4, None, 40, 1),
    ("U", 5, "e", 50, 1),
    ("U", 6, "f", 61, 1),
    ("UB", 2, "b", 20, -1),
    ("UB", 4, "d", 40, -1),
    ("UB", 5, None, 50, -1),
    ("UB", 6, "f", 60, -1),
]


def _create(client: Any, name: str, src: Path, on_conflict: str = "OVERWRITE") -> None:
    src.mkdir(parents=True, exist_ok=True)
    # merge_batch_rows = 3: several merge batches per run
    client.sql(
        f"CREATE TABLE {name} (id int, v string, w int, PRIMARY KEY (id)) ON CONFLICT {on_conflict} "
        f"WITH (connector = 'files', path = '{src}', format = 'csv', refresh_mode = 'FULL_RELOAD', "
        "vnode_count = '4', merge_batch_rows = '3')"
    )


def _log(client: Any, table: str, run_id: int) -> list[tuple[Any, ...]]:
    """The changelog rows of one run: (op, id, v, w, sign), sorted."""
    return contents(client, f"SELECT op, id, v, w, sign FROM {table}__changelog WHERE run_id = {run_id}")


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: tuple((x is not None, x) for x in r))


def _signed(log: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], int]:
    """The sign-weighted multiset of a run's declared-column rows (zero weights dropped)."""
    total: Counter[tuple[Any, ...]] = Counter()
    for *values, sign in log:
        total[tuple(values[1:])] += sign
    return {k: n for k, n in total.items() if n}


def _difference(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], int]:
    """(after) - (before) as multisets, zero weights dropped."""
    total: Counter[tuple[Any, ...]] = Counter(after)
    total.subtract(Counter(before))
    return {k: n for k, n in total.items() if n}


def _step(client: Any, name: str, src: Path, rows: list[tuple[Any, ...]]) -> tuple[int, list[tuple[Any, ...]]]:
    """Write the source, refresh, check the signed changelog against the table's
    difference and return (run id, the run's changelog rows)."""
    write_csv(src, "data.csv", rows, HEADER)
    before = contents(client, f"SELECT * FROM {name}")
    run = refresh(client, name)
    after = contents(client, f"SELECT * FROM {name}")
    log = _log(client, name, run.run_id)
    assert _signed(log) == _difference(before, after)
    return run.run_id, log


def _general_path_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the reload merge every batch with the general (wide) merge: no staged files
    per vnode, so ON CONFLICT OVERWRITE does not take the narrow merge."""
    import sparkmv.refresh.reload.merge as merge

    real = merge.merge_batch

    def general(*args: Any, **kwargs: Any) -> Any:
        return real(*args[:7], None, *args[8:], **kwargs)

    monkeypatch.setattr(merge, "merge_batch", general)


@pytest.mark.parametrize("path", ["narrow", "general"])
def test_overwrite_changelog_rows(client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:  # type: ignore[no-untyped-def]
    if path == "general":
        _general_path_only(monkeypatch)
    src = tmp_path / "src"
    _create(client, "t", src)
    run_id, log = _step(client, "t", src, FIRST)
    assert _sorted(log) == _sorted([("I", *r, 1) for r in FIRST])

    run_id, log = _step(client, "t", src, SECOND)
    assert contents(client, "SELECT * FROM t") == _sorted(SECOND)
    assert _sorted(log) == _sorted(SECOND_OVERWRITE_LOG)
    assert run_counts(client, run_id) == (1, 4, 1)  # one update counts once, not as U + UB
    assert changelog_ops(client, "t", run_id) == {"I": 1, "U": 4, "UB": 4, "D": 1}

    run_id, log = _step(client, "t", src, [])  # every row deleted, with its old values
    assert _sorted(log) == _sorted([("D", *r, -1) for r in SECOND])
    assert run_counts(client, run_id) == (0, 0, 6)

    run_id, log = _step(client, "t", src, [])  # nothing changes: no changelog rows
    assert log == []


def test_ignore_changelog_rows(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    _create(client, "ti", src, "IGNORE")
    _step(client, "ti", src, FIRST)
    run_id, log = _step(client, "ti", src, SECOND)
    # IGNORE: existing rows keep their values, so only the insert and the delete
    assert contents(client, "SELECT * FROM ti") == _sorted([r for r in FIRST if r[0] != 3] + [(7, "g", 70)])
    assert _sorted(log) == _sorted([("D", 3, "c", 30, -1), ("I", 7, "g", 70, 1)])
    assert run_counts(client, run_id) == (1, 0, 1)

    run_id, log = _step(client, "ti", src, [])
    assert _sorted(log) == _sorted([("D", *r, -1) for r in FIRST if r[0] != 3] + [("D", 7, "g", 70, -1)])


def test_old_changelog_gains_sign(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    _create(client, "t", src)
    write_csv(src, "data.csv", FIRST[:3], HEADER)
    first = refresh(client, "t").run_id
    # rebuild the changelog as an older sparkmv made it: no sign, deletes without values
    rt = client.runtime
    log_name = ObjectName.parse("t__changelog")
    rt.iceberg.drop_table(log_name)
    old_schema = pa.schema(
        [("op", pa.string()), ("id", pa.int32()), ("v", pa.string()), ("w", pa.int32()), ("run_id", pa.int64())]
    )
    old_rows = [("I", 1, "a", 10, first), ("I", 2, "b", 20, first), ("I", 3, "c", 30, first), ("D", 9, None, None, 0)]
    table = rt.iceberg.create_table(log_name, old_schema, None)
    table.append(pa.Table.from_pylist([dict(zip(old_schema.names, r, strict=True)) for r in old_rows], old_schema))
    assert "sign" not in rt.iceberg.load(log_name).schema().column_names

    write_csv(src, "data.csv", [(1, "a2", 10), (2, "b", 20), (4, "d", 40)], HEADER)
    second = refresh(client, "t").run_id
    assert rt.iceberg.load(log_name).schema().column_names == ["op", "id", "v", "w", "run_id", "sign"]
    everything = contents(client, "SELECT op, id, v, w, run_id, sign FROM t__changelog")
    assert _sorted(everything) == _sorted(
        [(*r, None) for r in old_rows]  # kept, sign NULL
        + [
            ("D", 3, "c", 30, second, -1),
            ("I", 4, "d", 40, second, 1),
            ("U", 1, "a2", 10, second, 1),
            ("UB", 1, "a", 10, second, -1),
        ]
    )
    # the next reload finds sign there
    write_csv(src, "data.csv", [(1, "a2", 10)], HEADER)
    third = refresh(client, "t").run_id
    assert _sorted(_log(client, "t", third)) == _sorted([("D", 2, "b", 20, -1), ("D", 4, "d", 40, -1)])


def test_old_changelog_gains_sign_without_changes(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    _create(client, "t", src)
    write_csv(src, "data.csv", FIRST[:1], HEADER)
    refresh(client, "t")
    rt = client.runtime
    log_name = ObjectName.parse("t__changelog")
    rt.iceberg.drop_table(log_name)
    old_schema = pa.schema(
        [("op", pa.string()), ("id", pa.int32()), ("v", pa.string()), ("w", pa.int32()), ("run_id", pa.int64())]
    )
    rt.iceberg.create_table(log_name, old_schema, None)
    run = refresh(client, "t")  # nothing changed: no changelog rows, but the schema evolves
    assert run_counts(client, run.run_id) == (0, 0, 0)
    assert rt.iceberg.load(log_name).schema().column_names == ["op", "id", "v", "w", "run_id", "sign"]
    assert contents(client, "SELECT * FROM t__changelog") == []
