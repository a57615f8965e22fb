"""`IdentitySettings`: how soon a revoked credential stops working, and the socket tickets."""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import SettingsError
from ..settings import (
    DEFAULT_CREDENTIAL_REFRESH_INTERVAL,
    DEFAULT_CREDENTIAL_STALE_AFTER,
    DEFAULT_TICKET_RATE,
    DEFAULT_TICKET_TTL,
    check_count,
    check_seconds,
)

BAD_CREDENTIAL_TIMINGS = (
    "IdentitySettings.credential_stale_after must be longer than credential_refresh_interval, "
    "got {stale!r} and {interval!r}"
)
BAD_TICKET_RATE = (
    "IdentitySettings.ticket_rate must be (a positive number of tickets, a positive number of "
    "seconds), got {value!r}"
)


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """:param credential_refresh_interval: seconds between each process's reads of revoked
        tokens and ended logins (only what changed): how soon a revocation or a logout anywhere
        ends the credential's requests, streams and sockets here.
    :param credential_stale_after: seconds this process may go without such a read (the
        database is down) before every token and cookie check fails closed
        (`DatabaseUnavailable`, a 503); longer than the refresh interval.
    :param ticket_ttl: seconds a socket ticket stays valid.
    :param ticket_rate: how many tickets one credential may ask for in how many seconds (a 429
        with ``Retry-After`` beyond).
    """

    credential_refresh_interval: float = DEFAULT_CREDENTIAL_REFRESH_INTERVAL
    credential_stale_after: float = DEFAULT_CREDENTIAL_STALE_AFTER
    ticket_ttl: float = DEFAULT_TICKET_TTL
    ticket_rate: tuple[int, float] = DEFAULT_TICKET_RATE

    def __post_init__(self) -> None:
        interval, stale = self.credential_refresh_interval, self.credential_stale_after
        check_seconds("IdentitySettings.credential_refresh_interval", interval)
        check_seconds("IdentitySettings.credential_stale_after", stale)
        if stale <= interval:
            raise SettingsError(BAD_CREDENTIAL_TIMINGS.format(stale=stale, interval=interval))
        check_seconds("IdentitySettings.ticket_ttl", self.ticket_ttl)
        rate = self.ticket_rate
        try:
            count, seconds = rate
            check_count("ticket_rate", count)
            check_seconds("ticket_rate", seconds)
        except (TypeError, ValueError, SettingsError):
            raise SettingsError(BAD_TICKET_RATE.format(value=rate)) from None
        object.__setattr__(self, "ticket_rate", (count, float(seconds)))  # frozen: set once
