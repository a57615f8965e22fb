"""How an owned run's lease is named: after its stream and run id, so that a sweeper finds the
runs whose writer died by their leases alone."""

from __future__ import annotations

import json

# Each owned run's lease is named after it; the sweeper finds them by this prefix.
LEASE_PREFIX = "owned-run:"


def lease_name(stream: str, run_id: str) -> str:
    return LEASE_PREFIX + json.dumps([stream, run_id], ensure_ascii=False, separators=(",", ":"))


def owned_run_of(name: str) -> tuple[str, str] | None:
    """The (stream, run_id) an owned run's lease is named after; None for any other lease."""
    if not name.startswith(LEASE_PREFIX):
        return None
    try:
        value = json.loads(name[len(LEASE_PREFIX) :])
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value[0], value[1]
    return None
