"""`PumpSettings`: how an upstream's events are read into the log (goose's session pumps)."""

from __future__ import annotations

from dataclasses import dataclass

from ..coordination.leases import DEFAULT_LEASE_TTL
from ..settings import DEFAULT_PUMP_SCAN_INTERVAL, check_count, check_duration, check_seconds


@dataclass(frozen=True, slots=True)
class PumpSettings:
    """How the session pumps read goose; the times are seconds.

    :param scan_interval: how often this process looks for sessions nobody pumps (their
        process died) and takes them over.
    """

    scan_interval: float = DEFAULT_PUMP_SCAN_INTERVAL
    lost_run_grace: float = 5.0  # after a reconnect, how long a run absent from goose may take
    error_finish_grace: float = 2.0  # after an Error, how long to wait for goose's Finish
    reconnect_delay: float = 0.2
    max_reconnect_delay: float = 5.0
    upstream_down_timeout: float = 300.0
    lease_ttl: float = DEFAULT_LEASE_TTL
    # A pump, or its connection to goose, that fails this many times in a row ends its
    # session's runs.
    max_failures: int = 5
    # A connection open this long counts as sound even if it brought nothing new (goose may
    # think for minutes, pinging): its end starts no failure streak.
    stable_connection: float = 30.0

    def __post_init__(self) -> None:
        # Waits and limits may be infinite (no limit); a lease or a first pause may not.
        for name in (
            "lost_run_grace",
            "error_finish_grace",
            "max_reconnect_delay",
            "upstream_down_timeout",
            "stable_connection",
        ):
            check_duration(f"PumpSettings.{name}", getattr(self, name))
        check_seconds("PumpSettings.scan_interval", self.scan_interval)
        check_seconds("PumpSettings.reconnect_delay", self.reconnect_delay)
        check_seconds("PumpSettings.lease_ttl", self.lease_ttl)
        check_count("PumpSettings.max_failures", self.max_failures)
