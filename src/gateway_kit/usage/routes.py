"""`UsageRoutes`: what the caller's own runs cost, as the usage ledger holds it.

    GET {prefix}/usage[?since=YYYY-MM-DD&until=YYYY-MM-DD]
        → {"user_id", "since", "until", "totals": {"runs", "input_tokens", "output_tokens",
           "total_tokens", "cache_read_tokens", "cache_write_tokens", "cost"},
           "days": [{"day", ...the same counts}]}
    GET /api/usage
        → {"success": true, "user_id", "used_tokens", "input_tokens", "output_tokens",
           "runs", "cost", "today": {"day", "used_tokens", "runs", "cost"}}

The first is the gateway's own: `totals` over the days from `since` to `until` (UTC days, both
kept; each optional), and `days`, each day with a run, newest first (the latest `MAX_DAYS`).
The second keeps a flat shape for the legacy app's clients, which asked the same path for
their quota and usage: everything the user's runs cost since the ledger began (``used_tokens``
is the total token count), and today's (UTC) part of it.

Both need a principal and answer for that principal only: there is no parameter naming
another user. No credentials, or the ``anonymous`` principal (who has no runs of its own), is
a 401. A ``since`` or ``until`` that is not a date, or a ``since`` after ``until``, is a 400.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re

from ..http.errors import UNAUTHENTICATED, HTTPError, send_json
from ..http.request import LOGIN_NEEDED, Request
from ..http.routing import Route, Router, RoutesMiddleware
from ..settings import DEFAULT_PREFIX
from ..types import ASGIApp
from .ledger import MAX_DAYS, UsageLedger, utc_day

INVALID_RANGE = "invalid_range"
BAD_DAY = "{name} must be a day as YYYY-MM-DD, got {value!r}"
BAD_ORDER = "since ({since}) is after until ({until})"
DAY_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def query_day(request: Request, name: str) -> str | None:
    """The day the query parameter `name` holds, or None when it is absent; a 400 otherwise."""
    value = request.query.get(name)
    if value is None:
        return None
    try:
        if not DAY_PATTERN.fullmatch(value):
            raise ValueError(value)
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise HTTPError(400, INVALID_RANGE, BAD_DAY.format(name=name, value=value)) from None


def own_user(request: Request) -> str:
    """The user asking; a 401 for nobody and for ``anonymous``, who has no usage of its own."""
    principal = request.principal
    if principal.anonymous:
        raise HTTPError(401, UNAUTHENTICATED, LOGIN_NEEDED)
    return principal.user_id


class UsageRoutes(RoutesMiddleware):
    """:param ledger: the usage ledger (the one the ``usage_ledger`` plugin writes).
    :param prefix: where ``/usage`` lives.
    :param legacy_path: where the legacy usage endpoint lives; None leaves it to the app.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        ledger: UsageLedger,
        prefix: str = DEFAULT_PREFIX,
        legacy_path: str | None = None,
    ) -> None:
        super().__init__(
            app,
            Router(prefix.rstrip("/"), [Route("/usage", self.usage)]),
            legacy=(legacy_path, self.legacy_usage) if legacy_path else None,
        )
        self.ledger = ledger

    async def usage(self, request: Request) -> None:
        user_id = own_user(request)
        since, until = query_day(request, "since"), query_day(request, "until")
        if since is not None and until is not None and since > until:
            raise HTTPError(400, INVALID_RANGE, BAD_ORDER.format(since=since, until=until))
        ledger = self.ledger
        totals = await asyncio.to_thread(ledger.totals, user_id, since, until)
        days = await asyncio.to_thread(ledger.days, user_id, since, until, MAX_DAYS)
        document = {
            "user_id": user_id,
            "since": since,
            "until": until,
            "totals": totals.as_json(),
            "days": [day.as_json() for day in days],
        }
        await send_json(request.send, 200, document)

    async def legacy_usage(self, request: Request) -> None:
        user_id = own_user(request)
        today = utc_day(dt.datetime.now(dt.UTC).timestamp())
        ledger = self.ledger
        everything = await asyncio.to_thread(ledger.totals, user_id)
        of_today = await asyncio.to_thread(ledger.totals, user_id, today, today)
        document = {
            "success": True,
            "user_id": user_id,
            "used_tokens": everything.total_tokens,
            "input_tokens": everything.input_tokens,
            "output_tokens": everything.output_tokens,
            "runs": everything.runs,
            "cost": everything.cost,
            "today": {
                "day": today,
                "used_tokens": of_today.total_tokens,
                "runs": of_today.runs,
                "cost": of_today.cost,
            },
        }
        await send_json(request.send, 200, document)
