"""`ExecutionObserver`: watches the requests of the app it wraps, per tmux session.

It sits at the seam around the wrapped app (and is usable alone around any ASGI app). For
each HTTP request it asks `resolve` which tmux session the request belongs to; a request of
none passes untouched. What a request says of its session is only believed from the user who
holds that session (`held_only`, as the gateway composes it): an unauthenticated request, or
another user's, never changes a session's state. For the others it notes, in an
`ExecutionRecorder`: the request started; its SSE stream opened (the response's content
type); and how it ended, which is when its last byte was sent, not when the app's handler
returned (a streamed answer goes on after its handler's ``finally``). The ending is read from
the response as it passes (`ResponseReader`): the terminal event and its ``finish_reason``, a
client that left before it, a stream cut short, or the app failing.

Every message is handed on as it came, at once: the observer never changes, holds or joins
the bytes a client receives.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from ..bindings.claims import TmuxClaims
from ..types import ASGIApp, Message, Receive, Scope, Send
from .finish_reason import ResponseReader
from .recorder import ExecutionRecorder
from .state import Outcome

Resolve = Callable[[Scope], "str | None"]


def held_only(resolve: Resolve, claims: TmuxClaims) -> Resolve:
    """`resolve`, answering only for requests whose principal holds the session they name."""

    def resolved(scope: Scope) -> str | None:
        tmux_session = resolve(scope)
        if tmux_session is None or not claims.speaks_for(scope, tmux_session):
            return None
        return tmux_session

    return resolved


class ExecutionObserver:
    """:param recorder: where the requests' changes are noted.
    :param resolve: the tmux session of a request, or None (a `Plugins`'s
        `resolve_tmux_session` in a gateway); asked in the event loop, so it answers from the
        scope and from memory.
    """

    def __init__(self, app: ASGIApp, *, recorder: ExecutionRecorder, resolve: Resolve) -> None:
        self.app = app
        self.recorder = recorder
        self.resolve = resolve

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tmux_session = self.resolve(scope)
        if tmux_session is None:
            await self.app(scope, receive, send)
            return
        await ObservedRequest(self.recorder, tmux_session, scope).serve(self.app, receive, send)


def content_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() and len(value) < 19 else None
    return None


class ObservedRequest:
    """One request of a tmux session, from its start to its last byte.

    A client that leaves is noticed when the server says so (``http.disconnect``), whether or
    not the app asks: once the answer has started and the app is not itself waiting for a
    message, a watcher reads the server's messages and hands them to the app's next
    ``receive`` calls in order. Only streams are watched: an answer that is no stream goes
    out at once, and ends its request when it has. A WSGI app behind a2wsgi
    never asks, and a server drops what is sent after the client left: without the watcher,
    a stream's client could leave unnoticed.
    """

    def __init__(self, recorder: ExecutionRecorder, tmux_session: str, scope: Scope) -> None:
        self.recorder = recorder
        self.scope = scope
        self.request_id = recorder.next_request_id()
        self.reader: ResponseReader | None = None
        self.status = 0
        self.complete = False  # the last body message was sent
        self.disconnected = False
        self._receiving = False  # the app waits in the server's receive
        self._messages: asyncio.Queue[Message] | None = None  # once the watcher reads them
        self._watcher: asyncio.Task[None] | None = None
        self._watching = False
        self.length: int | None = None  # the answer's Content-Length, when it has one
        self.sent = 0  # bytes of the answer sent so far
        recorder.started(self.request_id, tmux_session, scope["method"], scope["path"])

    async def serve(self, app: ASGIApp, receive: Receive, send: Send) -> None:
        async def receiving() -> Message:
            messages = self._messages
            if messages is not None and (self._watching or not messages.empty()):
                return await messages.get()
            self._receiving = True
            try:
                message = await receive()
            finally:
                self._receiving = False
            self.look_at_request(message)
            return message

        async def sending(message: Message) -> None:
            self.look_at(message)
            try:
                await send(message)
            except OSError:  # the client is gone: servers raise it from a write that failed
                self.client_left()
                raise
            if self._watcher is None and self.streaming and not self._receiving:
                # A stream has begun: from now on its client may leave in the middle of it.
                self._watcher = asyncio.create_task(self._watch(receive))

        failed = True
        try:
            await app(self.scope, receiving, sending)
            failed = False
        finally:
            if self._watcher is not None:
                self._watcher.cancel()
            self.record_end(failed)

    async def _watch(self, receive: Receive) -> None:
        messages = self._messages = asyncio.Queue()
        self._watching = True
        try:
            await self._watch_until_gone(receive, messages)
        finally:
            self._watching = False

    async def _watch_until_gone(self, receive: Receive, messages: asyncio.Queue[Message]) -> None:
        body_ended = False
        while True:
            message = await receive()
            self.look_at_request(message)
            messages.put_nowait(message)
            if message["type"] == "http.disconnect":
                return
            if body_ended:
                # A server whose receive answers at once after the body (no ASGI server does):
                # nothing to watch for, and the app reads it directly again.
                return
            body_ended = not message.get("more_body", False)

    @property
    def streaming(self) -> bool:
        return self.reader is not None and self.reader.streaming and not self.complete

    def look_at_request(self, message: Message) -> None:
        if message["type"] == "http.disconnect" and not self.complete:
            self.client_left()

    def client_left(self) -> None:
        """The client left: unless the answer was whole, its request ends now, however long
        the app goes on writing into the void."""
        self.disconnected = True
        reader = self.reader
        if reader is None or not reader.terminal:
            reason = None if reader is None else reader.finish_reason
            self.recorder.ended(self.request_id, Outcome.CLIENT_CLOSED, finish_reason=reason)

    def look_at(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = message["status"]
            headers = message.get("headers") or ()
            self.reader = ResponseReader.for_headers(headers)
            self.length = content_length(headers)
            if self.reader.streaming:
                self.recorder.sse_opened(self.request_id)
        elif kind == "http.response.body" and self.reader is not None and not self.complete:
            body = message.get("body", b"")
            if body:
                self.reader.feed(body)
                self.sent += len(body)
            if not message.get("more_body", False):
                self.body_sent()
            elif self.length is not None and self.sent >= self.length:
                # Whole by its length: a2wsgi sends an empty last message after it, which the
                # client does not wait for; the request ends before its last bytes leave.
                self.body_sent()
                self.record_end(failed=False)

    def body_sent(self) -> None:
        assert self.reader is not None
        self.reader.end()
        self.complete = True

    def record_end(self, failed: bool) -> None:
        """Note how the request ended (once: later notes of it are ignored)."""
        outcome, reason, terminal = self.ending(failed)
        self.recorder.ended(self.request_id, outcome, finish_reason=reason, terminal=terminal)

    def ending(self, failed: bool) -> tuple[Outcome, str | None, bool]:
        """(how the response ended, its finish_reason, whether its terminal event came)."""
        reader = self.reader
        if reader is None:  # nothing was answered
            outcome = Outcome.CLIENT_CLOSED if self.disconnected and not failed else Outcome.ERROR
            return outcome, None, False
        terminal, reason = reader.terminal, reader.finish_reason
        if reader.error or self.status >= 500:
            return Outcome.ERROR, reason, terminal
        if terminal:  # the client may leave after the terminal event: the answer was whole
            return Outcome.COMPLETED, reason, True
        if self.complete and not failed:
            # A whole answer that is no stream ends its request; a stream needs its terminal.
            return (Outcome.CUT if reader.streaming else Outcome.COMPLETED), reason, False
        if self.disconnected:
            return Outcome.CLIENT_CLOSED, reason, False
        return (Outcome.CUT if reader.streaming and not failed else Outcome.ERROR), reason, False
