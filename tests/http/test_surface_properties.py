"""The HTTP surface under random requests: never a 5xx, and a refused request writes nothing.

Requests are built from the gateway's real route templates (read off its stack), with random
methods, mangled segments, cursors, limits, headers and bodies, plus the legacy task poll and
paths that are none of the gateway's. For every one:

- the status is a 2xx or one of the 4xx a client's mistake may get (`ALLOWED_STATUSES`);
- a 4xx is the JSON error body (``content-type: application/json``, ``error`` and ``message``
  strings), a 405 names what is allowed;
- a 4xx changed no row of the events, runs and session tables, and asked goose for nothing;
- only a POST the gateway accepted may write, and nothing under the prefix reaches the app;
- an SSE answer is a 200 that ends once the client hangs up.

One gateway serves every example (built once per test, on one event loop); after a run starts,
the example waits until the run has ended, so that nothing writes while the next one looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Iterator

from hypothesis import example, given, settings

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings, RunSettings
from gateway_kit.testing import FakeGoose
from tests.support.raw_requests import (
    ALLOWED_STATUSES,
    JSON_TYPE,
    PREFIX,
    WRAPPED_MARK,
    Answer,
    Call,
    assert_json_error,
    get,
    goose_calls,
    post_json,
    running_gateway,
    wait_run_ended,
    writes,
)

from .request_strategies import (
    LEGACY,
    MAX_BODY,
    MAX_MESSAGE,
    TEMPLATES,
    Requests,
    calls,
    gateway_routes,
)

EXAMPLES = 300  # per backend, beside the explicit ones: the file runs in about 20 s on 2 cores


class Surface:
    """One gateway for every example, and the checks each example's answer must pass."""

    def __init__(self, gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        self.gateway, self.log, self.fake = gateway, log, fake
        self.seen: set[tuple[int, str | None]] = set()

    async def check(self, call: Call) -> Answer:
        before, asked = writes(self.log), goose_calls(self.fake)
        answer = await call(self.gateway)
        assert answer.status in ALLOWED_STATUSES, (answer.status, answer.body[:300])
        path = call.raw_path.decode("utf-8")
        ours = answer.header(WRAPPED_MARK) is None
        if path == PREFIX or path.startswith(PREFIX + "/"):
            assert ours, "the wrapped app was reached under the prefix"
        code = None
        if answer.status >= 400:
            code = assert_json_error(answer, answer.status)["error"]
            assert writes(self.log) == before, "a refused request wrote to the database"
            assert goose_calls(self.fake) == asked, "a refused request reached goose"
        elif call.method != "POST":
            assert writes(self.log) == before, f"a {call.method} wrote to the database"
            assert goose_calls(self.fake) == asked, f"a {call.method} reached goose"
        if answer.status == 405:
            allowed = [m.strip() for m in (answer.header("allow") or "").split(",")]
            assert all(allowed) and call.method not in allowed, answer.headers
        if answer.streamed:
            assert answer.status == 200, answer.status
            code = "sse"
        elif ours and call.method == "POST" and answer.status == 200:
            run_id = answer.json().get("run_id")
            if run_id is not None:
                await wait_run_ended(self.gateway, run_id)
        self.seen.add((answer.status, code if ours else "wrapped"))
        return answer


@contextlib.contextmanager
def surface(log_url: str) -> Iterator[tuple[asyncio.Runner, Surface, list[str]]]:
    """The gateway on one event loop, with a run of stream "conv" that ended; the names the
    log knows (its streams, that run's id) are what random paths mix in."""
    with asyncio.Runner() as runner, contextlib.ExitStack() as closing:
        fake = FakeGoose(ping_interval=0.05)
        gates = contextlib.AsyncExitStack()
        opened = running_gateway(
            log_url,
            fake,
            settings=GatewaySettings(
                http=HttpSettings(max_body_bytes=MAX_BODY),
                runs=RunSettings(max_message_bytes=MAX_MESSAGE),
            ),
        )
        gateway, log = runner.run(gates.enter_async_context(opened))
        closing.callback(lambda: runner.run(gates.aclose()))
        checker = Surface(gateway, log, fake)
        first = post_json(f"{PREFIX}/streams/conv/runs", {"message": "hi"})
        started = runner.run(checker.check(first))
        assert started.status == 200, started.body
        yield runner, checker, ["conv", "other", started.json()["run_id"], str(uuid.uuid4())]


def known_cases(run_id: str) -> list[Call]:
    """Each way the surface used to fail, tried on every run before the random requests."""
    huge = "9" * 5000
    zeros = "0" * 5000 + "1"  # a small number, behind more digits than an int takes
    runs = f"{PREFIX}/streams/conv/runs"

    def post(body: bytes, headers: list[tuple[bytes, bytes]] = JSON_TYPE) -> Call:
        return Call("POST", runs.encode(), headers=headers, body=body)

    return [
        post_json(f"{PREFIX}/streams/{'s' * 201}/runs", {"message": "hi"}),
        post_json(f"{PREFIX}/streams/a%00b/runs", {"message": "hi"}),
        post(b"[" * (MAX_BODY // 2)),  # a RecursionError in the decoder, within the size limit
        post(b'{"message": "\\ud800"}'),
        post(b'{"message": "a\\u0000b"}'),
        post(b'{"message": "' + b"x" * MAX_BODY + b'"}'),  # over the size limit
        post(b'{"message": "hi"}', [(b"content-type", b"text/plain")]),
        post(b'{"message": "hi"}', [*JSON_TYPE, (b"content-length", huge.encode())]),
        post(b'{"message": "hi"}', [*JSON_TYPE, (b"content-length", zeros.encode())]),
        get(f"{PREFIX}/streams/conv/events", accept="application/json", last_event_id=huge),
        get(f"{PREFIX}/streams/conv/events", f"after={huge}"),
        get(f"{PREFIX}/streams/conv/events", f"limit={huge}", accept="application/json"),
        get(f"{PREFIX}/runs/{run_id}/events", accept="application/json", last_event_id=huge),
        get(f"{LEGACY}/{run_id}", f"from={huge}"),
        get(f"{PREFIX}/streams/conv/events", f"after={zeros}"),
        get(f"{PREFIX}/streams/conv/events", accept="application/json", last_event_id=zeros),
        get(f"{PREFIX}/streams/conv/events", f"limit={zeros}", accept="application/json"),
        get(f"{PREFIX}/runs/{run_id}/events", last_event_id=zeros),
        get(f"{LEGACY}/{run_id}", f"from={zeros}"),
        post(json.dumps({"message": "x" * (MAX_MESSAGE + 1)}).encode()),  # over the run's limit
        get(f"{PREFIX}/runs/{uuid.uuid4()}/events"),
        Call("PUT", runs.encode()),
        post(b'{"message": "a run that starts"}'),
    ]


def test_no_request_is_a_5xx_and_a_refused_one_writes_nothing(log_url: str) -> None:
    with surface(log_url) as (runner, checker, known):
        routes = gateway_routes(checker.gateway)
        assert {r.path for r in routes} >= TEMPLATES  # the stack was walked
        requests = Requests(routes, known, checker.log.epoch)

        # An inner test: the gateway (built per test, from a function-scoped fixture) is
        # what the examples share, so it is not rebuilt per example.
        def one_request(call: Call) -> None:
            runner.run(checker.check(call))

        test = given(calls(requests))(one_request)
        for case in known_cases(known[2]):
            test = example(case)(test)
        settings(max_examples=EXAMPLES, deadline=None)(test)()
        statuses = {status for status, _ in checker.seen}
        assert {200, 400, 404, 405, 413, 415} <= statuses, checker.seen  # the examples ran
