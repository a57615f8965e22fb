"""While the database cannot be reached, a request that needs it is answered 503 with
``Retry-After`` and the JSON error ``database_unavailable``: not a 500, and not a 401 telling
a client whose credentials are fine to log in again. Once the database is back, the same
requests are served again, by the same gateway."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import Gateway
from gateway_kit.http.errors import DATABASE_UNAVAILABLE
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.log.reconnect import GATE_MAX
from gateway_kit.settings import DEFAULT_LEGACY_TASKS_PATH, DEFAULT_LEGACY_USAGE_PATH
from gateway_kit.testing import FakeGoose
from tests.support.postgres import PgServer
from tests.support.raw_requests import (
    JSON_TYPE,
    PREFIX,
    Answer,
    Call,
    assert_json_error,
    get,
    post_json,
    running_gateway,
    wait_run_ended,
)
from tests.support.waiting import wait_until

STREAM = "conv"
EXAMPLES = 60
METHODS = ("GET", "POST", "DELETE", "PUT")
LEGACY = DEFAULT_LEGACY_TASKS_PATH.rstrip("/")


def assert_unavailable(answer: Answer) -> None:
    assert_json_error(answer, 503, DATABASE_UNAVAILABLE)
    retry_after = answer.header("retry-after")
    assert retry_after is not None and int(retry_after) > 0, answer.headers


def requests(run_id: str, auth: str | None) -> list[Call]:
    headers = {} if auth is None else {"authorization": auth}
    extra = [] if auth is None else [(b"authorization", auth.encode())]
    json_type = [*JSON_TYPE, *extra]
    return [
        post_json(f"{PREFIX}/streams/{STREAM}/runs", {"message": "hi"}, headers=json_type),
        get(f"{PREFIX}/streams/{STREAM}/events", accept="application/json", **headers),
        get(f"{PREFIX}/streams/{STREAM}/events", **headers),  # SSE
        get(f"{PREFIX}/runs/{run_id}", **headers),
        get(f"{PREFIX}/runs/{run_id}/events", **headers),
        Call("POST", f"{PREFIX}/runs/{run_id}/cancel".encode(), headers=extra),
        Call("POST", f"{PREFIX}/socket-tickets".encode(), headers=extra),
        get(f"{PREFIX}/streams/{STREAM}/presence", **headers),
        get(f"{LEGACY}/{run_id}", **headers),
        # The usage of nobody (anonymous) is a 401 that asks no database.
        *(
            [get(f"{PREFIX}/usage", **headers), get(DEFAULT_LEGACY_USAGE_PATH, **headers)]
            if auth is not None
            else []
        ),
    ]


@contextlib.contextmanager
def gateway_on(url: str) -> Iterator[tuple[asyncio.Runner, Gateway, str, str]]:
    """A gateway on `url` with a run of STREAM that ended, and a token of its owner."""
    with asyncio.Runner() as runner:
        gates = contextlib.AsyncExitStack()
        fake = FakeGoose(ping_interval=0.05)
        gateway, log = runner.run(
            # Anonymous requests reach the routes; a token is checked by the identity stage.
            gates.enter_async_context(running_gateway(url, fake, allow_anonymous=True))
        )
        try:
            StreamOwners(log).declare(STREAM, "alice")
            _, token = ApiTokens(log).create("alice")
            auth = f"Bearer {token}"
            started = runner.run(
                post_json(
                    f"{PREFIX}/streams/{STREAM}/runs",
                    {"message": "hi"},
                    headers=[*JSON_TYPE, (b"authorization", auth.encode())],
                )(gateway)
            )
            assert started.status == 200, started.body
            run_id = started.json()["run_id"]
            runner.run(wait_run_ended(gateway, run_id))
            yield runner, gateway, run_id, auth
        finally:
            runner.run(gates.aclose())


def test_every_route_answers_503_while_the_database_is_down_and_serves_after(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    with gateway_on(throwaway_pg_url) as (runner, gateway, run_id, auth):
        throwaway_pg.kill()
        # Tokens are checked in memory, so both kinds of request reach the routes, each of
        # which needs the database.
        for call in [*requests(run_id, auth), *requests(run_id, None)]:
            assert_unavailable(runner.run(call(gateway)))
        throwaway_pg.start()
        page_call = get(f"{PREFIX}/streams/{STREAM}/events", accept="application/json",
                        authorization=auth)  # fmt: skip
        # A connect tried while the server was still starting (by the listener, say) makes
        # calls fail fast for the gate's short pause after it: served again within a few.
        answers: list[Answer] = []
        wait_until(
            lambda: answers.append(runner.run(page_call(gateway))) or answers[-1].status == 200,
            timeout=GATE_MAX * 4,
        )
        page = answers[-1]
        assert page.json()["terminal"] is not None or page.json()["events"]
        ticket = runner.run(Call("POST", f"{PREFIX}/socket-tickets".encode(),
                                 headers=[(b"authorization", auth.encode())])(gateway))  # fmt: skip
        assert ticket.status == 200, ticket.body


def test_no_request_gets_a_500_or_a_401_while_the_database_is_down(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    with gateway_on(throwaway_pg_url) as (runner, gateway, run_id, auth):
        throwaway_pg.kill()
        names = ["streams", "runs", STREAM, run_id, "events", "cancel", "presence", "x", "%2F"]
        segments = st.sampled_from([*names, "socket-tickets", "9" * 30])

        @given(
            method=st.sampled_from(METHODS),
            path=st.lists(segments, min_size=1, max_size=4),
            with_token=st.booleans(),
            json_page=st.booleans(),
        )
        @settings(max_examples=EXAMPLES, deadline=None)
        def one_request(method: str, path: list[str], with_token: bool, json_page: bool) -> None:
            headers = [(b"authorization", auth.encode())] if with_token else []
            if json_page:
                headers.append((b"accept", b"application/json"))
            call = Call(method, f"{PREFIX}/{'/'.join(path)}".encode(), headers=headers)
            answer = runner.run(call(gateway))
            if answer.status == 503:
                assert_unavailable(answer)
            else:  # a request that needs no database: a client's mistake, never ours (a
                # token is checked in memory, so it is still known while the database is away)
                assert 400 <= answer.status < 500 and answer.status != 401, answer

        one_request()
