"""The HTTP client for goose's server (`goosed` 1.41): sessions, turns and the event stream.

Every request carries `X-Secret-Key`. Timeouts are
given per request, so they apply to an injected client too.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from gateway_kit.exceptions import UpstreamError, UpstreamUnavailable
from gateway_kit.types import JSONObject

from .errors import error_from_response
from .events import UNREACHABLE_MESSAGE, GooseEventStream

DEFAULT_BASE_URL = "http://127.0.0.1:3000"
# Starting or resuming a session loads the model and its extensions, which can take a while.
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=5.0)
# goose pings every 500 ms, so this much silence on the event stream means a dead connection.
DEFAULT_STREAM_READ_TIMEOUT = 5.0
SECRET_KEY_HEADER = "X-Secret-Key"
LAST_EVENT_ID_HEADER = "Last-Event-ID"

NOT_JSON_OBJECT_MESSAGE = "goose answered {url} with a body that is not a JSON object: {body!r}"
NOT_OBJECT_LIST_MESSAGE = "goose answered {url} without its list of objects: {body!r}"
NO_SESSION_ID_MESSAGE = "goose answered {url} without a session id: {body!r}"
BAD_CURSOR_MESSAGE = "last_event_id must be a non-negative int or None, not {value!r}"
MAX_QUOTED_CHARS = 200


@dataclass(frozen=True, slots=True)
class GooseSession:
    """A goose `Session`: its id, and the whole JSON as goose sent it."""

    id: str
    data: JSONObject

    @property
    def conversation(self) -> list[JSONObject] | None:
        """The session's messages; None when goose left them out (only `get_session` sends them)."""
        conversation = self.data.get("conversation")
        return conversation if isinstance(conversation, list) else None


def user_message(text: str, *, created: int | None = None) -> JSONObject:
    """A goose `Message` from the user holding one text block, visible to user and agent."""
    return {
        "role": "user",
        "created": int(time.time()) if created is None else created,
        "content": [{"type": "text", "text": text}],
        "metadata": {"userVisible": True, "agentVisible": True},
    }


class GooseUpstream:
    """Talks to one goosed. Owns its `httpx.AsyncClient` only when none is injected."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        secret_key: str,
        client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        stream_read_timeout: float = DEFAULT_STREAM_READ_TIMEOUT,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._secret_key = secret_key
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._stream_timeout = httpx.Timeout(
            connect=self._timeout.connect,
            read=stream_read_timeout,
            write=self._timeout.write,
            pool=self._timeout.pool,
        )
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(timeout=self._timeout)

    @property
    def client(self) -> httpx.AsyncClient:
        if self._owns_client and self._client.is_closed:
            # Closed by a lifespan shutdown: a server started again gets a fresh one.
            self._client = httpx.AsyncClient(timeout=self._timeout)
        return self._client

    async def aclose(self) -> None:
        """Close the client this object created; an injected client stays open for its owner.
        The gateway calls this at its lifespan shutdown; a later request opens a new client."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> GooseUpstream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- sessions

    async def start_session(
        self,
        working_dir: str,
        recipe: JSONObject | None = None,
        *,
        extension_overrides: list[JSONObject] | None = None,
    ) -> GooseSession:
        body: JSONObject = {"working_dir": working_dir}
        if recipe is not None:
            body["recipe"] = recipe
        if extension_overrides is not None:
            body["extension_overrides"] = extension_overrides
        response = await self._send("POST", "/agent/start", json=body, about_session=False)
        return self._session(response, self._json_object(response))

    async def resume_session(
        self, session_id: str, load_model_and_extensions: bool = True
    ) -> GooseSession:
        body = {"session_id": session_id, "load_model_and_extensions": load_model_and_extensions}
        response = await self._send("POST", "/agent/resume", json=body)
        return self._session(response, self._json_object(response).get("session"))

    async def get_session(self, session_id: str) -> GooseSession:
        """The session including its `conversation`."""
        response = await self._send("GET", f"/sessions/{_segment(session_id)}")
        return self._session(response, self._json_object(response))

    async def session_extensions(self, session_id: str) -> list[JSONObject]:
        """The session's extensions (goose ``ExtensionConfig``\\ s), as `start_session` takes
        them in `extension_overrides`."""
        response = await self._send("GET", f"/sessions/{_segment(session_id)}/extensions")
        extensions = self._json_object(response).get("extensions")
        return self._objects(response, extensions)

    async def session_tools(self, session_id: str) -> list[JSONObject]:
        """The tools the session's agent has (goose ``ToolInfo``\\ s), each named
        ``<extension>__<tool>``."""
        response = await self._send(
            "GET", "/agent/tools", params={"session_id": session_id}, about_session=False
        )
        try:
            tools = response.json()
        except ValueError:
            tools = None
        return self._objects(response, tools)

    # --- turns

    async def reply(
        self,
        session_id: str,
        message: str | JSONObject,
        request_id: str | None = None,
        *,
        override_conversation: list[JSONObject] | None = None,
    ) -> str:
        """Start a turn and return its request id, the key its events carry as `chat_request_id`.

        `message` is the user's text, or a complete goose `Message` sent as is. goose answers at
        once; the turn's output arrives on `events()`. `override_conversation` replaces the
        session's history before the turn (goose `Message`s).
        """
        request_id = str(uuid.uuid4()) if request_id is None else request_id
        user_msg = user_message(message) if isinstance(message, str) else message
        body: JSONObject = {"request_id": request_id, "user_message": user_msg}
        if override_conversation is not None:
            body["override_conversation"] = override_conversation
        await self._send("POST", f"/sessions/{_segment(session_id)}/reply", json=body)
        return request_id

    async def cancel(self, session_id: str, request_id: str) -> None:
        """Ask goose to stop a turn; goose accepts unknown request ids too."""
        body = {"request_id": request_id}
        await self._send("POST", f"/sessions/{_segment(session_id)}/cancel", json=body)

    async def confirm_tool_action(self, session_id: str, tool_request_id: str, action: str) -> None:
        """Answer goose's wait for a tool confirmation (`action`: ``allow_once``,
        ``always_allow``, ``deny_once``, ``always_deny`` or ``cancel``). goose answers 200 to
        any id, known or not: only the tool's response that follows shows the answer landed."""
        body = {"id": tool_request_id, "action": action, "sessionId": session_id}
        await self._send("POST", "/action-required/tool-confirmation", json=body)

    def events(self, session_id: str, last_event_id: int | None) -> GooseEventStream:
        """The session's event stream: `async with upstream.events(...) as frames`.

        `last_event_id` must be an id goose issued in its current lifetime; None sends no
        `Last-Event-ID` header, and goose replays its whole buffer.
        """
        if last_event_id is not None and (
            isinstance(last_event_id, bool)
            or not isinstance(last_event_id, int)
            or last_event_id < 0
        ):
            raise ValueError(BAD_CURSOR_MESSAGE.format(value=last_event_id))
        headers = self._headers()
        if last_event_id is not None:
            headers[LAST_EVENT_ID_HEADER] = str(last_event_id)
        return GooseEventStream(
            self.client,
            f"{self.base_url}/sessions/{_segment(session_id)}/events",
            headers=headers,
            timeout=self._stream_timeout,
            last_event_id=last_event_id,
        )

    # --- health

    async def status(self) -> bool:
        """True when goose answers `GET /status` with 200; False for any other answer or none."""
        try:
            response = await self.client.get(
                f"{self.base_url}/status", headers=self._headers(), timeout=self._timeout
            )
        except httpx.TransportError:
            return False
        return response.status_code == httpx.codes.OK

    # --- plumbing

    def _headers(self) -> dict[str, str]:
        return {SECRET_KEY_HEADER: self._secret_key}

    async def _send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, str] | None = None,
        about_session: bool = True,
    ) -> httpx.Response:
        url = f"{self.base_url}{path}"
        try:
            response = await self.client.request(
                method,
                url,
                json=json,
                params=params,
                headers=self._headers(),
                timeout=self._timeout,
            )
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(UNREACHABLE_MESSAGE.format(url=url, error=exc)) from exc
        if response.is_error:
            raise error_from_response(response, about_session=about_session)
        return response

    @staticmethod
    def _json_object(response: httpx.Response) -> JSONObject:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UpstreamError(
                NOT_JSON_OBJECT_MESSAGE.format(
                    url=response.request.url, body=response.text[:MAX_QUOTED_CHARS]
                )
            )
        return body

    @staticmethod
    def _objects(response: httpx.Response, items: object) -> list[JSONObject]:
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise UpstreamError(
                NOT_OBJECT_LIST_MESSAGE.format(
                    url=response.request.url, body=response.text[:MAX_QUOTED_CHARS]
                )
            )
        return items

    @staticmethod
    def _session(response: httpx.Response, data: object) -> GooseSession:
        session_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(session_id, str) or not session_id:
            raise UpstreamError(
                NO_SESSION_ID_MESSAGE.format(
                    url=response.request.url, body=response.text[:MAX_QUOTED_CHARS]
                )
            )
        return GooseSession(id=session_id, data=data)


def _segment(value: str) -> str:
    """A session id as one URL path segment, whatever characters it holds."""
    return quote(value, safe="")
