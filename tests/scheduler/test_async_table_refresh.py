"""``REFRESH TABLE ... WITH ASYNC MODE`` queues a run that the scheduler executes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkmv.errors import ObjectNotFoundError, RefreshError
from sparkmv.scheduler.loop import Scheduler
from tests.refresh.reload_helpers import contents, run_counts, write_csv
from tests.scheduler.conftest import runs_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_an_async_table_refresh_is_queued_merged_and_run_by_the_scheduler(client: Any, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_csv(src, "a.csv", [(1, "x"), (2, "y"), (3, "z")])
    client.sql(
        f"CREATE TABLE t (id int, v string, PRIMARY KEY (id)) "
        f"WITH (connector = 'files', path = '{src}', format = 'csv', refresh_mode = 'FULL_RELOAD', vnode_count = '2')"
    )
    queued = client.execute("REFRESH TABLE t WITH ASYNC MODE")
    assert queued.run.state == "PENDING"
    assert queued.message == f"refresh of 't' queued as run {queued.run.run_id}"
    assert contents(client, "SELECT id, v FROM t") == []  # nothing ran yet
    again = client.execute("REFRESH TABLE t WITH ASYNC MODE")
    assert again.run.state == "MERGED"
    assert (
        again.message
        == f"refresh of 't' recorded as run {again.run.run_id}: merged into pending run {queued.run.run_id}"
    )

    report = Scheduler(client.runtime).tick()
    assert report.outcome("t") == "SUCCESS"
    assert report.results["default.t"].run_id == queued.run.run_id  # the queued run itself executed
    assert contents(client, "SELECT id, v FROM t") == [(1, "x"), (2, "y"), (3, "z")]
    assert run_counts(client, queued.run.run_id) == (3, 0, 0)
    runs = [(r.run_id, r.state, r.trigger) for r in runs_of(client, "t")]
    assert runs == [(queued.run.run_id, "SUCCESS", "MANUAL"), (again.run.run_id, "MERGED", "MANUAL")]
    assert Scheduler(client.runtime).tick().outcome("t") == "IDLE"  # nothing left queued


def test_an_async_refresh_of_a_plain_or_missing_table_fails_at_once(client: Any, tmp_path: Path) -> None:
    client.sql("CREATE TABLE plain (id int, PRIMARY KEY (id))")
    with pytest.raises(RefreshError, match="Table 'plain' is not refreshable"):
        client.sql("REFRESH TABLE plain WITH ASYNC MODE")
    with pytest.raises(ObjectNotFoundError, match="table 'nope' does not exist"):
        client.sql("REFRESH TABLE nope WITH ASYNC MODE")
    assert runs_of(client, "plain") == []
