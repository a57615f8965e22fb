"""While the identity plugin cannot be asked (it has `plugin_hung_limit` calls hung), every
request, whatever it is and wherever it goes, is answered 503 ``plugin_unavailable`` with
``Retry-After`` and the JSON error body: not a 401 that would send a client to log in again,
not a 5xx of another kind; and it writes nothing, reaches neither the wrapped app nor goose."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings

from gateway_kit import GatewaySettings, PluginSettings, Principal, hookimpl
from gateway_kit.http.errors import PLUGIN_UNAVAILABLE
from gateway_kit.identity.middleware import IdentityMiddleware
from gateway_kit.testing import FakeGoose
from tests.support.raw_requests import (
    WRAPPED_MARK,
    Answer,
    Call,
    assert_json_error,
    get,
    goose_calls,
    running_gateway,
    writes,
)
from tests.support.waiting import until

from .request_strategies import Requests, calls, gateway_routes

EXAMPLES = 100
HUNG = "hung-directory"


class HungDirectory:
    """`resolve_principal` of a directory that never answers, until the test ends."""

    __name__ = HUNG

    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def resolve_principal(self, scope: Any) -> Principal | None:
        self.release.wait(60)
        return None


def assert_plugin_unavailable(answer: Answer) -> None:
    assert_json_error(answer, 503, PLUGIN_UNAVAILABLE)
    retry_after = answer.header("retry-after")
    assert retry_after is not None and int(retry_after) > 0, answer.headers
    assert answer.header(WRAPPED_MARK) is None, "the wrapped app was reached"


@contextlib.contextmanager
def capped_gateway(log_url: str) -> Iterator[tuple[asyncio.Runner, Any, Any, FakeGoose]]:
    """A gateway whose one resolver has a call hung, its limit."""
    directory = HungDirectory()
    with asyncio.Runner() as runner, contextlib.ExitStack() as closing:
        fake = FakeGoose(ping_interval=0.05)
        gates = contextlib.AsyncExitStack()
        opened = running_gateway(
            log_url,
            fake,
            plugins=[directory],
            settings=GatewaySettings(plugins=PluginSettings(timeout=0.1, hung_limit=1)),
        )
        gateway, log = runner.run(gates.enter_async_context(opened))
        closing.callback(lambda: runner.run(gates.aclose()))
        closing.callback(directory.release.set)  # before the gateway closes
        asked = runner.run(get("/gateway/streams/conv/events", accept="application/json")(gateway))
        assert_json_error(asked, 401, "unauthenticated")  # asked, and it did not answer in time
        runner.run(until(lambda: gateway.plugins.hung.full(HUNG)))
        yield runner, gateway, log, fake


def test_every_request_is_a_503_to_retry_while_the_resolver_cannot_be_asked(log_url: str) -> None:
    with capped_gateway(log_url) as (runner, gateway, log, fake):
        known = ["conv", "other", str(uuid.uuid4()), str(uuid.uuid4())]
        requests = Requests(gateway_routes(gateway), known, log.epoch)

        def one_request(call: Call) -> None:
            before, asked = writes(log), goose_calls(fake)
            assert_plugin_unavailable(runner.run(call(gateway)))
            assert writes(log) == before, "a request answered 503 wrote to the database"
            assert goose_calls(fake) == asked, "a request answered 503 reached goose"

        settings(max_examples=EXAMPLES, deadline=None)(given(calls(requests))(one_request))()
        # The wrapped app's own pages too: the identity stage asks before any of them.
        assert_plugin_unavailable(runner.run(get("/login")(gateway)))


def test_a_websocket_handshake_is_refused_with_try_again_later(log_url: str) -> None:
    with capped_gateway(log_url) as (runner, gateway, _, _):
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "websocket.connect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "websocket", "path": "/ws", "headers": [], "query_string": b""}
        runner.run(gateway(scope, receive, send))
        assert [(m["type"], m["code"]) for m in sent] == [("websocket.close", 1013)]


def test_the_identity_stage_alone_answers_the_503_itself(log_url: str) -> None:
    with capped_gateway(log_url) as (runner, gateway, _, _):
        reached: list[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            reached.append(scope["path"])

        alone = IdentityMiddleware(app, plugins=gateway.plugins)
        assert_plugin_unavailable(runner.run(get("/anything")(alone)))
        assert reached == []
