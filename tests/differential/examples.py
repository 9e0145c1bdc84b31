"""The fixed, seeded examples the fast profile of the partition differential suite runs
(``make test``), and the :class:`Scenario` they and Hypothesis's generated ones share.

Hypothesis's simplest example is nearly empty (every row ``(0, 'a', 0, 0.0)``, no dimension
rows, only delete-partition then add-partition), so the fast profile runs instead, per case,
one example built here from ``random.Random(seed)`` that always holds: distinct ids, keys
and values; NULL keys, NULL values and a NULL partition; negative and large (beyond 32 bits,
``1e7``-scale doubles) values; at least three partitions, one of them with two files; a
dimension with keys no fact row has and fact keys no dimension row has (``c``, and NULL on
both sides); ``extra`` rows whose ``p`` is NULL, matches no partition, or matches one. The
writes of each case are listed in :data:`FAST_WRITES` so that, together, the fast cases run
every outside write kind.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime

from tests.differential.harness import UNMATCHED_VALUES, PartitionValue, Row, Write, hive_text


@dataclass(frozen=True)
class Scenario:
    """Input of one example: initial files per partition, the non-partitioned tables' rows,
    and the outside writes applied one by one."""

    partitions: tuple[tuple[PartitionValue, tuple[tuple[Row, ...], ...]], ...]
    extra: tuple[tuple[PartitionValue, Row], ...]
    dim: tuple[Row, ...]
    steps: tuple[Write, ...]

    def describe(self) -> str:
        lines = ["initial fact partitions:"]
        lines += [f"  p={hive_text(v)}: {[list(f) for f in files]}" for v, files in self.partitions]
        lines.append(f"initial extra rows (p, id, k, v, amt): {list(self.extra)}")
        lines.append(f"initial dim rows (k, label): {list(self.dim)}")
        return "\n".join(lines)


# Non-NULL partition values per type: for the partition expressions, several base partitions
# share an MV partition (ab/abc under substr; 2019-12-31 and 2020-01-01 in one ISO week, two
# days of one quarter; two timestamps of one day) and others do not.
INITIAL_VALUES: dict[str, list[PartitionValue]] = {
    "string": ["ab", "abc", "c d"],
    "int": [-3, 0, 40],
    "date": [date(2019, 12, 31), date(2020, 1, 1), date(2020, 3, 31)],
    "timestamp": [datetime(2019, 12, 31, 23, 30, 59), datetime(2020, 1, 1), datetime(2020, 1, 1, 0, 30, 5)],
    "boolean": [False, True],
}
# The value add_partition adds when it is absent (else the first absent value, NULL last).
NEW_VALUES: dict[str, PartitionValue] = {
    "string": "ba",
    "int": 7,
    "date": date(2021, 1, 4),
    "timestamp": datetime(2020, 4, 1, 12, 0, 0),
    "boolean": True,
}
FACT_KEYS = ["a", "b", "c", None]  # 'c' and NULL: fact keys with no dimension row
VS = [7, -5, None, 10**12, 0, -(10**12) - 3, 42]  # 7 values: cycles apart from the 4 keys
AMTS = [0.25, -2.5, None, 12345678.75, 3.0]  # multiples of 0.25: sums exact in both engines
LABELS = ["x", "y", "z", "w"]
DIM_KEYS = ["a", "a", "b", "e", None]  # 'a' twice (a join multiplies), 'e' and NULL: no fact row
DIM_REWRITE_KEYS = ["b", "c", "f", None]  # now 'a' has no dimension row and 'c' has one

# Case id -> the outside writes of its fast example, in order: two per case, so that string,
# date and timestamp partitions each get the four writes on `fact`, and every kind runs.
FAST_WRITES: dict[str, tuple[str, ...]] = {
    "string-identity-union": ("extra_file", "add_file"),
    "string-identity-left_join": ("dim_rewrite", "rewrite_file"),
    "string-substr-nested": ("delete_partition", "add_partition"),
    "int-identity-agg": ("add_file", "rewrite_file"),
    "date-identity-projection": ("rewrite_file", "add_partition"),
    "date-identity-join": ("dim_rewrite", "add_file"),
    "date-week-nested": ("add_file", "delete_partition"),
    "date-month-agg": ("rewrite_file", "delete_partition"),
    "date-quarter-agg": ("add_partition", "add_file"),
    "date-year-left_join": ("add_file", "dim_rewrite"),
    "date-date_format-agg": ("delete_partition", "rewrite_file"),
    "timestamp-identity-union": ("add_partition", "extra_file"),
    "timestamp-hour-agg": ("add_file", "delete_partition"),
    "timestamp-day-nested": ("rewrite_file", "add_file"),
    "timestamp-to_date-agg": ("delete_partition", "add_partition"),
    "timestamp-date_format-projection": ("rewrite_file", "add_file"),
    "boolean-identity-agg": ("delete_partition", "add_partition"),
}


class _Builder:
    """Deterministic rows: row ``i`` takes the ``i``-th key and, shifted by a seeded offset,
    the ``i``-th value and amount, so a dozen rows hold every pool value."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.v_off, self.a_off = self.rng.randrange(len(VS)), self.rng.randrange(len(AMTS))

    def rows(self, count: int) -> tuple[Row, ...]:
        out = []
        for _ in range(count):
            i = self.n
            self.n += 1
            row_id = 10 * i + self.rng.randrange(10)  # distinct, not in insertion order
            out.append((row_id, FACT_KEYS[i % 4], VS[(i + self.v_off) % len(VS)], AMTS[(i + self.a_off) % len(AMTS)]))
        return tuple(out)

    def labeled(self, keys: list[str | None]) -> tuple[Row, ...]:
        shift = self.rng.randrange(len(LABELS))
        return tuple((k, LABELS[(i + shift) % len(LABELS)]) for i, k in enumerate(keys))


def _sorted_dirs(present: list[PartitionValue]) -> list[PartitionValue]:
    # The order World.partition_dirs() lists partitions in (by directory name).
    return sorted(present, key=lambda v: f"p={hive_text(v)}")


def _write(kind: str, b: _Builder, ptype: str, present: list[PartitionValue]) -> Write:
    """One write of ``kind``; ``present`` (the partitions now) is updated as the write will."""
    pick = b.rng.randrange(10)
    if kind == "delete_partition":
        present.remove(_sorted_dirs(present)[pick % len(present)])
        return Write(kind, pick)
    if kind in ("add_file", "rewrite_file"):
        return Write(kind, pick, None, b.rows(2))
    if kind == "add_partition":
        candidates = [NEW_VALUES[ptype], *INITIAL_VALUES[ptype], None]
        value = next(v for v in candidates if v not in present)
        present.append(value)
        return Write(kind, 0, value, b.rows(3))
    if kind == "extra_file":
        p_values = [None, INITIAL_VALUES[ptype][-1], UNMATCHED_VALUES[ptype][0]]
        return Write(kind, rows=tuple((p, *r) for p, r in zip(p_values, b.rows(3), strict=True)))
    if kind == "dim_rewrite":
        return Write(kind, rows=b.labeled(DIM_REWRITE_KEYS))
    raise AssertionError(kind)


def fast_scenario(ptype: str, tables: set[str], writes: tuple[str, ...], seed: int) -> Scenario:
    """The seeded example of a case: partition type ``ptype``, base ``tables`` its MVs read,
    the outside ``writes`` (kinds) in order.

    >>> s = fast_scenario("int", {"fact", "dim"}, ("add_file",), 1)
    >>> [v for v, _ in s.partitions], [len(f) for _, f in s.partitions], [w.kind for w in s.steps]
    ([-3, 0, 40, None], [2, 1, 1, 1], ['add_file'])
    """
    b = _Builder(seed)
    values = [*INITIAL_VALUES[ptype], None]
    partitions = tuple((v, (b.rows(2), b.rows(1)) if i == 0 else (b.rows(3),)) for i, v in enumerate(values))
    extra: tuple[tuple[PartitionValue, Row], ...] = ()
    if "extra" in tables:
        p_values = [UNMATCHED_VALUES[ptype][0], None, values[0]]
        extra = tuple(zip(p_values, b.rows(3), strict=True))
    dim = b.labeled(DIM_KEYS) if "dim" in tables else ()
    present = list(values)
    steps = tuple(_write(kind, b, ptype, present) for kind in writes)
    return Scenario(partitions, extra, dim, steps)


def fast_example(case_id: str, ptype: str, tables: set[str]) -> Scenario | None:
    """The fast example of case ``case_id`` (seeded by its position), None for a case the
    fast profile does not run."""
    writes = FAST_WRITES.get(case_id)
    if writes is None:
        return None
    return fast_scenario(ptype, tables, writes, seed=list(FAST_WRITES).index(case_id))


def fact_rows_of(s: Scenario) -> list[Row]:
    """Every ``fact`` row of ``s``: initial and written (for coverage checks)."""
    rows = [r for _, files in s.partitions for f in files for r in f]
    return rows + [r for w in s.steps if w.kind in ("add_file", "rewrite_file", "add_partition") for r in w.rows]
