"""The semi-join reduction of a correlation key's touched keys (TPC-H Q17): an
unchanged bound reference with a filter of its own keeps only the touched keys some row of
it passing the filter holds; the other keys touch no row of the relation, old or new. After
every refresh the MV equals DuckDB's result of its query over what pyiceberg reads now."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from sparkmv.names import ObjectName
from sparkmv.refresh.incremental import correlated, reduced_state
from tests.helpers import rows_of
from tests.refresh.lake import Lake

pytestmark = pytest.mark.spark

# TPC-H Q17's shape: dim is the part table, its brand filter keeps 1 key in 10.
QUERY = (
    "SELECT sum(f.e) AS s, count(*) AS n FROM {p}fact f, {p}dim d WHERE d.k = f.k AND d.brand = 'B1' "
    "AND f.v < (SELECT 0.8 * avg(g.v) FROM {p}fact g WHERE g.k = d.k)"
)
SCHEMAS = {
    "fact": pa.schema([("k", pa.int64()), ("v", pa.int64()), ("e", pa.int64())]),
    "dim": pa.schema([("k", pa.int64()), ("brand", pa.string())]),
}


def _fact_rows(keys: list[int], salt: int) -> list[tuple[int, int, int]]:
    return [(k, (k * 7 + j * 13 + salt) % 50, k * 100 + j + salt) for k in keys for j in range(4)]


def _setup(make_client: Any, tmp_path: Path, keys: int, every: int) -> tuple[Any, Lake]:
    """fact rows for ``keys`` keys, dim's brand B1 for every ``every``-th key, and the MV."""
    client = make_client(tmp_path / "home")
    lake = Lake(client, tmp_path, SCHEMAS, QUERY)
    lake.append("dim", [(k, "B1" if k % every == 0 else "B2") for k in range(keys)])
    lake.append("fact", _fact_rows(list(range(keys)), 0))
    query = QUERY.format(p="lake.db.")
    client.sql(f"CREATE MATERIALIZED VIEW mv PROPERTIES ('refresh_mode' = 'INCREMENTAL') AS {query}")
    return client, lake


def test_touched_keys_without_a_passing_row_of_the_filtered_reference_are_dropped(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, lake = _setup(make_client, tmp_path, 100, 10)
    text = client.execute("EXPLAIN REFRESH MATERIALIZED VIEW mv").message or ""
    assert "default.dim bound by k; when it is unchanged, only the touched keys its rows passing brand = 'B1'" in (
        text.replace("lake.db.", "default.")
    ), text
    sides: list[tuple[Any, ...]] = []  # the touched keys each side of a run is read for
    side = correlated._Side.__init__
    monkeypatch.setattr(correlated._Side, "__init__", lambda self, *a: sides.append(a[6].values) or side(self, *a))

    def refresh(step: str) -> Any:
        sides.clear()
        run = client.refresh("mv")
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (step, run.error, run.reason)
        got = [tuple(r) for r in rows_of(client.table("mv").select("s", "n"))]
        assert got == lake.oracle(), step
        return run

    lake.append("fact", _fact_rows([3, 10, 47, 50], 1))  # two of the keys are brand B1
    refresh("keys 3, 10, 47, 50 appended")
    assert sides == [(3, 10, 47, 50), (10, 50)]

    before = [tuple(r) for r in rows_of(client.table("mv"))]
    lake.append("fact", _fact_rows([3, 47], 2))  # no key of brand B1: nothing to recompute
    refresh("keys 3, 47 appended")
    assert sides == [(3, 47)]
    assert [tuple(r) for r in rows_of(client.table("mv"))] == before

    # dim changed (key 3 becomes a B1 row too): its old rows would count, so no reduction.
    lake.append("dim", [(3, "B1")])
    lake.append("fact", _fact_rows([3, 47], 3))
    refresh("dim changed")
    assert sides == [(3, 47)]


def _state_directories(client: Any) -> list[Path]:
    """The reduced state's complete directories of ``mv``."""
    location = client.runtime.iceberg.load(ObjectName("default", "mv")).location()
    root = Path(location.removeprefix("file://")) / "state" / reduced_state.STATE_NAME
    return sorted(d for d in root.iterdir() if (d / reduced_state.MARKER).exists()) if root.exists() else []


def test_a_selective_filter_keeps_the_reduced_rows_as_state_and_a_refresh_reads_them(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 key in 100 passes: the FULL build writes the state (fact's rows of those keys), and
    an INCREMENTAL run reads fact's old rows from it, not fact's files."""
    from pyiceberg.expressions import EqualTo

    client, lake = _setup(make_client, tmp_path, 2000, 100)
    assert [tuple(r) for r in rows_of(client.table("mv").select("s", "n"))] == lake.oracle()
    [first] = _state_directories(client)
    keys = sorted(r[0] for r in client.runtime.spark.read.parquet(str(first / "keys")).collect())
    assert keys == list(range(0, 2000, 100))
    assert client.runtime.spark.read.parquet(str(first / "t0")).count() == 4 * 20  # fact's rows of K
    sides: list[tuple[Any, ...]] = []
    side = correlated._Side.__init__
    monkeypatch.setattr(correlated._Side, "__init__", lambda self, *a: sides.append(a[6].values) or side(self, *a))
    scanned: list[str] = []  # the tables a side reads (a kept table from the state is not)
    read = correlated._Side._read
    monkeypatch.setattr(correlated._Side, "_read", lambda self, p: scanned.append(p.name.lower()) or read(self, p))

    def refresh(step: str) -> Any:
        sides.clear()
        scanned.clear()
        run = client.refresh("mv")
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (step, run.error, run.reason)
        assert [tuple(r) for r in rows_of(client.table("mv").select("s", "n"))] == lake.oracle(), step
        return run

    lake.append("fact", _fact_rows([3, 100, 47, 500], 1))
    run = refresh("keys 3, 100, 47, 500 appended")
    assert sides == [(100, 500)]  # from the state: the keys within K, no reduction job
    reason = next(c["reason"] for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert "its kept tables read from its reduced state (" in reason, reason
    assert scanned == ["lake.db.dim"]  # fact's rows come from the state and the change
    # The new state beside the one read (kept until the next run: this run may yet fail).
    [second] = [d for d in _state_directories(client) if d != first]

    # A copy-on-write delete of a key in K (a signed change: its files' rows retracted, the
    # kept ones added back): netted into the state.
    lake.load("fact").delete(EqualTo("k", 100))
    refresh("key 100 deleted")
    assert sides == [(100,)] and scanned == ["lake.db.dim"]
    [third] = [d for d in _state_directories(client) if d != second]
    assert first not in _state_directories(client)
    assert client.runtime.spark.read.parquet(str(third / "t0")).where("k = 100").count() == 0

    # dim changed: its old rows would count too, so the state is not used (nor kept).
    lake.append("dim", [(3, "B1")])
    lake.append("fact", _fact_rows([3, 200], 3))
    run = refresh("dim changed")
    assert sides[0] == (3, 200) and "lake.db.fact" in scanned
    reason = next(c["reason"] for c in run.candidates if c["mode"] == "INCREMENTAL")
    assert "reduced state" not in reason, reason

    # The next run (dim unchanged) finds no state at the positions it consumed: it writes
    # one there (K now holds key 3 too) and reads fact's rows from it, as do the runs after.
    lake.append("fact", _fact_rows([3, 300, 301], 4))
    refresh("fact appended after dim changed")
    assert sides == [(3, 300)] and scanned == ["lake.db.dim"]
    written = _state_directories(client)  # at the consumed positions, and the new one
    assert len(written) == 2
    for directory in written:
        keys = sorted(r[0] for r in client.runtime.spark.read.parquet(str(directory / "keys")).collect())
        assert keys == sorted([3, *range(0, 2000, 100)])
    lake.append("fact", _fact_rows([3], 5))
    refresh("fact appended again")
    assert sides == [(3,)] and scanned == ["lake.db.dim"]
    assert len(set(_state_directories(client)) - set(written)) == 1


def test_the_reduced_state_follows_a_seeded_sequence_of_appends_deletes_and_updates(
    make_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded random changes of fact (appends of keys in and out of K, NULL keys and values,
    copy-on-write and merge-on-read deletes, an update moving rows between keys): every
    run is INCREMENTAL from the state, and the MV equals DuckDB's result after each."""
    import pyarrow.compute as pc
    from pyiceberg.expressions import In

    from sparkmv.demo.iceberg_deletes import delete_rows

    client, lake = _setup(make_client, tmp_path, 1000, 50)
    assert _state_directories(client)
    used: list[bool] = []
    sides = correlated.reduced_sides
    monkeypatch.setattr(correlated, "reduced_sides", lambda *a: used.append((s := sides(*a)) is not None) or s)
    rnd = random.Random(2417)
    fact = lake.load("fact")
    for step in range(8):
        kind = ("append", "copy-on-write", "merge-on-read", "update")[step % 4]
        if kind == "append":
            keys = [*rnd.sample(range(1100), 6), rnd.choice(range(0, 1000, 50))]
            rows = [*_fact_rows(keys, step), (None, 3, 7), (50, None, 11)]
            lake.append("fact", rows)
        elif kind == "copy-on-write":
            fact.delete(In("k", [rnd.choice(range(0, 1000, 50)), rnd.randrange(1000)]))
        elif kind == "merge-on-read":
            gone = pa.array([rnd.choice(range(0, 1000, 50)) for _ in range(2)], pa.int64())
            delete_rows(fact, lambda t, g=gone: pc.fill_null(pc.is_in(t.column("k"), value_set=g), False))
        else:  # rows of a key in K moved to another key of K (delete, then the append)
            source, target = rnd.sample(range(0, 1000, 50), 2)
            moved = [r for r in fact.scan(row_filter=f"k == {source}").to_arrow().to_pylist()]
            fact.delete(In("k", [source]))
            lake.append("fact", [(target, r["v"], r["e"]) for r in moved])
        fact = lake.load("fact")
        used.clear()
        run = client.refresh("mv")
        assert (run.state, run.mode) == ("SUCCESS", "INCREMENTAL"), (step, kind, run.error)
        assert used == [True], (step, kind)
        got = [tuple(r) for r in rows_of(client.table("mv").select("s", "n"))]
        assert got == lake.oracle(), (step, kind)
