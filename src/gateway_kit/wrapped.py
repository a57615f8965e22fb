"""`WrappedApp`: the legacy application at the bottom of the stack, WSGI or ASGI.

A WSGI app (Flask) runs behind `a2wsgi` in a pool of `wsgi_workers` threads and serves short
requests only: every long-lived response is served above it, in the event loop, from the log.
A request reaches those threads once its whole body is read, in the event loop, within
`max_body_bytes` and `body_timeout` (413 and 408 otherwise, `gateway_kit.http.body`): a client
that sends its body slowly, or never, holds no thread (a2wsgi would read it in the thread).
A client that does not read the answer holds one for `send_timeout` at most: past it, the rest
of the answer is dropped (and the connection closed), so that the thread finishes.
An ASGI app gets every message as it came, lifespan included. For a WSGI app, or none, the
lifespan is answered here, and without an app a request is a JSON 404. An observer of the
wrapped app's traffic is a middleware around this part (`Gateway(app_middleware=...)`).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from a2wsgi import WSGIMiddleware

from .http.body import read_body
from .http.errors import HTTPError
from .http.fallback import not_found
from .http.request import header
from .principal import PRINCIPAL_KEY
from .settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_WSGI_WORKERS,
)
from .types import ASGIApp, Message, Receive, Scope, Send

UNKNOWN_APP_KIND = (
    "cannot tell whether {app!r} is a WSGI or an ASGI application; pass wsgi=True or wsgi=False"
)


def is_wsgi(app: object) -> bool:
    """Guess whether `app` is a WSGI application (True) or an ASGI one (False)."""
    if hasattr(app, "wsgi_app"):  # Flask, and apps built the same way
        return True
    call = app if inspect.isfunction(app) or inspect.ismethod(app) else type(app).__call__
    if inspect.iscoroutinefunction(call):
        return False
    try:
        params = inspect.signature(app).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        params = None
    if params is not None and len(params) in (2, 3):
        return len(params) == 2
    raise TypeError(UNKNOWN_APP_KIND.format(app=app))


class WrappedApp:
    """:param app: the WSGI or ASGI application, or None.
    :param wsgi: whether `app` is WSGI; None guesses (`is_wsgi`).
    :param wsgi_workers: threads serving a WSGI app; each request holds one while it runs.
    :param max_body_bytes: the largest request body a WSGI app is handed (413 above it).
    :param body_timeout: seconds a client may take to send a body to a WSGI app (408 after).
    :param send_timeout: seconds one write of a WSGI app's answer may take before the rest
        of the answer is dropped.
    """

    def __init__(
        self,
        app: object | None,
        *,
        wsgi: bool | None = None,
        wsgi_workers: int = DEFAULT_WSGI_WORKERS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
    ) -> None:
        self.wsgi = False if app is None else (is_wsgi(app) if wsgi is None else wsgi)
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.send_timeout = send_timeout
        self.app: ASGIApp | None = None
        if app is not None:
            if self.wsgi:
                self.app = WSGIMiddleware(with_principal(app), workers=wsgi_workers)  # type: ignore[assignment]
            else:
                self.app = app  # type: ignore[assignment]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and (self.app is None or self.wsgi):
            await answer_lifespan(receive, send)
        elif self.app is not None and self.wsgi and scope["type"] == "http":
            try:
                body = await read_body(
                    receive,
                    header(scope, b"content-length"),
                    max_bytes=self.max_body_bytes,
                    timeout=self.body_timeout,
                )
            except HTTPError as exc:
                await exc.send(send)
                return
            await self.app(scope, replaying(body, receive), cut_when_stuck(send, self.send_timeout))
        elif self.app is not None:
            await self.app(scope, receive, send)
        else:
            await not_found(scope, receive, send)


def replaying(body: bytes, receive: Receive) -> Receive:
    """`receive`, after a first message that holds the whole `body`, already read."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


def cut_when_stuck(send: Send, timeout: float) -> Send:
    """`send`, dropping every message after one that took longer than `timeout`: a2wsgi's
    thread waits for each write of its answer, and would wait as long as its client."""
    stuck = False

    async def bounded(message: Message) -> None:
        nonlocal stuck
        if stuck:
            return
        try:
            async with asyncio.timeout(timeout):
                await send(message)
        except TimeoutError:
            stuck = True  # the server closes a connection whose answer was left unfinished

    return bounded


def with_principal(app: Any) -> Any:
    """`app`, finding the request's principal in its environ under ``gateway_kit.principal``
    (a2wsgi keeps the ASGI scope there as ``asgi.scope``; a legacy route needs only the
    environ), and its body whole in ``wsgi.input``."""

    def call(environ: dict[str, Any], start_response: Any) -> Any:
        scope = environ.get("asgi.scope")
        environ[PRINCIPAL_KEY] = scope.get(PRINCIPAL_KEY) if scope is not None else None
        # The body was read whole before: the app may read to its end also without a
        # Content-Length (a chunked body), as the WSGI extension says.
        environ["wsgi.input_terminated"] = True
        return app(environ, start_response)

    call.__wrapped__ = app  # type: ignore[attr-defined]
    return call


async def answer_lifespan(receive: Receive, send: Send) -> None:
    """Complete start-up and shut-down for an app that has no lifespan of its own."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
