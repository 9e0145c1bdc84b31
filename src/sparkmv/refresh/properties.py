"""Materialized view properties: names, defaults, validation.

Names follow StarRocks where it has one (``partition_refresh_number``,
``mv_max_rows_per_refresh``, ``partition_ttl``, ``excluded_refresh_tables``, ...).

>>> p = MvProperties.parse({"partition_refresh_number": "2", "refresh_mode": "pct"})
>>> (p.partition_refresh_number, p.refresh_mode)
(2, 'PCT')
>>> MvProperties.parse({"colour": "red"})
Traceback (most recent call last):
...
sparkmv.errors.InvalidPropertyError: unknown property 'colour'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sparkmv.errors import InvalidPropertyError

GIB = 1024**3

_ENUMS: dict[str, tuple[str, ...]] = {
    "refresh_mode": ("FULL", "PCT", "AUTO", "INCREMENTAL"),
    "partition_refresh_strategy": ("STRICT", "ADAPTIVE", "FORCE"),
    "publish": ("ATOMIC", "PER_CHUNK"),
    "query_rewrite_consistency": ("CHECKED", "LOOSE", "DISABLE"),
}
NOT_YET_SUPPORTED: dict[str, dict[str, str]] = {}
"""Enum values reserved for a coming feature: rejected at CREATE / ALTER with this reason
(rather than silently acting as another value)."""
LEASE_SECONDS: dict[str, tuple[int, int, int]] = {
    # name: (min, max, default); shared by MV properties and refreshable-table options
    "lease_renew_seconds": (1, 3600, 10),
    "lease_timeout_seconds": (2, 86400, 60),
}
_INTS: dict[str, tuple[int, int]] = {
    "partition_refresh_number": (1, 1_000_000),
    "mv_max_rows_per_refresh": (1, 2**62),
    "mv_max_bytes_per_refresh": (1, 2**62),
    "auto_refresh_partitions_limit": (1, 1_000_000),
    **{key: (lo, hi) for key, (lo, hi, _default) in LEASE_SECONDS.items()},
    "max_refresh_attempts": (1, 100),
    "snapshot_retention_hours": (0, 100_000),
    "max_consecutive_failures": (1, 1_000_000),
    "task_priority": (0, 100),
    "mv_rewrite_staleness_second": (0, 315_360_000),
}
_FLOATS: dict[str, tuple[float, float]] = {
    "throttle_chunks_per_minute": (0.0, 1e9),
    "incremental_max_change_ratio": (0.0, 1e9),
}
_LISTS = ("excluded_refresh_tables", "excluded_trigger_tables")
_STRINGS = ("partition_ttl", "partition_retention_condition", "session.*")
_TTL = re.compile(r"^\s*(\d+)\s+(DAY|MONTH|YEAR)S?\s*$", re.IGNORECASE)
_INTERVAL = re.compile(r"^\s*(?:INTERVAL\s+)?'?(\d+)'?\s+(SECOND|MINUTE|HOUR|DAY|WEEK)S?\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"SECOND": 1, "MINUTE": 60, "HOUR": 3600, "DAY": 86_400, "WEEK": 604_800}
FRESHNESS = ("freshness_warn_after", "freshness_error_after")
"""Staleness thresholds (dbt's source freshness ``warn_after`` / ``error_after``)."""

KNOWN = set(_ENUMS) | set(_INTS) | set(_FLOATS) | set(_LISTS) | set(FRESHNESS)
KNOWN |= {"partition_ttl", "partition_retention_condition"}


def interval_seconds(value: str) -> int | None:
    """Seconds of an interval ``'<n> SECOND|MINUTE|HOUR|DAY|WEEK[S]'`` (an ``INTERVAL``
    prefix and a quoted count allowed); None when ``value`` is not one.

    >>> interval_seconds("2 hours"), interval_seconds("INTERVAL '30' MINUTE"), interval_seconds("soon")
    (7200, 1800, None)
    """
    m = _INTERVAL.match(value)
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2).upper()] if m else None


def check_lease(renew_seconds: int, timeout_seconds: int, owner: str = "") -> None:
    """The lease rule: the owner renews its lease well before it expires.

    Raises:
        InvalidPropertyError: when ``lease_renew_seconds >= lease_timeout_seconds`` (the
            owner would lose its own lease between two renewals).
    """
    if renew_seconds >= timeout_seconds:
        raise InvalidPropertyError(
            f"{owner}lease_renew_seconds ({renew_seconds}) must be less than lease_timeout_seconds ({timeout_seconds})"
        )


def validate(props: dict[str, str]) -> dict[str, str]:
    """Check names and values; returns the normalised mapping (enum values upper-cased).

    Raises:
        InvalidPropertyError: for an unknown name, a value out of its domain, or a value
            reserved for a coming feature (``refresh_mode = 'INCREMENTAL'``).
    """
    out: dict[str, str] = {}
    for raw_key, raw_value in props.items():
        key = raw_key.strip().lower()
        value = str(raw_value).strip()
        if key in _ENUMS:
            if value.upper() not in _ENUMS[key]:
                raise InvalidPropertyError(f"property {key!r} must be one of {', '.join(_ENUMS[key])}, not {value!r}")
            value = value.upper()
            reason = NOT_YET_SUPPORTED.get(key, {}).get(value)
            if reason is not None:
                raise InvalidPropertyError(f"property {key!r} = {value!r} is not supported: {reason}")
        elif key in _INTS:
            lo, hi = _INTS[key]
            if not re.fullmatch(r"\d+", value) or not lo <= int(value) <= hi:
                raise InvalidPropertyError(f"property {key!r} must be an integer from {lo} to {hi}, not {value!r}")
        elif key in _FLOATS:
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            lo_f, hi_f = _FLOATS[key]
            if not lo_f <= number <= hi_f:
                raise InvalidPropertyError(
                    f"property {key!r} must be a number from {lo_f:g} to {hi_f:g}, not {value!r}"
                )
        elif key in _LISTS:
            value = ",".join(p.strip().lower() for p in value.split(",") if p.strip())
        elif key == "partition_ttl":
            if not _TTL.match(value):
                raise InvalidPropertyError(
                    f"property 'partition_ttl' must look like '<n> DAY|MONTH|YEAR', not {value!r}"
                )
        elif key == "partition_retention_condition":
            pass
        elif key in FRESHNESS:
            if interval_seconds(value) is None:
                raise InvalidPropertyError(
                    f"property {key!r} must look like '<n> SECOND|MINUTE|HOUR|DAY|WEEK', not {value!r}"
                )
        else:
            raise InvalidPropertyError(f"unknown property {raw_key.strip()!r}")
        out[key] = value
    return out


@dataclass(frozen=True)
class MvProperties:
    """Typed view of an MV's properties with defaults.

    Attributes:
        refresh_mode: FULL | PCT | AUTO | INCREMENTAL (strict: fails rather than recompute).
        partition_refresh_strategy: STRICT | ADAPTIVE | FORCE.
        partition_refresh_number: MV partitions per chunk under STRICT.
        mv_max_rows_per_refresh / mv_max_bytes_per_refresh: base rows / bytes per chunk
            under ADAPTIVE (a chunk always takes at least one partition).
        auto_refresh_partitions_limit: newest N partitions considered by automatic
            refreshes (None = all).
        partition_ttl: (n, unit) or None.
        excluded_refresh_tables / excluded_trigger_tables: qualified names.
        publish: ATOMIC | PER_CHUNK.
        lease_renew_seconds / lease_timeout_seconds: lease heartbeat and expiry (seconds).
        max_refresh_attempts: attempts of a run before it is FAILED.
        throttle_chunks_per_minute: pace limit (0 = none).
        incremental_max_change_ratio: AUTO refreshes incrementally only while the appended
            bytes stay under this fraction of the changed base tables' bytes (Snowflake's
            guidance: about a tenth).
        snapshot_retention_hours: snapshots older than this are expired by vacuum.
        query_rewrite_consistency: when query rewrite may read the MV (StarRocks' names):
            CHECKED (only while no base partition it depends on changed since its last
            refresh), LOOSE (as it is), DISABLE (never).
        mv_rewrite_staleness_second: under CHECKED, an MV whose last refresh finished
            within this many seconds counts as fresh even if its base changed since
            (None: no grace).
        freshness_warn_after / freshness_error_after: seconds of staleness (now minus the
            oldest change the MV has not consumed) past which ``sparkmv status`` flags the MV
            WARN / ERROR, and ``sparkmv status --check`` fails on ERROR (None: no alert).
    """

    refresh_mode: str = "AUTO"
    partition_refresh_strategy: str = "ADAPTIVE"
    partition_refresh_number: int = 8
    mv_max_rows_per_refresh: int = 100_000_000
    mv_max_bytes_per_refresh: int = 20 * GIB
    auto_refresh_partitions_limit: int | None = None
    partition_ttl: tuple[int, str] | None = None
    partition_retention_condition: str | None = None
    excluded_refresh_tables: tuple[str, ...] = ()
    excluded_trigger_tables: tuple[str, ...] = ()
    publish: str = "ATOMIC"
    lease_renew_seconds: int = LEASE_SECONDS["lease_renew_seconds"][2]
    lease_timeout_seconds: int = LEASE_SECONDS["lease_timeout_seconds"][2]
    max_refresh_attempts: int = 3
    throttle_chunks_per_minute: float = 0.0
    incremental_max_change_ratio: float = 0.1
    snapshot_retention_hours: int = 24
    max_consecutive_failures: int = 10
    task_priority: int = 0
    query_rewrite_consistency: str = "CHECKED"
    mv_rewrite_staleness_second: int | None = None
    freshness_warn_after: int | None = None
    freshness_error_after: int | None = None
    raw: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, props: dict[str, Any]) -> MvProperties:
        """Validate and type ``props``.

        Raises:
            InvalidPropertyError: see :func:`validate` and :func:`check_lease`.
        """
        p = validate({k: str(v) for k, v in props.items()})
        kwargs: dict[str, Any] = {"raw": p}
        for key in _ENUMS:
            if key in p:
                kwargs[key] = p[key]
        for key in _INTS:
            if key in p:
                kwargs[key] = int(p[key])
        for key in _FLOATS:
            if key in p:
                kwargs[key] = float(p[key])
        for key in _LISTS:
            if key in p:
                kwargs[key] = tuple(_qualify(t) for t in p[key].split(",") if t)
        if "partition_ttl" in p:
            m = _TTL.match(p["partition_ttl"])
            assert m is not None
            kwargs["partition_ttl"] = (int(m.group(1)), m.group(2).upper())
        if "partition_retention_condition" in p:
            kwargs["partition_retention_condition"] = p["partition_retention_condition"]
        for key in FRESHNESS:
            if key in p:
                kwargs[key] = interval_seconds(p[key])
        parsed = cls(**kwargs)
        check_lease(parsed.lease_renew_seconds, parsed.lease_timeout_seconds)
        warn, error = parsed.freshness_warn_after, parsed.freshness_error_after
        if warn is not None and error is not None and warn > error:
            raise InvalidPropertyError(
                f"freshness_warn_after ({p['freshness_warn_after']}) must not exceed "
                f"freshness_error_after ({p['freshness_error_after']})"
            )
        return parsed


def _qualify(name: str) -> str:
    return name if "." in name else f"default.{name}"
