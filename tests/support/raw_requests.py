"""What the hostile-input tests share: a raw ASGI client, a gateway over the fake goose, and
snapshots of everything a request may write (the three tables) or ask of goose.

The client is raw on purpose: the tests send what httpx would never send (a Content-Length that
lies, a path that is not valid percent-encoding, raw non-ASCII bytes) and must not hang on SSE
(httpx's ASGITransport buffers the whole response). An SSE response is hung up on as soon as it
has started, unless the test asks for more of it; either way the app must then return.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx
import sqlalchemy as sa

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.bindings.tables import SESSIONS
from gateway_kit.runs.model import RunStatus
from gateway_kit.runs.tables import RUNS
from gateway_kit.testing import FakeGoose
from gateway_kit.types import ASGIApp, Message, Receive, Scope, Send
from tests.support.asgi_driver import http_scope
from tests.support.legacy_paths import EXAMPLE_LEGACY
from tests.support.upstream import GOOSE_URL, fast_pumps, until

PREFIX = "/gateway"
WAIT = 10.0  # seconds an answer that should come at once may take
WRAPPED_MARK = "x-wrapped-app"
JSON_TYPE = [(b"content-type", b"application/json")]
ALLOWED_STATUSES = frozenset({200, 204, 400, 401, 403, 404, 405, 409, 413, 415, 429})


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    streamed: bool  # an SSE response, hung up on by the client

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Call:
    """One request to an ASGI app, as a careless client might send it."""

    method: str
    raw_path: bytes
    query: bytes = b""
    headers: Sequence[tuple[bytes, bytes]] = ()
    body: bytes = b""
    chunk: int = 0  # send the body in pieces of this size (0: one piece)
    # For an SSE response: hang up once this holds of the body so far (default: at once).
    enough: Callable[[bytes], bool] = field(default=lambda body: True)

    def scope(self) -> Scope:
        return http_scope(
            self.method, self.raw_path, self.query, [(k.lower(), v) for k, v in self.headers]
        )

    async def __call__(self, app: ASGIApp) -> Answer:
        size = self.chunk or max(len(self.body), 1)
        pieces = [self.body[i : i + size] for i in range(0, len(self.body), size)] or [b""]
        hang_up = asyncio.Event()
        start: Message | None = None
        body = bytearray()
        complete = False
        streamed = False

        async def receive() -> Message:
            if pieces:
                piece = pieces.pop(0)
                return {"type": "http.request", "body": piece, "more_body": bool(pieces)}
            await hang_up.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal start, complete, streamed
            if message["type"] == "http.response.start":
                assert start is None, "a second response start"
                start = message
                types = [v for k, v in message["headers"] if k.lower() == b"content-type"]
                streamed = any(v.startswith(b"text/event-stream") for v in types)
            else:
                assert start is not None, "a body before the response start"
                assert not complete, "a message after the response completed"
                body.extend(message.get("body", b""))
                complete = not message.get("more_body", False)
            if streamed and self.enough(bytes(body)):
                hang_up.set()

        await asyncio.wait_for(app(self.scope(), receive, send), WAIT)
        assert start is not None, "the app returned without answering"
        assert streamed or complete, "the app returned without finishing its answer"
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in start["headers"]]
        return Answer(start["status"], headers, bytes(body), streamed)


def post_json(
    path: str, document: object, *, headers: Sequence[tuple[bytes, bytes]] = JSON_TYPE
) -> Call:
    return Call("POST", path.encode(), headers=headers, body=json.dumps(document).encode())


def get(path: str, query: str = "", **headers: str) -> Call:
    items = [(k.replace("_", "-").encode(), v.encode("latin-1")) for k, v in headers.items()]
    return Call("GET", path.encode(), query=query.encode(), headers=items)


async def wrapped_app(scope: Scope, receive: Receive, send: Send) -> None:
    """The app the gateway wraps: 200 for anything, marked so a test can tell who answered."""
    if scope["type"] != "http":
        return
    headers = [(b"content-type", b"text/plain"), (WRAPPED_MARK.encode(), b"1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"the wrapped app", "more_body": False})


@asynccontextmanager
async def running_gateway(
    log_url: str,
    fake: FakeGoose,
    *,
    app: Any = wrapped_app,
    allow_anonymous: bool = True,
    settings: GatewaySettings | None = None,
    **options: Any,
) -> AsyncIterator[tuple[Gateway, EventLog]]:
    """A gateway around `app` (by default `wrapped_app`), its upstream the fake goose
    (through respx)."""
    log = EventLog(log_url)
    goose_client = httpx.AsyncClient()
    try:
        with respx.mock(assert_all_called=False) as router:
            fake.mock(router, base_url=GOOSE_URL)
            upstream = GooseUpstream(
                base_url=GOOSE_URL, secret_key=fake.secret_key, client=goose_client
            )
            gateway = Gateway(
                app,
                log=log,
                upstream=upstream,
                allow_anonymous=allow_anonymous,
                settings=fast_pumps(settings),
                **{"wsgi": False if app is wrapped_app else None, **EXAMPLE_LEGACY, **options},
            )
            try:
                yield gateway, log
            finally:
                assert gateway.pumps is not None
                await gateway.pumps.stop()
                await fake.wait_idle()
    finally:
        await goose_client.aclose()
        log.close()


@dataclass(frozen=True)
class Writes:
    """What a request may have written: the log's size and head, every run and binding row."""

    events: tuple[int, int]
    runs: tuple[tuple[Any, ...], ...]
    sessions: tuple[tuple[Any, ...], ...]


def writes(log: EventLog) -> Writes:
    with log.tables.engine.connect() as conn:
        events = conn.execute(
            sa.text("SELECT count(*), coalesce(max(seq), 0) FROM gateway_kit_events")
        )
        runs = conn.execute(sa.text(f"SELECT * FROM {RUNS} ORDER BY run_id"))
        sessions = conn.execute(sa.text(f"SELECT * FROM {SESSIONS} ORDER BY stream"))
        count, head = events.one()
        return Writes(
            (int(count), int(head)),
            tuple(tuple(row) for row in runs),
            tuple(tuple(row) for row in sessions),
        )


@dataclass(frozen=True)
class GooseCalls:
    """What the gateway asked of goose that a run request may cause."""

    starts: int  # POST /agent/start: a session made for a stream
    sessions: int
    replies: int
    cancels: int


def goose_calls(fake: FakeGoose) -> GooseCalls:
    starts = sum(1 for r in fake.requests if r.method == "POST" and r.path == "/agent/start")
    return GooseCalls(starts, len(fake.sessions), len(fake.reply_calls), len(fake.cancel_calls))


def assert_json_error(answer: Answer, status: int, code: str | None = None) -> dict[str, Any]:
    """`answer` is the JSON error body with `status` (and `code`, when given)."""
    assert answer.status == status, (answer.status, answer.body[:300])
    assert answer.header("content-type") == "application/json", answer.headers
    document = answer.json()
    assert isinstance(document, dict), document
    assert isinstance(document.get("error"), str), document
    assert isinstance(document.get("message"), str), document
    if code is not None:
        assert document["error"] == code, document
    return document


async def wait_run_ended(gateway: Gateway, run_id: str) -> None:
    """Until the run's row says it ended: the pump has then written all it will for it."""
    assert gateway.pumps is not None
    store = gateway.pumps.store

    def ended() -> bool:
        run = store.get(run_id)
        return run is not None and run.status is not RunStatus.ACTIVE

    await until(ended)
