"""The two job kinds of the run lifecycle as test cases (not a test module).

``MV``: an MV over six daily partitions cut into three STRICT chunks of two (every
partition changed after the first refresh). ``RELOAD``: a refreshable table over CSV files
with four vnodes merged one per batch (five updates, five deletes and five inserts after
the first refresh). Both use a 2 s lease, so a dead or stalled owner is taken over fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers import assert_mv_matches, rows_of
from tests.refresh.procs import QUERY, STRICT_2, create_mv, write_events
from tests.refresh.reload_helpers import changelog_ops, contents, refresh, write_csv

RELOAD_EXPECTED = sorted(
    [(i, f"a{i}" if i > 5 else f"new{i}") for i in range(1, 16)] + [(i, f"b{i}") for i in range(21, 26)]
)
RELOAD_BEFORE = sorted((i, f"a{i}") for i in range(1, 21))


@dataclass(frozen=True)
class JobKindCase:
    """One job kind: how to set an object up, refresh it in a worker, and check it."""

    kind: str
    name: str
    chunks: int

    @property
    def worker(self) -> list[str]:
        """Arguments of the worker of :mod:`tests.refresh.procs` refreshing the object."""
        return ["refresh", self.name] if self.kind == "mv" else ["reload", self.name]

    def setup(
        self, make_client: Any, case_dir: Path, extra: dict[str, str] | None = None, catalog_url: str | None = None
    ) -> tuple[Any, Path]:
        """Create and refresh the object once, then change its input; returns (client,
        home). ``extra``: more MV properties / table options."""
        home = case_dir / "home"
        more = "".join(f", {k} = '{v}'" for k, v in (extra or {}).items())
        if self.kind == "mv":
            data = case_dir / "events"
            write_events(data, 1)
            client = make_client(home, catalog_url)
            create_mv(client, data, {**STRICT_2, **(extra or {})}, name=self.name)
            write_events(data, 2)  # every partition changed: three chunks to refresh
            return client, home
        src = case_dir / "src"
        write_csv(src, "a.csv", [(i, f"a{i}") for i in range(1, 21)])
        client = make_client(home, catalog_url)
        client.sql(
            f"CREATE TABLE {self.name} (id int, v string, PRIMARY KEY (id)) "
            f"WITH (connector = 'files', path = '{src}', format = 'csv', refresh_mode = 'FULL_RELOAD', "
            f"vnode_count = '4', lease_timeout_seconds = '2', lease_renew_seconds = '1', merge_batch_rows = '1'{more})"
        )
        refresh(client, self.name)
        write_csv(src, "a.csv", [(i, f"a{i}" if i > 5 else f"new{i}") for i in range(1, 16)])
        write_csv(src, "b.csv", [(i, f"b{i}") for i in range(21, 26)])
        return client, home

    def refresh(self, client: Any) -> Any:
        """Refresh the object in this process (``REFRESH MATERIALIZED VIEW`` / ``TABLE``)."""
        return client.refresh(self.name) if self.kind == "mv" else client.refresh_table(self.name)

    def contents(self, client: Any) -> list[tuple[Any, ...]]:
        """The object's rows now."""
        return rows_of(client.table(self.name))

    def assert_matches(self, client: Any, run_id: int) -> None:
        """The MV equals its query (no row missing or duplicated) / the table equals the
        source and the run's changelog holds each change once."""
        if self.kind == "mv":
            assert_mv_matches(client, self.name, QUERY)
            mv_rows = rows_of(client.table(self.name))
            assert len(mv_rows) == len({(r[0], r[1]) for r in mv_rows}) == 6 * 7
            return
        assert contents(client, f"SELECT * FROM {self.name}") == RELOAD_EXPECTED
        assert changelog_ops(client, self.name, run_id) == {"I": 5, "U": 5, "UB": 5, "D": 5}

    def tables(self) -> list[str]:
        """The Iceberg tables a run commits to."""
        return [self.name] if self.kind == "mv" else [self.name, f"{self.name}__changelog"]

    def staging_roots(self, client: Any, run_id: int) -> list[Path]:
        """The run's staging directories (one per table)."""
        from sparkmv.names import ObjectName

        store = client.runtime.iceberg
        return [
            Path(store.load(ObjectName.parse(t)).location().removeprefix("file://")) / "data" / f"run-{run_id}"
            for t in self.tables()
        ]

    def snapshots(self, client: Any) -> list[int | None]:
        """The current snapshot id of each table."""
        from sparkmv.names import ObjectName

        out: list[int | None] = []
        for t in self.tables():
            snap = client.runtime.iceberg.load(ObjectName.parse(t)).current_snapshot()
            out.append(snap.snapshot_id if snap is not None else None)
        return out


MV = JobKindCase("mv", "mv", 3)
RELOAD = JobKindCase("reload", "t", 4)
KINDS = [MV, RELOAD]
KIND_IDS = [k.kind for k in KINDS]


def staged_files(roots: list[Path]) -> set[Path]:
    """Every file under the staging roots."""
    return {p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_file()}


def kinds_reload_long() -> list[Any]:
    """:data:`KINDS` as pytest params with the reload case marked ``long`` (run by
    ``make test-slow``, left out of ``make test`` for time): for tests whose reload case
    repeats what tests/refresh/test_reload_recovery.py already checks with real kills."""
    import pytest

    return [
        pytest.param(c, id=i, marks=[pytest.mark.long] if i == "reload" else [])
        for c, i in zip(KINDS, KIND_IDS, strict=True)
    ]
