"""Slow clients cannot take the wrapped Flask app's threads: a request reaches them once its
body is read, in the event loop, within `max_body_bytes` (413) and `body_timeout` (408)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpx
import pytest
from flask import Flask, Response, jsonify, request
from flask.typing import ResponseReturnValue
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings
from gateway_kit.types import Message
from tests.support.asgi_driver import http_scope
from tests.support.raw_requests import JSON_TYPE, Call, assert_json_error
from tests.support.serving import serve_in_thread

WORKERS = 3
SLOW_CLIENTS = WORKERS + 5
BODY_TIMEOUT = 2.0
MAX_BODY = 64 * 1024
DECLARED = 1000  # the Content-Length each slow client sends, and never completes
TRICKLE_EVERY = 0.1  # seconds between the bytes of a trickling client
CHUNK = 64 * 1024
BIG_CHUNKS = 256  # an answer far larger than the socket buffers of a client that never reads
SEND_TIMEOUT = 0.5


class Echo:
    """A Flask app with a quick route, and one that says what body it got (noting each)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.app = Flask("slow-bodies")

        @self.app.get("/ping")
        def ping() -> ResponseReturnValue:
            return "pong"

        @self.app.get("/big")
        def big() -> ResponseReturnValue:
            return Response(b"x" * CHUNK for _ in range(BIG_CHUNKS))

        @self.app.post("/echo")
        def echo() -> ResponseReturnValue:
            body = request.get_data()
            self.bodies.append(body)
            return jsonify(length=len(body))


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        yield event_log


def gateway(log: EventLog, echo: Echo) -> Gateway:
    return Gateway(
        echo.app,
        log=log,
        allow_anonymous=True,
        load_entry_points=False,
        settings=GatewaySettings(
            http=HttpSettings(
                wsgi_workers=WORKERS, body_timeout=BODY_TIMEOUT, max_body_bytes=MAX_BODY
            )
        ),
    )


def slow_client(base: str) -> socket.socket:
    """A client that sent its headers and the first bytes of a body it does not finish."""
    url = urlsplit(base)
    sock = socket.create_connection((url.hostname, url.port))
    head = f"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: {DECLARED}\r\n"
    sock.sendall(head.encode() + b"Content-Type: application/octet-stream\r\n\r\nxx")
    return sock


@contextmanager
def trickling(socks: list[socket.socket]) -> Iterator[None]:
    """Each of `socks` sends one more byte of its body every `TRICKLE_EVERY` seconds."""
    stop = threading.Event()

    def trickle() -> None:
        while not stop.wait(TRICKLE_EVERY):
            for sock in socks:
                with contextlib.suppress(OSError):  # answered and closed
                    sock.send(b"x")

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def answered(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # a byte of an answer, or b"" once it closed
        return True
    except BlockingIOError:
        return False
    finally:
        sock.setblocking(True)


def response_of(sock: socket.socket) -> tuple[int, dict[str, object]]:
    """The status and JSON body the server sent, read until it closed the connection."""
    sock.settimeout(10 * BODY_TIMEOUT)
    data = bytearray()
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_slow_bodies_hold_no_flask_thread_and_get_a_408(log: EventLog) -> None:
    echo = Echo()
    with serve_in_thread(gateway(log, echo)) as base:
        started = time.monotonic()
        socks = [slow_client(base) for _ in range(SLOW_CLIENTS)]
        with trickling(socks[::2]):  # half of them trickle their body, half stall
            # More requests than the app has threads are waiting for their bodies; the app
            # still answers at once (httpx's timeout is the generous bound).
            with httpx.Client(base_url=base, timeout=BODY_TIMEOUT) as client:
                for _ in range(3):
                    assert client.get("/ping").text == "pong"
                answer = client.post("/echo", content=b"a whole body")
                assert answer.json() == {"length": 12}
            assert not any(answered(sock) for sock in socks)  # all still waiting
            answers = [response_of(sock) for sock in socks]
        elapsed = time.monotonic() - started
    for sock in socks:
        sock.close()
    for status, body in answers:
        assert status == 408 and body["error"] == "request_timeout", body
    assert elapsed >= BODY_TIMEOUT
    assert echo.bodies == [b"a whole body"]  # none of theirs reached the app


def test_a_body_declared_over_the_limit_is_a_413_before_it_is_read(log: EventLog) -> None:
    echo = Echo()
    with serve_in_thread(gateway(log, echo)) as base:
        url = urlsplit(base)
        with socket.create_connection((url.hostname, url.port)) as sock:
            head = f"POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: {MAX_BODY + 1}\r\n\r\n"
            sock.sendall(head.encode())  # and not one byte of the body
            status, body = response_of(sock)
    assert status == 413 and body["error"] == "payload_too_large"
    assert echo.bodies == []


def test_any_body_reaches_flask_whole_or_is_refused_with_a_json_error(sqlite_url: str) -> None:
    echo = Echo()

    def one_request(
        app: Gateway, runner: asyncio.Runner, body: bytes, chunk: int, length: str
    ) -> None:
        echo.bodies.clear()
        headers = [(b"content-type", b"application/octet-stream")]
        if length == "exact":
            headers.append((b"content-length", str(len(body)).encode()))
        elif length == "junk":
            headers.append((b"content-length", b"12abc"))
        call = Call("POST", b"/echo", headers=headers, body=body, chunk=chunk)
        answer = runner.run(call(app))
        if length == "junk":
            assert_json_error(answer, 400, "invalid_body")
        elif len(body) > MAX_BODY:
            assert_json_error(answer, 413, "payload_too_large")
        else:
            assert answer.status == 200 and answer.json() == {"length": len(body)}
            assert echo.bodies == [body]
            return
        assert echo.bodies == []  # a refused body never reaches the app

    with EventLog(sqlite_url) as log, asyncio.Runner() as runner:
        app = gateway(log, echo)
        # An inner test: the gateway is built once, and every example is sent to it.
        test = given(
            body=st.binary(max_size=MAX_BODY // 16) | st.just(b"x" * (MAX_BODY + 1)),
            chunk=st.integers(min_value=0, max_value=4096),
            length=st.sampled_from(["exact", "none", "junk"]),
        )(lambda body, chunk, length: one_request(app, runner, body, chunk, length))
        settings(max_examples=80, deadline=None)(test)()


def test_a_run_whose_body_stalls_is_a_408_that_writes_nothing(log: EventLog) -> None:
    app = Gateway(
        log=log,
        allow_anonymous=True,
        load_entry_points=False,
        settings=GatewaySettings(http=HttpSettings(body_timeout=0.3)),
    )
    scope = http_scope("POST", b"/gateway/streams/conv/runs", headers=JSON_TYPE)
    sent: list[Message] = []

    async def main() -> None:
        stalled = asyncio.Event()  # the rest of the body never comes
        parts = [{"type": "http.request", "body": b'{"message": "h', "more_body": True}]

        async def receive() -> Message:
            if parts:
                return parts.pop()
            await stalled.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            sent.append(message)

        await asyncio.wait_for(app(scope, receive, send), 10)

    asyncio.run(main())
    assert sent[0]["status"] == 408
    assert json.loads(sent[1]["body"])["error"] == "request_timeout"
    assert (b"connection", b"close") in sent[0]["headers"]
    assert log.last_seq() == 0


def test_clients_that_never_read_their_answer_hold_a_flask_thread_for_the_send_timeout_only(
    log: EventLog,
) -> None:
    echo = Echo()
    app = Gateway(
        echo.app,
        log=log,
        allow_anonymous=True,
        load_entry_points=False,
        settings=GatewaySettings(
            http=HttpSettings(wsgi_workers=WORKERS, send_timeout=SEND_TIMEOUT)
        ),
    )
    with serve_in_thread(app, send_buffer=4096) as base:
        url = urlsplit(base)
        readers = []
        for _ in range(SLOW_CLIENTS):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect((url.hostname, url.port))
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: test\r\n\r\n")  # and never reads
            readers.append(sock)
        try:
            # Every thread of the app is writing to a client that does not read; each is let
            # go after the send timeout, so the app answers again (the bound is generous).
            with httpx.Client(base_url=base, timeout=20 * SEND_TIMEOUT) as client:
                assert client.get("/ping").text == "pong"
        finally:
            for sock in readers:
                sock.close()
