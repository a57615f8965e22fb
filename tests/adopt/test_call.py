"""One request to one side, within bounds: never waiting past the timeout, never keeping more
than max-body bytes, telling the app its client left, and a WSGI app's endless answer closed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

from gateway_kit.adopt.call import MAX_BODY, TIMEOUT, Answer, Limits, call, scope_of
from gateway_kit.adopt.recorded import Recorded
from gateway_kit.adopt.threaded_wsgi import ThreadedWSGI
from gateway_kit.types import Message, Receive, Scope, Send
from tests.support.waiting import wait_until

GET = Recorded("GET", "/stream?x=1", (("Accept", "text/event-stream"),), host="shop.test:8443",
               scheme="https")  # fmt: skip


def called(app: Any, limits: Limits, request: Recorded = GET) -> Answer:
    return asyncio.run(call(app, scope_of(request, "a=1"), request.body, limits))


def test_the_scope_is_the_recorded_request() -> None:
    scope = scope_of(GET, "a=1; b=2")
    assert (scope["method"], scope["scheme"], scope["path"], scope["query_string"]) == (
        "GET", "https", "/stream", b"x=1"
    )  # fmt: skip
    assert scope["server"] == ("shop.test", 8443)
    assert scope["headers"] == [
        (b"host", b"shop.test:8443"), (b"accept", b"text/event-stream"), (b"cookie", b"a=1; b=2")
    ]  # fmt: skip


def test_an_app_that_never_answers_is_given_up_at_the_timeout_and_told_its_client_left() -> None:
    told: list[str] = []

    async def silent(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()  # the request
        told.append((await receive())["type"])

    answer = called(silent, Limits(timeout=0.05, max_body=100))
    assert (answer.status, answer.cut, answer.body) == (None, TIMEOUT, b"")
    assert told == ["http.disconnect"]


def test_an_endless_answer_is_kept_to_max_body_and_its_next_send_fails() -> None:
    failed: list[BaseException] = []

    async def endless(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        try:
            while True:
                await send({"type": "http.response.body", "body": b"x" * 7, "more_body": True})
        except OSError as exc:
            failed.append(exc)

    answer = called(endless, Limits(timeout=60, max_body=100))
    assert (answer.status, answer.cut, answer.body) == (200, MAX_BODY, b"x" * 100)
    assert len(failed) == 1


def test_an_app_that_raises_before_answering_is_a_500() -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    answer = called(broken, Limits(timeout=60, max_body=100))
    assert (answer.status, answer.error, answer.cut) == (500, "RuntimeError: boom", None)


def test_a_wsgi_apps_endless_answer_is_closed_once_read() -> None:
    closed = threading.Event()

    def stream(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "text/event-stream")])
        try:
            while True:
                yield b"data: " + environ["QUERY_STRING"].encode() + b"\n\n"
        finally:
            closed.set()

    answer = called(ThreadedWSGI(stream, max_body=64), Limits(timeout=60, max_body=64))
    assert (answer.status, answer.cut) == (200, MAX_BODY)
    assert answer.body == (b"data: x=1\n\n" * 6)[:64]
    wait_until(closed.is_set)


def test_a_wsgi_app_gets_the_body_and_its_error_is_a_500() -> None:
    seen: list[bytes] = []

    def failing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        raise ValueError("bad")

    post = Recorded("POST", "/", body=b'{"a": 1}')
    answer = called(ThreadedWSGI(failing, max_body=10), Limits(timeout=60, max_body=10), post)
    assert (answer.status, answer.error) == (500, "ValueError: bad")
    assert seen == [b'{"a": 1}']


def test_an_answer_read_whole_is_not_cut() -> None:
    async def hello(scope: Scope, receive: Receive, send: Send) -> None:
        message: Message = {"type": "http.response.start", "status": 201,
                            "headers": [(b"x-a", b"1")]}  # fmt: skip
        await send(message)
        await send({"type": "http.response.body", "body": b"hel", "more_body": True})
        await send({"type": "http.response.body", "body": b"lo"})

    answer = called(hello, Limits(timeout=60, max_body=5))
    assert answer == Answer(201, [("x-a", "1")], b"hello")


def test_an_app_that_waits_for_its_client_to_leave_after_answering_is_told_at_once() -> None:
    told: list[str] = []

    async def lingering(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        told.append((await receive())["type"])

    answer = called(lingering, Limits(timeout=5, max_body=10))
    assert (answer.status, answer.cut) == (204, None)
    assert told == ["http.disconnect"]  # not cancelled after waiting out the timeout
