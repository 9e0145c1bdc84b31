"""AUTO's cost model fitted from a catalog's own runs (:mod:`sparkmv.refresh.cost_model`):
the constants recovered from seeded, noisy runs; the share of right choices; AUTO choosing
by predicted seconds once fitted; the fit read from SQLite and PostgreSQL catalogs."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from sparkmv.catalog import Catalog, ObjectKind, RunState, Trigger
from sparkmv.names import ObjectName
from sparkmv.refresh import cost_model
from sparkmv.refresh.cost_model import MIN_RUNS, Sample, fit
from sparkmv.refresh.incremental.candidates import Candidate, choose, describe

T0 = datetime(2026, 12, 1, 8, 0, 0)


def _runs(rnd: random.Random, mode: str, fixed: float, rate: float, n: int) -> list[Sample]:
    out = []
    for _ in range(n):
        size = rnd.randrange(1_000, 50_000_000)
        out.append(Sample(mode, size, fixed + size / rate + rnd.uniform(-0.02, 0.02)))
    return out


def test_the_constants_of_each_technique_are_recovered_from_noisy_runs() -> None:
    rnd = random.Random(46)
    samples = _runs(rnd, "FULL", 0.8, 50e6, 40) + _runs(rnd, "INCREMENTAL", 2.5, 10e6, 30)
    model = fit(samples)
    full, incremental = model.techniques["FULL"], model.techniques["INCREMENTAL"]
    assert abs(full.fixed_seconds - 0.8) < 0.05 and abs((full.bytes_per_second or 0) - 50e6) / 50e6 < 0.05
    assert abs(incremental.fixed_seconds - 2.5) < 0.05
    assert abs((incremental.bytes_per_second or 0) - 10e6) / 10e6 < 0.05
    assert "PCT" not in model.techniques and model.predict("PCT", 10) is None
    assert (full.runs, incremental.runs, model.runs) == (40, 30, 70)


def test_too_few_runs_fit_nothing_and_auto_compares_bytes() -> None:
    rnd = random.Random(7)
    model = fit(_runs(rnd, "FULL", 1.0, 1e6, MIN_RUNS - 1))
    assert model.techniques == {} and model.right_share is None
    chosen = choose([Candidate("INCREMENTAL", True, 100, ""), Candidate("FULL", True, 900, "")], model)
    assert [c.mode for c in chosen if c.chosen] == ["INCREMENTAL"]
    assert all(c.predicted_seconds is None for c in chosen)


def test_right_choices_compare_the_measured_seconds_with_the_alternatives_prediction() -> None:
    rnd = random.Random(3)
    fitted = _runs(rnd, "FULL", 1.0, 1e6, MIN_RUNS)  # FULL: 1 s + 1 s per MB
    # Two INCREMENTAL runs weighed against FULL: 0.5 s against a predicted 2 s (right), and
    # 3 s against a predicted 1.5 s (wrong).
    weighed = [Sample("INCREMENTAL", 10, 0.5, {"FULL": 1_000_000}), Sample("INCREMENTAL", 10, 3.0, {"FULL": 500_000})]
    model = fit([*fitted, *weighed])
    assert (model.weighed, model.right) == (2, 1) and model.right_share == 0.5


def test_auto_picks_the_least_predicted_seconds_once_every_technique_is_fitted() -> None:
    rnd = random.Random(11)
    # On this catalog an incremental run costs 3 s whatever it reads, a full one 0.2 s + 1 s/GB.
    model = fit(_runs(rnd, "FULL", 0.2, 1e9, 25) + _runs(rnd, "INCREMENTAL", 3.0, 1e12, 25))
    chosen = choose([Candidate("INCREMENTAL", True, 10_000, "a"), Candidate("FULL", True, 40_000_000, "b")], model)
    assert [c.mode for c in chosen if c.chosen] == ["FULL"]
    text = describe(chosen)
    assert text.startswith("FULL: cheapest (38.1 MiB; INCREMENTAL 9.8 KiB); predicted by the cost model"), text


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[Catalog]:
    url = f"sqlite:///{tmp_path}/catalog.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    cat = Catalog.open(str(url))
    yield cat
    cat.close()


def test_the_model_is_fitted_from_the_catalogs_runs(catalog: Catalog) -> None:
    cost_model._FITTED.clear()
    assert cost_model.learned(catalog).techniques == {}  # a new catalog: the defaults
    rnd = random.Random(5)
    finished = []
    with catalog.transaction() as s:
        row = catalog.objects.insert(s, ObjectName("default", "m"), ObjectKind.MATERIALIZED_VIEW, definition="SELECT 1")
        for i, sample in enumerate(_runs(rnd, "FULL", 1.5, 20e6, MIN_RUNS + 5)):
            start = T0 + timedelta(minutes=i)
            finished.append(start + timedelta(seconds=sample.seconds))
            catalog.runs.create(
                s,
                row.id,
                "m",
                Trigger.MANUAL,
                RunState.SUCCESS,
                mode="FULL",
                estimate_bytes=sample.estimate_bytes,
                started=start,
                finished=finished[-1],
            )
        catalog.runs.create(s, row.id, "m", Trigger.MANUAL, RunState.FAILED, mode="FULL", estimate_bytes=1)
    model = cost_model.learned(catalog)
    full = model.techniques["FULL"]
    assert full.runs == MIN_RUNS + 5 and abs(full.fixed_seconds - 1.5) < 0.1, full
    assert model.fitted_at is not None and abs((model.fitted_at - max(finished)).total_seconds()) < 1e-3
