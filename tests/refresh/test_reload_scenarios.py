"""Refreshable tables: the file scenarios, with an MV on top and the changelog."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.refresh.reload_helpers import changelog_ops, contents, refresh, run_counts, write_csv

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _create(client, name: str, src: Path, on_conflict: str = "OVERWRITE") -> None:  # type: ignore[no-untyped-def]
    client.sql(
        f"CREATE TABLE {name} (id int, v string, PRIMARY KEY (id)) ON CONFLICT {on_conflict} "
        f"WITH (connector = 'files', path = '{src}', format = 'csv', match_pattern = '*.csv', "
        f"refresh_mode = 'FULL_RELOAD', vnode_count = '4')"
    )


def test_file_scenarios(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    src.mkdir()
    _create(client, "t", src)
    _create(client, "ti", src, "IGNORE")
    assert contents(client, "SELECT * FROM t") == []  # empty until the first refresh
    client.sql("CREATE MATERIALIZED VIEW mv AS SELECT v, count(*) AS n FROM t GROUP BY v")

    def step(expected: list[tuple[object, ...]], counts: tuple[int, int, int]) -> None:
        run = refresh(client, "t")
        assert contents(client, "SELECT * FROM t") == sorted(expected)
        assert run_counts(client, run.run_id) == counts
        i, u, d = counts
        # each update is a U (new row) and a UB (old row)
        ops = {k: n for k, n in (("I", i), ("U", u), ("UB", u), ("D", d)) if n}
        assert changelog_ops(client, "t", run.run_id) == ops
        client.refresh("mv")
        # the MV's distinct set and count(*) follow the table
        assert contents(client, "SELECT v FROM mv") == sorted({(r[1],) for r in expected})
        assert contents(client, "SELECT coalesce(sum(n), 0) FROM mv") == [(len(expected),)]

    # 1. first refresh of two files
    write_csv(src, "a.csv", [(1, "a")])
    write_csv(src, "b.csv", [(2, "b")])
    (src / "ignored.txt").write_text("not matched\n")
    step([(1, "a"), (2, "b")], (2, 0, 0))
    assert [c for c in client.sql("SELECT * FROM t").columns] == ["id", "v"]  # _vnode hidden

    # 2. add two files; then a refresh without change applies nothing
    write_csv(src, "c.csv", [(3, "c")])
    write_csv(src, "d.csv", [(4, "d")])
    step([(1, "a"), (2, "b"), (3, "c"), (4, "d")], (2, 0, 0))
    snap_before = client.runtime.iceberg.load(_name("t")).current_snapshot().snapshot_id
    step([(1, "a"), (2, "b"), (3, "c"), (4, "d")], (0, 0, 0))
    assert client.runtime.iceberg.load(_name("t")).current_snapshot().snapshot_id == snap_before

    # 3. rewrite two files -> 2 updates
    write_csv(src, "a.csv", [(1, "a2")])
    write_csv(src, "b.csv", [(2, "b2")])
    step([(1, "a2"), (2, "b2"), (3, "c"), (4, "d")], (0, 2, 0))

    # 4. delete two files -> 2 deletes
    (src / "c.csv").unlink()
    (src / "d.csv").unlink()
    step([(1, "a2"), (2, "b2")], (0, 0, 2))

    # 5. mixed: one rewritten, one removed, new rows, a file with the same key twice
    refresh(client, "ti")
    assert contents(client, "SELECT * FROM ti") == [(1, "a2"), (2, "b2")]
    write_csv(src, "a.csv", [(1, "a3")])
    (src / "b.csv").unlink()
    write_csv(src, "e.csv", [(5, "e1"), (6, "f"), (5, "e2")])
    write_csv(src, "f.csv", [(6, "f2")])
    step([(1, "a3"), (5, "e2"), (6, "f2")], (2, 1, 1))
    run = refresh(client, "ti")
    # IGNORE: first duplicate wins, the existing row 1 keeps its values
    assert contents(client, "SELECT * FROM ti") == [(1, "a2"), (5, "e1"), (6, "f")]
    assert run_counts(client, run.run_id) == (2, 0, 1)

    # 6. all files deleted
    for f in src.glob("*.csv"):
        f.unlink()
    step([], (0, 0, 3))

    # 7. fresh rows after empty
    write_csv(src, "g.csv", [(7, "g"), (8, "h")])
    step([(7, "g"), (8, "h")], (2, 0, 0))

    state = client.sql("SELECT * FROM sparkmv.refresh_table_state WHERE table_name = 't'").collect()[0]
    assert state["current_status"] == "IDLE"
    assert (state["rows_inserted"], state["rows_updated"], state["rows_deleted"]) == (2, 0, 0)
    assert state["last_success_time"] is not None
    progress = client.sql(f"SELECT * FROM sparkmv.refresh_progress WHERE run_id = {state['last_run_id']}").collect()
    assert sorted(r["vnode"] for r in progress) == [0, 1, 2, 3]
    assert all(r["is_completed"] for r in progress)
    # staging removed: only published files remain under the runs' directories
    rt = client.runtime
    location = rt.iceberg.load(_name("t")).location().removeprefix("file://")
    referenced = rt.iceberg.referenced_files(_name("t")) | rt.iceberg.referenced_files(_name("t__changelog"))
    left = {str(p) for p in Path(location).glob("data/run-*/**/*.parquet")}
    assert left and left <= referenced


def _name(text: str):  # type: ignore[no-untyped-def]
    from sparkmv.names import ObjectName

    return ObjectName.parse(text)


def test_composite_key_remove_readd(client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    client.sql(
        f"CREATE TABLE ck (a int, b string, v int, PRIMARY KEY (a, b)) "
        f"WITH (connector = 'files', path = '{_mk(src)}', format = 'csv', refresh_mode = 'FULL_RELOAD', "
        f"vnode_count = '4')"
    )
    client.sql("CREATE MATERIALIZED VIEW ckd AS SELECT DISTINCT a, b, v FROM ck")
    base = [(1, "x", 10), (2, "y", 20)]
    header = "a,b,v"

    def check(rows: list[tuple[object, ...]], counts: tuple[int, int, int]) -> None:
        write_csv(src, "data.csv", rows, header)
        run = refresh(client, "ck")
        assert run_counts(client, run.run_id) == counts
        assert contents(client, "SELECT * FROM ck") == sorted(rows)
        client.refresh("ckd")
        assert contents(client, "SELECT * FROM ckd") == sorted(rows)

    check(base, (2, 0, 0))
    check(base[:1], (0, 0, 1))  # remove a row
    check(base, (1, 0, 0))  # re-add the identical row
    check(base[:1], (0, 0, 1))  # remove it again
    check([base[0], (2, "y", 21)], (1, 0, 0))  # re-add with new values
    check([base[0], (2, "y", 22)], (0, 1, 0))


def _mk(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
