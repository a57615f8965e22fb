"""``GET {prefix}/usage`` and the legacy ``GET /api/usage``, over real HTTP: each user gets the
totals of their own runs, and nobody else's."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    GooseUpstream,
    IdentityMiddleware,
    LegacySurfaces,
    Plugins,
    Principal,
    UsageRoutes,
)
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose
from gateway_kit.types import Scope
from gateway_kit.usage import UsageLedger, entry_of
from gateway_kit.usage.ledger import utc_day
from tests.support.plugins import plugin
from tests.support.serving import serve_in_thread
from tests.support.upstream import FAST
from tests.support.waiting import wait_until

from .billing import DAY, deliver, ended, usage

TWO_DAYS_AGO = time.time() - 2 * DAY


@dataclass(frozen=True, slots=True)
class Site:
    url: str
    alice: dict[str, str]  # the headers of alice's requests
    bob: dict[str, str]


def bearer(log: EventLog, user: str) -> dict[str, str]:
    return {"authorization": f"Bearer {ApiTokens(log).create(user)[1]}"}


@pytest.fixture
def site(log: EventLog) -> Iterator[Site]:
    """A gateway whose ledger holds two runs of alice (today and two days ago) and one of bob."""
    gateway = Gateway(log=log, load_entry_points=False, legacy=LegacySurfaces(usage="/api/usage"))
    owners = StreamOwners(log)
    owners.declare("alice-notes", "alice")
    owners.declare("bob-notes", "bob")
    deliver(gateway, ended("a1", "alice-notes"), usage(10, 5, cost=0.5))
    deliver(gateway, ended("a2", "alice-notes", finished_at=TWO_DAYS_AGO), usage(3, 2))
    deliver(gateway, ended("b1", "bob-notes"), usage(1000, 1000, cost=9.0))
    with serve_in_thread(gateway) as url:
        yield Site(url, bearer(log, "alice"), bearer(log, "bob"))


def test_each_user_gets_the_totals_of_their_own_runs(site: Site) -> None:
    today, earlier = utc_day(time.time()), utc_day(TWO_DAYS_AGO)
    alice = httpx.get(f"{site.url}/gateway/usage", headers=site.alice)
    assert alice.status_code == 200, alice.text
    assert alice.json() == {
        "user_id": "alice",
        "since": None,
        "until": None,
        "totals": {"runs": 2, "input_tokens": 13, "output_tokens": 7, "total_tokens": 20,
                   "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.5},
        "days": [
            {"day": today, "runs": 1, "input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
             "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.5},
            {"day": earlier, "runs": 1, "input_tokens": 3, "output_tokens": 2, "total_tokens": 5,
             "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.0},
        ],
    }  # fmt: skip
    bob = httpx.get(f"{site.url}/gateway/usage", headers=site.bob).json()
    assert (bob["user_id"], bob["totals"]["runs"], bob["totals"]["total_tokens"]) == (
        "bob",
        1,
        2000,
    )
    assert [day["day"] for day in bob["days"]] == [today]


def test_since_and_until_keep_to_those_days(site: Site) -> None:
    today, earlier = utc_day(time.time()), utc_day(TWO_DAYS_AGO)
    recent = httpx.get(f"{site.url}/gateway/usage", params={"since": today}, headers=site.alice)
    assert recent.json()["totals"]["total_tokens"] == 15
    assert [day["day"] for day in recent.json()["days"]] == [today]
    before = httpx.get(f"{site.url}/gateway/usage", params={"until": earlier}, headers=site.alice)
    assert (before.json()["totals"]["runs"], before.json()["until"]) == (1, earlier)


def test_the_legacy_path_answers_the_flat_shape_old_clients_read(site: Site) -> None:
    answer = httpx.get(f"{site.url}/api/usage", headers=site.alice)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "success": True,
        "user_id": "alice",
        "used_tokens": 20,
        "input_tokens": 13,
        "output_tokens": 7,
        "runs": 2,
        "cost": 0.5,
        "today": {"day": utc_day(time.time()), "used_tokens": 15, "runs": 1, "cost": 0.5},
    }


def test_nobody_and_anonymous_get_a_401(site: Site, log: EventLog) -> None:
    for path in ("/gateway/usage", "/api/usage"):
        answer = httpx.get(f"{site.url}{path}")
        assert answer.status_code == 401
        assert answer.json()["error"] == "unauthenticated"
    open_gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    with serve_in_thread(open_gateway) as url:
        answer = httpx.get(f"{url}/gateway/usage")
        assert (answer.status_code, answer.json()["error"]) == (401, "unauthenticated")


def test_a_bad_range_is_a_400_naming_it(site: Site) -> None:
    for params, named in [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-02-30"}, "until"),
        ({"since": "2026-12-03", "until": "2026-12-01"}, "after until"),
    ]:
        answer = httpx.get(f"{site.url}/gateway/usage", params=params, headers=site.alice)
        assert answer.status_code == 400
        assert answer.json()["error"] == "invalid_range" and named in answer.json()["message"]
    posted = httpx.post(f"{site.url}/gateway/usage", headers=site.alice)
    assert posted.status_code == 405 and posted.json()["error"] == "method_not_allowed"


days = st.dates(min_value=dt.date(1, 1, 1)).map(dt.date.isoformat)
values = st.one_of(days, st.text(max_size=20), st.sampled_from(["", "2026-13-01", "0000-00-00"]))
queries = st.dictionaries(st.sampled_from(["since", "until", "user_id", "x"]), values, max_size=4)


def test_any_query_is_a_200_within_its_range_or_a_400_json_never_a_5xx(site: Site) -> None:
    with httpx.Client(base_url=site.url, headers=site.alice) as client:

        @settings(max_examples=150, deadline=None, derandomize=True)
        @given(query=queries)
        def check(query: dict[str, str]) -> None:
            answer = client.get("/gateway/usage", params=query)
            body = answer.json()
            if answer.status_code == 400:
                assert body["error"] == "invalid_range" and isinstance(body["message"], str)
                return
            assert answer.status_code == 200, answer.text
            assert body["user_id"] == "alice"  # user_id in the query names nobody else
            since, until = body["since"] or "", body["until"] or "9999-12-31"
            assert all(since <= day["day"] <= until for day in body["days"])
            assert body["totals"]["runs"] == sum(day["runs"] for day in body["days"])

        check()


def test_usage_routes_alone_around_a_starlette_app(log: EventLog) -> None:
    def by_header(scope: Scope) -> Principal | None:
        user = dict(scope["headers"]).get(b"x-user")
        return Principal(user.decode(), "header") if user else None

    async def hello(request: StarletteRequest) -> PlainTextResponse:
        return PlainTextResponse("from starlette")

    owners = StreamOwners(log)
    owners.declare("ada-notes", "ada")
    UsageLedger(log).record(entry_of(ended("a1", "ada-notes"), usage(2, 2), "k1", "ada", 0.0))
    plugins = Plugins([plugin("header-sso", resolve_principal=by_header)], load_entry_points=False)
    app = Starlette(routes=[Route("/hello", hello), Route("/api/usage", hello)])
    stack = IdentityMiddleware(
        UsageRoutes(app, ledger=UsageLedger(log), prefix="/gw", legacy_path=None), plugins=plugins
    )

    async def main() -> None:
        transport = httpx.ASGITransport(app=stack)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            mine = await client.get("/gw/usage", headers={"x-user": "ada"})
            assert mine.json()["totals"]["total_tokens"] == 4
            assert (await client.get("/hello")).text == "from starlette"
            # legacy_path=None: the app keeps its own /api/usage.
            assert (await client.get("/api/usage")).text == "from starlette"

    asyncio.run(main())


def run_until_finished(
    client: httpx.Client, headers: dict[str, str], stream: str, message: str
) -> None:
    started = client.post(f"/gateway/streams/{stream}/runs", headers=headers,
                          json={"message": message})  # fmt: skip
    assert started.status_code == 200, started.text
    run = f"/gateway/runs/{started.json()['run_id']}"
    wait_until(lambda: client.get(run, headers=headers).json()["status"] == "finished", 20)


def test_runs_two_users_started_over_http_land_each_in_their_own_usage(log: EventLog) -> None:
    fake = FakeGoose(ping_interval=0.2)  # each default turn uses one token per word, each way
    with serve_in_thread(fake, lifespan="off") as goose_url:
        upstream = GooseUpstream(base_url=goose_url, secret_key=fake.secret_key)
        gateway = Gateway(
            log=log,
            upstream=upstream,
            load_entry_points=False,
            settings=GatewaySettings(pumps=FAST),
            legacy=LegacySurfaces(usage="/api/usage"),
        )
        alice, bob = bearer(log, "alice"), bearer(log, "bob")
        with serve_in_thread(gateway) as url, httpx.Client(base_url=url) as client:
            for headers, stream, message in [
                (alice, "alice-chat", "one two three"),
                (bob, "bob-chat", "four"),
                (alice, "alice-chat", "five six"),
            ]:
                run_until_finished(client, headers, stream, message)

            def usage_of(headers: dict[str, str], runs: int) -> dict[str, Any]:
                wait_until(lambda: client.get("/gateway/usage", headers=headers).json()
                           ["totals"]["runs"] == runs, timeout=20)  # fmt: skip
                found: dict[str, Any] = client.get("/gateway/usage", headers=headers).json()
                return found

            mine, theirs = usage_of(alice, 2), usage_of(bob, 1)
            legacy = client.get("/api/usage", headers=alice).json()

    assert mine["user_id"] == "alice"
    assert (mine["totals"]["input_tokens"], mine["totals"]["output_tokens"]) == (5, 5)
    assert (theirs["user_id"], theirs["totals"]["total_tokens"]) == ("bob", 2)
    assert (legacy["used_tokens"], legacy["runs"], legacy["today"]["runs"]) == (10, 2, 2)
