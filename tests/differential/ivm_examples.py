"""The fixed, seeded examples the fast profile of the incremental-refresh differential suite
runs (``make test``): initial files drawn by ``random.Random(seed)`` from the value pools of
:mod:`tests.differential.ivm_harness` (NULL keys and values, negative and large values, a
NULL partition, a partition of two files, dimension keys on one join side only), and the
step kinds named per case, so that together the fast cases append every step kind to every
storage kind.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from tests.differential.ivm_harness import PARTS, Choose, IvmScenario, Positions, Step, initial_files, make_step

# Step kind -> (tables appended to, fact's partition: fresh True / existing False / drawn None).
STEP_KINDS: dict[str, tuple[tuple[str, ...], bool | None]] = {
    "fact": (("fact",), False),
    "fact_new": (("fact",), True),
    "all": (("fact", "dim", "more", "reg"), True),
    "dim": (("dim",), None),
    "more_reg": (("more", "reg"), None),
    "none": ((), None),
}


def seeded_ivm_scenario(seed: int, steps: Sequence[str]) -> IvmScenario:
    """The example of ``seed``: ``fact`` partitions ``p0``, NULL and ``p1``, then one step per
    kind of ``steps`` (keys of :data:`STEP_KINDS`).

    >>> s = seeded_ivm_scenario(0, ("fact", "none"))
    >>> [a.table for a in s.steps[0].appends], s.steps[1].appends
    (['fact'], ())
    """
    choose = seeded_choose(seed)
    pos = Positions()
    parts: list[str | None] = list(PARTS[:3])
    initial = initial_files(choose, pos, parts)
    plan = []
    for kind in steps:
        tables, fresh = STEP_KINDS[kind]
        plan.append(make_step(choose, tables, pos, parts, fresh) if tables else Step(()))
    return IvmScenario(initial, tuple(plan))


def seeded_choose(seed: int) -> Choose:
    """Seeded choices of ``low`` or ``low + 1``: a row at position n then takes pool value n
    or n + 1, so consecutive rows run through every pool value (NULLs, negative and large
    values, new keys) while the seed still varies them."""
    rng = random.Random(seed)
    return lambda low, high: rng.randint(low, min(high, low + 1))


def missing_data(s: IvmScenario) -> list[str]:
    """What the initial files of ``s`` lack of the data a fast example must hold (empty: all).

    >>> missing_data(seeded_ivm_scenario(16, ()))
    []
    """
    fact = s.files("fact")
    rows = [r for _, rs in fact for r in rs]
    dim = [r for _, rs in s.files("dim") for r in rs]
    reg_keys = {r[0] for _, rs in s.files("reg") for r in rs}
    fact_keys, dim_keys = {r[1] for r in rows} - {None}, {r[0] for r in dim} - {None}
    checks = {
        "a NULL partition": None in [p for p, _ in fact],
        "a partition of two files": len({p for p, _ in fact}) < len(fact),
        "NULL keys": None in [r[1] for r in rows],
        "NULL values": all(None in [r[i] for r in rows] for i in (2, 3, 4)),
        "negative values": min(r[2] for r in rows if r[2] is not None) < 0 and any(r[3] and r[3] < 0 for r in rows),
        "large values": max(r[2] for r in rows if r[2] is not None) >= 10**10
        and any(r[3] and r[3] > 10**6 for r in rows),
        "joined keys": bool(fact_keys & dim_keys) and bool({r[2] for r in dim} & reg_keys - {None}),
        "fact keys without dim row": bool(fact_keys - dim_keys),
        "dim keys without fact row": bool(dim_keys - fact_keys),
    }
    return [what for what, ok in checks.items() if not ok]
