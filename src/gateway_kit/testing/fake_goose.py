"""A fake goosed (1.41.0): the HTTP routes a gateway uses, as plain ASGI, with scripted turns.

Approve mode too: `POST /action-required/tool-confirmation` answers the confirmation a
`Turn.confirm_tool` waits for, and a `reply` whose message holds an `elicitationResponse`
answers a `Turn.elicit`, even while the session is busy (see `confirmations.py`).

Follows goosed 1.41.0's wire protocol. Deliberate simplifications: request bodies that do not have
the shape goose expects get a 422 JSON error (axum's extractor answers in plain text), and every
error body, 404s included, is JSON `{"message": ...}` as the wire contract describes.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import httpx

from gateway_kit.types import JSONObject, Receive, Scope, Send

from .bus import SessionBus, parse_last_event_id
from .confirmations import ElicitationAnswer, read_confirmation, read_elicitation_answer
from .event_stream import serve_events
from .extensions import extension_overrides, session_tools
from .fake_state import FakeGooseState
from .records import CancelCall, ConfirmationCall, EventsCall, RecordedRequest, ReplyCall
from .runner import finish_elicitation_answer, run_turn
from .sessions import SessionRecord
from .transport import StreamingASGITransport
from .wire import (
    BAD_BODY,
    GOOSE_UUID,
    INVALID_REQUEST_ID,
    SECRET_HEADER,
    SESSION_BUSY,
    SESSION_NOT_FOUND,
    UNAUTHORIZED,
    Reject,
    answer,
    answer_json,
    json_object,
    match_route,
    read_body,
    require,
    serve_lifespan,
)

if TYPE_CHECKING:
    import respx

DEFAULT_BASE_URL = "http://goose.test"


class FakeGoose(FakeGooseState):
    """An ASGI app that behaves like goosed for a gateway; see the module docstring."""

    def client(self, base_url: str = DEFAULT_BASE_URL, **kwargs: Any) -> httpx.AsyncClient:
        """An `httpx.AsyncClient` that reaches this fake in-process and sends the secret key."""
        headers = {"X-Secret-Key": self.secret_key, **kwargs.pop("headers", {})}
        transport = StreamingASGITransport(self)
        return httpx.AsyncClient(transport=transport, base_url=base_url, headers=headers, **kwargs)

    def mock(self, router: respx.Router, base_url: str = DEFAULT_BASE_URL) -> respx.Route:
        """Route requests for `base_url` (an origin) in a respx router to this fake, streaming."""
        url = httpx.URL(base_url)
        pattern: dict[str, Any] = {"scheme": url.scheme, "host": url.host}
        if url.port is not None:
            pattern["port"] = url.port
        transport = StreamingASGITransport(self)
        return router.route(**pattern).mock(side_effect=transport.handle_async_request)

    def hold_cancelled(self, session_id: str) -> asyncio.Event:
        """From now on the session stays busy after a cancel: a `reply` is answered 400
        "Session already has an active request" until the returned event is set, as by a
        goose that frees a cancelled request only once its task has wound down."""
        release = asyncio.Event()
        self._bus(session_id).hold_cancelled(release)
        return release

    # --- ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await serve_lifespan(receive, send, on_shutdown=self.restart)
            return
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        self.requests.append(RecordedRequest(method, path, headers, body))
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        try:
            if path != "/status" and headers.get(SECRET_HEADER) != self.secret_key:
                raise Reject(401, UNAUTHORIZED)
            await self._route(method, path, headers, body, query, receive, send)
        except Reject as reject:
            await answer_json(send, reject.status, {"message": reject.message}, reject.headers)

    async def _route(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        query: dict[str, list[str]],
        receive: Receive,
        send: Send,
    ) -> None:
        name, session_id = match_route(method, path)
        if name == "status":
            await answer(send, 200, b"ok", b"text/plain; charset=utf-8")
        elif name == "start":
            await answer_json(send, 200, self._start(json_object(body)))
        elif name == "resume":
            await answer_json(send, 200, self._resume(json_object(body)))
        elif name == "reply":
            await answer_json(send, 200, self._reply(session_id, json_object(body)))
        elif name == "confirm":
            self._confirm(body)
            await answer_json(send, 200, {})
        elif name == "cancel":
            self._cancel(session_id, json_object(body))
            await answer(send, 200, b"", b"text/plain; charset=utf-8")
        elif name == "events":
            await self._events(session_id, headers.get("last-event-id"), receive, send)
        elif name == "tools":
            session = self._session(query.get("session_id", [""])[0])
            await answer_json(send, 200, session_tools(session.extensions, self.tools))
        elif name == "extensions":
            extensions = self._session(session_id).extensions
            await answer_json(send, 200, {"extensions": copy.deepcopy(extensions)})
        else:
            await answer_json(send, 200, self._session(session_id).to_json())

    # --- routes

    def _session(self, session_id: str) -> SessionRecord:
        session = self.sessions.get(session_id)
        if session is None:
            raise Reject(404, SESSION_NOT_FOUND.format(session_id))
        return session

    def _bus(self, session_id: str) -> SessionBus:
        if session_id not in self._buses:
            self._buses[session_id] = SessionBus(
                buffer_size=self._replay_buffer_size, queue_size=self._subscriber_queue_size
            )
        return self._buses[session_id]

    def _start(self, body: JSONObject) -> JSONObject:
        working_dir = require(body, "working_dir", str)
        extensions = extension_overrides(body)
        session_id = self.create_session(working_dir=working_dir, extensions=extensions)
        return self.sessions[session_id].to_json()

    def _resume(self, body: JSONObject) -> JSONObject:
        session = self._session(require(body, "session_id", str))
        load = require(body, "load_model_and_extensions", bool)
        return {"session": session.to_json(), "extension_results": [] if load else None}

    def _reply(self, session_id: str, body: JSONObject) -> JSONObject:
        request_id = require(body, "request_id", str)
        user_message = require(body, "user_message", dict)
        require(user_message, "content", list)
        override = body.get("override_conversation")
        if override is not None and not (
            isinstance(override, list) and all(isinstance(m, dict) for m in override)
        ):
            raise Reject(422, BAD_BODY.format("`override_conversation` must be a list"))
        elicitation = read_elicitation_answer(user_message)
        try:
            refusals = self._refusals.get(session_id)
            if refusals:
                raise refusals.popleft()
            if elicitation is None:
                self._start_turn(session_id, request_id, user_message, override)
            else:
                self._answer(session_id, request_id, user_message, *elicitation)
        except Reject as reject:
            self.reply_calls.append(
                ReplyCall(session_id, request_id, user_message, reject.status, body)
            )
            raise
        self.reply_calls.append(ReplyCall(session_id, request_id, user_message, 200, body))
        return {"request_id": request_id}

    def _start_turn(
        self,
        session_id: str,
        request_id: str,
        user_message: JSONObject,
        override: list[JSONObject] | None,
    ) -> None:
        if not GOOSE_UUID.fullmatch(request_id):
            raise Reject(400, INVALID_REQUEST_ID)
        session = self._session(session_id)
        bus = self._bus(session_id)
        cancelled = bus.try_register(request_id)
        if cancelled is None:
            raise Reject(400, SESSION_BUSY)
        script = self._scripts.get(session_id)
        turn = script.popleft() if script else self.default_turn(user_message)
        self._run_in_background(
            run_turn(
                turn,
                request_id=request_id,
                user_message=user_message,
                override_conversation=override,
                session=session,
                bus=bus,
                cancelled=cancelled,
                waits=self._session_waits(session_id),
            )
        )

    def _answer(
        self,
        session_id: str,
        request_id: str,
        user_message: JSONObject,
        elicitation_id: str,
        answer: ElicitationAnswer,
    ) -> None:
        """A reply that answers an elicitation: goose handles it before its busy check (the
        turn that asked keeps the session busy) and keeps the message only once delivered."""
        if not GOOSE_UUID.fullmatch(request_id):
            raise Reject(400, INVALID_REQUEST_ID)
        session = self._session(session_id)
        error = self._answer_elicitation(session_id, elicitation_id, answer)
        if error is None:
            session.add_message(user_message)
        self._run_in_background(
            finish_elicitation_answer(
                request_id=request_id, error=error, session=session, bus=self._bus(session_id)
            )
        )

    def _run_in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._turn_tasks.add(task)
        task.add_done_callback(self._turn_ended)

    def _turn_ended(self, task: asyncio.Task[None]) -> None:
        self._turn_tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            self._turn_failures.append(error)

    def _confirm(self, body: bytes) -> None:
        # goose checks neither the session nor the id: any confirmation of the right shape is
        # queued for the session's turns (unknown sessions have none: it is dropped).
        fields = {"sessionId": "", "id": "", "action": ""}
        try:
            payload = json_object(body)
            fields |= {k: v for k, v in payload.items() if k in fields and isinstance(v, str)}
            session_id, tool_id, action = read_confirmation(payload)
        except Reject as reject:
            call = ConfirmationCall(
                fields["sessionId"], fields["id"], fields["action"], reject.status
            )
            self.confirmation_calls.append(call)
            raise
        self.confirmation_calls.append(ConfirmationCall(session_id, tool_id, action, 200))
        if session_id in self.sessions:
            self._session_waits(session_id).confirm(tool_id, action)

    def _cancel(self, session_id: str, body: JSONObject) -> None:
        request_id = require(body, "request_id", str)
        self.cancel_calls.append(CancelCall(session_id, request_id))
        bus = self._buses.get(session_id)
        if bus is not None:
            bus.cancel(request_id)

    async def _events(
        self, session_id: str, last_event_id: str | None, receive: Receive, send: Send
    ) -> None:
        self._session(session_id)
        self.events_calls.append(EventsCall(session_id, last_event_id))
        await serve_events(
            self._bus(session_id),
            parse_last_event_id(last_event_id),
            receive,
            send,
            ping_interval=self.ping_interval,
        )
