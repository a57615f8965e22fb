"""The servers the stream benchmarks compare, each run alone under uvicorn in its own process.

    python bench/_apps.py KIND PORT_FILE [DB_FILE]

binds 127.0.0.1 on a free port, writes the port to PORT_FILE and serves KIND until SIGTERM:

- ``legacy``: the example app of `gateway_kit.demo` as it was before gateway_kit (every task's
  events in a deque in process memory, ``GET /api/tasks/<id>?from=`` polled by clients, login
  with a session cookie), under `a2wsgi` with `WSGI_WORKERS` threads.
- ``peer``: what a user would otherwise write: Starlette + sse-starlette, each stream's events in
  a Python list, resumed by ``Last-Event-ID``; nothing survives a restart.
- ``gateway``: gateway_kit's `Gateway` over an `EventLog` in the SQLite file DB_FILE, wrapping a
  small Starlette app whose route appends with `EventLog.aappend` (a durable commit first).
- ``hello-bare`` / ``hello-gateway``: one small Flask route, under bare `a2wsgi` or through
  `Gateway`, with the same worker threads (``hello-gateway-cookie``: through a strict
  `Gateway` that resolves every request's Flask session cookie).
- ``chat-observed`` / ``chat-unobserved``: a small Flask app answering OpenAI-style
  ``POST /v1/chat/completions`` (a JSON answer, or with ``"stream": true`` an SSE stream of
  ``max_tokens`` chunks of about 1 KiB), through `Gateway` with its execution observer, or
  with ``observe_execution=False``.
- ``goose-approve``: the fake goose in approve mode (`NotedGoose`), its secret key
  `gateway_kit.testing`'s default.
- ``gateway-approvals``: `Gateway` over the SQLite file DB_FILE, its upstream the
  ``goose-approve`` server at ``$GATEWAY_KIT_BENCH_GOOSE_URL``, noting each approval decision's
  arrival (`NotedDecisions`).
- ``socketio-bare``: a bare python-socketio server at ``/gateway/socket.io``, whose
  ``subscribe`` joins a room per stream and whose ``POST /bench/append`` emits the event to
  that room from memory (the same envelope shape as the gateway's).
- ``socketio-durable``: the same server, whose ``POST /bench/append`` first commits the event
  to raw sqlite3 in DB_FILE (WAL, ``synchronous=FULL``, the log's table), on the event loop
  itself: what a durable commit costs, with nothing of gateway_kit in between.

Appends go through HTTP routes of the server itself, ``POST /bench/append`` (JSON
``{"stream", "type", "data"}``) and ``POST /bench/fill`` (``{"stream", "count"}``: the server
builds that many events, in pages, for the replay benchmark); the legacy app's are
``POST /bench/tasks`` (a new task of the logged-in user) and ``POST /bench/tasks/<id>/events``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from _common import TYPE, encode, payload
from _harness import DEFAULT_NOOP_PLUGINS, PLUGINS_VAR, USER, raise_open_files, uvicorn_stack
from a2wsgi import WSGIMiddleware
from flask import Flask, Response, jsonify, request
from flask.typing import ResponseReturnValue
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway_kit import (
    EventLog,
    ExecutionSettings,
    Gateway,
    GatewaySettings,
    GooseUpstream,
    HttpSettings,
    IdentitySettings,
    StreamSettings,
    hookimpl,
)
from gateway_kit.bindings.claims import claims_of
from gateway_kit.demo import create_app
from gateway_kit.demo.app import TASKS_EXTENSION, current_user
from gateway_kit.demo.tasks import TaskStore
from gateway_kit.principal import ANONYMOUS

WSGI_WORKERS = 10  # a2wsgi threads, the same for every WSGI app here (Gateway's default)
PING_INTERVAL = 15.0  # seconds, both SSE servers (sse-starlette's and gateway_kit's default)
SEND_TIMEOUT = 30.0  # seconds, both SSE servers
FILL_PAGE = 1000
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


# --- legacy: the demo app, events in per-task deques ---------------------------------------


def legacy_flask() -> Flask:
    app = create_app({"DEMO_USERS": {USER: USER}})
    store: TaskStore = app.extensions[TASKS_EXTENSION]

    @app.post("/bench/tasks")
    def new_task() -> ResponseReturnValue:
        user = current_user()
        if user is None:
            return jsonify(error="login_required"), 401
        return jsonify(task_id=store.create("bench", owner=user).task_id)

    @app.post("/bench/tasks/<task_id>/events")
    def append_to_task(task_id: str) -> ResponseReturnValue:
        task = store.get(task_id)
        if task is None:
            return jsonify(error="not_found"), 404
        body = request.get_json()
        store.append(task, body["type"], body["data"])
        return jsonify(ok=True)

    return app


# --- peer: Starlette + sse-starlette, events in a list -------------------------------------


class ListStream:
    """One stream: envelope JSON texts in a list; an asyncio.Event replaced on every append."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.envelopes: list[str] = []
        self.changed = asyncio.Event()

    def append(self, type: str, data: dict[str, Any]) -> int:
        seq = len(self.envelopes) + 1
        envelope = {"seq": seq, "stream": self.name, "pos": seq, "run_id": None, "type": type}
        self.envelopes.append(encode({**envelope, "data": data, "upstream_event_id": None}))
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()
        return seq


def peer_app() -> Starlette:
    streams: dict[str, ListStream] = {}

    def stream_named(name: str) -> ListStream:
        if name not in streams:
            streams[name] = ListStream(name)
        return streams[name]

    async def events(req: Request) -> EventSourceResponse:
        stream = stream_named(req.path_params["stream"])
        after = int(req.headers.get("last-event-id") or req.query_params.get("after") or 0)

        async def frames() -> AsyncIterator[ServerSentEvent]:
            sent = after
            while True:
                while sent < len(stream.envelopes):
                    sent += 1
                    yield ServerSentEvent(data=stream.envelopes[sent - 1], id=str(sent))
                await stream.changed.wait()

        return EventSourceResponse(
            frames(), ping=PING_INTERVAL, send_timeout=SEND_TIMEOUT, headers=SSE_HEADERS
        )

    async def append(req: Request) -> JSONResponse:
        body = await req.json()
        seq = stream_named(body["stream"]).append(body["type"], body["data"])
        return JSONResponse({"seq": seq})

    async def fill(req: Request) -> JSONResponse:
        body = await req.json()
        stream = stream_named(body["stream"])
        for i in range(body["count"]):
            stream.append(TYPE, payload(i))
        return JSONResponse({"seq": len(stream.envelopes)})

    return Starlette(
        routes=[
            Route("/streams/{stream}/events", events),
            Route("/bench/append", append, methods=["POST"]),
            Route("/bench/fill", fill, methods=["POST"]),
        ]
    )


# --- gateway_kit: Gateway over the EventLog ------------------------------------------------


class NoopPlugin:
    """A plugin that implements every hook and decides nothing."""

    def __init__(self, number: int) -> None:
        self.__name__ = f"noop-{number}"

    @hookimpl
    def resolve_principal(self, scope: Any) -> None:
        return None

    @hookimpl
    def authorize_subscription(self, principal: Any, stream: str) -> None:
        return None

    @hookimpl
    def finish_guard(self, run: Any, events: Any) -> None:
        return None

    @hookimpl
    def bill_run(self, run: Any, usage: Any, idempotency_key: str) -> None:
        return None

    @hookimpl
    def classify_error(self, error: str, run: Any) -> None:
        return None

    @hookimpl
    def plan_recovery(self, error_class: str, run: Any, attempts: Any) -> None:
        return None

    @hookimpl
    def resolve_tmux_session(self, scope: Any) -> None:
        return None

    @hookimpl
    def heartbeat_policy(self, state: Any, now: float) -> None:
        return None

    @hookimpl
    def heartbeat_fallback(self, tmux_session_id: str) -> None:
        return None

    @hookimpl
    def configure_plugin(self, config: Any) -> None:
        return None


def noop_plugins() -> list[NoopPlugin]:
    count = int(os.environ.get(PLUGINS_VAR, DEFAULT_NOOP_PLUGINS))
    return [NoopPlugin(i) for i in range(count)]


def gateway_app(db_file: str) -> Gateway:
    log = EventLog(f"sqlite:///{db_file}")

    async def append(req: Request) -> JSONResponse:
        body = await req.json()
        event = await log.aappend(body["stream"], body["type"], body["data"])
        return JSONResponse({"seq": event.seq})

    async def fill(req: Request) -> JSONResponse:
        body = await req.json()
        count, seq = body["count"], 0
        for first in range(0, count, FILL_PAGE):
            page = [
                {"stream": body["stream"], "type": TYPE, "data": payload(i)}
                for i in range(first, min(first + FILL_PAGE, count))
            ]
            seq = (await log.aappend_many(page))[-1].seq
        return JSONResponse({"seq": seq})

    routes = Starlette(
        routes=[
            Route("/bench/append", append, methods=["POST"]),
            Route("/bench/fill", fill, methods=["POST"]),
        ]
    )
    return Gateway(
        routes,
        allow_anonymous=True,
        log=log,
        settings=GatewaySettings(
            # a client process connects hundreds at once
            identity=IdentitySettings(ticket_rate=(1_000_000, 1.0)),
            streams=StreamSettings(ping_interval=PING_INTERVAL),
            http=HttpSettings(send_timeout=SEND_TIMEOUT),
        ),
        wsgi=False,
        plugins=noop_plugins(),
        load_entry_points=False,  # exactly the built-ins and the no-op plugins
    )


# --- a plain Flask route, for the pass-through benchmark -----------------------------------


# The hello app signs its session cookie with this; the cookie-identity gateway reads it.
HELLO_SECRET_KEY = "bench-hello-secret"


def hello_flask() -> Flask:
    app = Flask("hello")
    app.config["SECRET_KEY"] = HELLO_SECRET_KEY

    @app.get("/hello")
    def hello() -> ResponseReturnValue:
        return jsonify(hello="world", n=1)

    return app


def hello_gateway(db_file: str) -> Gateway:
    log = EventLog(f"sqlite:///{db_file}")
    return Gateway(
        hello_flask(),
        allow_anonymous=True,
        log=log,
        settings=GatewaySettings(http=HttpSettings(wsgi_workers=WSGI_WORKERS)),
        plugins=noop_plugins(),
        load_entry_points=False,  # exactly the built-ins and the no-op plugins
    )


def hello_gateway_cookie(db_file: str) -> Gateway:
    """The hello app through a strict `Gateway` that resolves the Flask session cookie of every
    request (the built-in resolvers, ten no-op plugins beside them)."""
    log = EventLog(f"sqlite:///{db_file}")
    return Gateway(
        hello_flask(),
        log=log,
        settings=GatewaySettings(http=HttpSettings(wsgi_workers=WSGI_WORKERS)),
        plugins=noop_plugins(),
        load_entry_points=False,
    )


# --- an OpenAI-style chat app, for the execution observer benchmark -------------------------


CHAT_ID = "chatcmpl-bench"
CHAT_CREATED = 1_764_000_000
CHUNK_BYTES = 1024  # each stream chunk's whole ``data: ...\n\n`` frame
DEFAULT_CHUNKS = 2000


def chat_chunk(content: str, finish_reason: str | None) -> dict[str, Any]:
    delta = {"content": content} if content else {}
    return {
        "id": CHAT_ID,
        "object": "chat.completion.chunk",
        "created": CHAT_CREATED,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def sse_frame(data: dict[str, Any]) -> bytes:
    return f"data: {encode(data)}\n\n".encode()


def filled_frame() -> bytes:
    """A chunk whose frame is `CHUNK_BYTES` long: its content fills what the envelope leaves."""
    room = CHUNK_BYTES - len(sse_frame(chat_chunk("x", None))) + 1
    return sse_frame(chat_chunk(("lorem ipsum " * (room // 12 + 1))[:room], None))


def chat_flask() -> Flask:
    """``POST /v1/chat/completions`` as an OpenAI-compatible server answers it, doing as
    little as it can: its chunks are encoded once, so the observer's share of each request is
    as large as it can be."""
    app = Flask("chat")
    answer = {
        "id": CHAT_ID,
        "object": "chat.completion",
        "created": CHAT_CREATED,
        "model": "bench",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello! How can I help?"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16},
    }
    chunk = filled_frame()
    last = sse_frame(chat_chunk("", "stop")) + b"data: [DONE]\n\n"

    @app.post("/v1/chat/completions")
    def completions() -> ResponseReturnValue:
        body = request.get_json()
        if not body.get("stream"):
            return jsonify(answer)
        chunks = int(body.get("max_tokens") or DEFAULT_CHUNKS)

        def frames() -> Iterator[bytes]:
            for _ in range(chunks - 1):
                yield chunk
            yield last

        return Response(frames(), mimetype="text/event-stream", headers=SSE_HEADERS)

    return app


# The tmux sessions the chat clients name: held by the one user of these anonymous servers,
# since only a session's holder speaks for it.
CHAT_SESSIONS = tuple(f"agent-{n}" for n in range(1, 6))


def chat_gateway(db_file: str, *, observe: bool) -> Gateway:
    log = EventLog(f"sqlite:///{db_file}")
    claims = claims_of(log)
    for session in CHAT_SESSIONS:
        claims.claim(session, ANONYMOUS.user_id)
    return Gateway(
        chat_flask(),
        allow_anonymous=True,
        log=log,
        settings=GatewaySettings(
            http=HttpSettings(wsgi_workers=WSGI_WORKERS),
            execution=ExecutionSettings(observe=observe),
        ),
        plugins=noop_plugins(),
        load_entry_points=False,  # exactly the built-ins and the no-op plugins
    )


def socketio_bare(db_file: str | None = None) -> Any:
    """python-socketio alone: rooms per stream, events emitted from memory, or emitted once
    committed to raw sqlite3 in `db_file`."""
    import socketio

    sio = socketio.AsyncServer(async_mode="asgi", cors_allowed_origins="*")
    seqs = iter(range(1, 1 << 62))
    commit = durable_commit(Path(db_file)) if db_file is not None else None

    async def subscribe(sid: str, data: Any) -> dict[str, bool]:
        await sio.enter_room(sid, "stream:" + data["stream"])
        return {"ok": True}

    sio.on("subscribe", subscribe)

    async def append(req: Request) -> JSONResponse:
        body = await req.json()
        envelope = {
            "seq": next(seqs),
            "stream": body["stream"],
            "pos": 0,
            "run_id": None,
            "type": body["type"],
            "data": body["data"],
            "upstream_event_id": None,
        }
        if commit is not None:
            commit(envelope)
        await sio.emit("event", envelope, room="stream:" + body["stream"])
        return JSONResponse({"seq": envelope["seq"]})

    routes = Starlette(routes=[Route("/bench/append", append, methods=["POST"])])
    return socketio.ASGIApp(sio, other_asgi_app=routes, socketio_path="gateway/socket.io")


# Transactions written before measuring, enough to pass SQLite's automatic checkpoint (1000
# pages): the WAL is then written over from its start, as in a database in use, not grown
# (a growing file costs every fsync a metadata write as well).
WAL_WARMUP_COMMITS = 1100


def durable_commit(path: Path) -> Callable[[dict[str, Any]], None]:
    """A function committing one envelope (one transaction, fsync'd) to raw sqlite3."""
    from _sqlite_raw import INSERT, connect

    conn = connect(path)
    for i in range(WAL_WARMUP_COMMITS):
        conn.execute(INSERT, ("warmup", i + 1, None, TYPE, "{}", None, 0.0))
    positions: dict[str, int] = {}

    def commit(envelope: dict[str, Any]) -> None:
        stream = envelope["stream"]
        pos = envelope["pos"] = positions.get(stream, 0) + 1
        positions[stream] = pos
        row = (stream, pos, None, envelope["type"], encode(envelope["data"]), None, time.time())
        envelope["seq"] = conn.execute(INSERT, row).lastrowid  # autocommit: one transaction

    return commit


class NotedGoose:
    """The fake goose in approve mode: each reply asks to run a tool whose call id is the
    reply's text, and each confirmation's arrival is noted (``time.perf_counter()``, one clock
    for every process of the machine) before its body is read; ``GET /bench/arrivals`` lists
    them by call id."""

    def __init__(self) -> None:
        from gateway_kit.testing import FakeGoose, Turn
        from gateway_kit.testing.turns import message_text

        def asking(user_message: dict[str, Any]) -> Turn:
            call_id = message_text(user_message)
            return Turn().confirm_tool("developer__shell", {"call": call_id}, call_id=call_id)

        self.fake = FakeGoose(default_turn=asking)
        self.arrived: dict[str, float] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.fake(scope, receive, send)
            return
        if scope["path"] == "/bench/arrivals":
            body = json.dumps(self.arrived).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["path"] != "/action-required/tool-confirmation":
            await self.fake(scope, receive, send)
            return
        arrived = time.perf_counter()
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if not message.get("more_body"):
                break
        sent = bytes(body)
        self.arrived[str(json.loads(sent).get("id"))] = arrived

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": sent, "more_body": False}

        await self.fake(scope, replay, send)


GOOSE_URL_VAR = "GATEWAY_KIT_BENCH_GOOSE_URL"


class NotedDecisions:
    """A `Gateway` whose upstream is the goose at ``$GATEWAY_KIT_BENCH_GOOSE_URL``, noting when
    each approval decision arrives (before its body); ``GET /bench/decisions`` lists them by
    approval id, and ``GET /bench/baseline`` times one confirmation POST of its upstream."""

    def __init__(self, db_file: str) -> None:
        from gateway_kit.testing.fake_state import DEFAULT_SECRET_KEY

        self.upstream = upstream = GooseUpstream(
            os.environ[GOOSE_URL_VAR], secret_key=DEFAULT_SECRET_KEY
        )
        self.gateway = Gateway(
            log=EventLog(f"sqlite:///{db_file}"),
            upstream=upstream,
            allow_anonymous=True,
            load_entry_points=False,
            plugins=noop_plugins(),
        )
        self.arrived: dict[str, float] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path == "/bench/decisions":
            body = json.dumps(self.arrived).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and path == "/bench/baseline":
            # One confirmation POST by the gateway's own client, in the gateway's own loop.
            started = time.perf_counter()
            await self.upstream.confirm_tool_action("none", "baseline", "allow_once")
            body = json.dumps({"ms": (time.perf_counter() - started) * 1000}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] == "http" and path.endswith("/decision"):
            self.arrived[path.split("/")[-2]] = time.perf_counter()
        await self.gateway(scope, receive, send)


def build(kind: str, db_file: str | None) -> Any:
    if kind == "goose-approve":
        return NotedGoose()
    if kind == "legacy":
        return WSGIMiddleware(legacy_flask(), workers=WSGI_WORKERS)  # type: ignore[arg-type]
    if kind == "peer":
        return peer_app()
    if kind == "hello-bare":
        return WSGIMiddleware(hello_flask(), workers=WSGI_WORKERS)  # type: ignore[arg-type]
    if kind == "socketio-bare":
        return socketio_bare()
    if db_file is None:
        raise SystemExit(f"{kind} needs a database file")
    if kind == "socketio-durable":
        return socketio_bare(db_file)
    if kind == "gateway":
        return gateway_app(db_file)
    if kind == "gateway-approvals":
        return NotedDecisions(db_file)
    if kind == "hello-gateway":
        return hello_gateway(db_file)
    if kind == "hello-gateway-cookie":
        return hello_gateway_cookie(db_file)
    if kind in ("chat-observed", "chat-unobserved"):
        return chat_gateway(db_file, observe=kind == "chat-observed")
    raise SystemExit(f"unknown server kind {kind!r}")


def main(kind: str, port_file: str, db_file: str | None = None) -> None:
    raise_open_files()
    app = build(kind, db_file)
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
    # and accepted sockets copy it. Without it, Nagle holds small writes ~40 ms.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # The same server settings for every kind: one process, the loop and HTTP implementation
    # the driver chose (by default what uvicorn[standard] installs: uvloop, httptools).
    config = uvicorn.Config(
        app, access_log=False, log_level="warning", backlog=4096, **uvicorn_stack()
    )
    server = uvicorn.Server(config)
    Path(port_file).write_text(json.dumps({"port": sock.getsockname()[1]}))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main(*sys.argv[1:])
