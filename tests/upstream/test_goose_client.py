"""GooseUpstream against a respx-mocked goosed."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import jsonschema
import pytest
import respx

from gateway_kit.exceptions import (
    SessionBusy,
    SessionNotFound,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTooFarBehind,
    UpstreamUnavailable,
)
from gateway_kit.testing import goose_openapi
from gateway_kit.upstream import GooseUpstream, UpstreamFrame, user_message
from gateway_kit.upstream.frames import parse_frame

BASE = "http://goose.test"
SECRET = "s3cret"
SESSION = "20250601_7"
SSE_HEADERS = {"content-type": "text/event-stream"}
SESSION_JSON = {"id": SESSION, "name": "s", "working_dir": "/tmp/w", "message_count": 0}
TOO_FAR_BEHIND = (
    'id: 0\ndata: {"type":"Error","error":"Client too far behind \u2014 reload conversation"}\n\n'
)


def run_with_upstream(
    scenario: Callable[[GooseUpstream, respx.MockRouter], Awaitable[None]],
    **options: Any,
) -> None:
    """Run `scenario` with a GooseUpstream whose injected client goes to a respx-mocked goose."""

    async def main() -> None:
        with respx.mock(base_url=BASE) as mock:
            async with httpx.AsyncClient() as client:
                upstream = GooseUpstream(BASE, secret_key=SECRET, client=client, **options)
                await scenario(upstream, mock)

    asyncio.run(main())


def sse(body: bytes | AsyncIterator[bytes]) -> httpx.Response:
    return httpx.Response(200, headers=SSE_HEADERS, content=body)


async def collect(upstream: GooseUpstream, last_event_id: int | None) -> list[UpstreamFrame]:
    async with upstream.events(SESSION, last_event_id) as frames:
        return [frame async for frame in frames]


def frame_line(event_id: int | None, payload: dict[str, Any]) -> str:
    id_line = "" if event_id is None else f"id: {event_id}\n"
    return f"{id_line}data: {json.dumps(payload)}\n\n"


# --- auth and errors


def test_every_call_sends_the_secret_key() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        routes = [
            mock.post("/agent/start").respond(json=SESSION_JSON),
            mock.post("/agent/resume").respond(json={"session": SESSION_JSON}),
            mock.get(f"/sessions/{SESSION}").respond(json=SESSION_JSON),
            mock.post(f"/sessions/{SESSION}/reply").respond(json={"request_id": "x"}),
            mock.post(f"/sessions/{SESSION}/cancel").respond(200),
            mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(b"")),
            mock.get("/status").respond(text="ok"),
        ]
        await upstream.start_session("/tmp/w")
        await upstream.resume_session(SESSION)
        await upstream.get_session(SESSION)
        await upstream.reply(SESSION, "hi")
        await upstream.cancel(SESSION, str(uuid.uuid4()))
        await collect(upstream, None)
        assert await upstream.status() is True
        for route in routes:
            assert route.calls.last.request.headers["X-Secret-Key"] == SECRET

    run_with_upstream(scenario)


@pytest.mark.parametrize(
    ("status", "body", "expected", "message"),
    [
        (401, b"", UpstreamAuthError, "Unauthorized"),
        (404, b'{"message":"Session x not found"}', SessionNotFound, "Session x not found"),
        (
            400,
            b'{"message":"Session already has an active request. Cancel it first."}',
            SessionBusy,
            "Session already has an active request. Cancel it first.",
        ),
        (
            400,
            b'{"message":"request_id must be a valid UUID"}',
            UpstreamBadRequest,
            "request_id must be a valid UUID",
        ),
        (424, b'{"message":"Agent not initialized"}', UpstreamHTTPError, "Agent not initialized"),
        (500, b"<html>proxy exploded</html>", UpstreamHTTPError, "<html>proxy exploded</html>"),
        (502, b"", UpstreamHTTPError, "Bad Gateway"),
    ],
)
def test_goose_error_answers_become_typed_errors(
    status: int, body: bytes, expected: type[UpstreamHTTPError], message: str
) -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.post(f"/sessions/{SESSION}/reply").respond(status, content=body)
        with pytest.raises(UpstreamHTTPError) as caught:
            await upstream.reply(SESSION, "hi")
        assert type(caught.value) is expected
        assert caught.value.status == status
        assert caught.value.message == message
        assert message in str(caught.value)

    run_with_upstream(scenario)


def test_404_on_start_is_a_wrong_url_not_an_unknown_session() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.post("/agent/start").respond(404)
        with pytest.raises(UpstreamHTTPError) as caught:
            await upstream.start_session("/tmp/w")
        assert type(caught.value) is UpstreamHTTPError

    run_with_upstream(scenario)


@pytest.mark.parametrize(
    "failure", [httpx.ConnectError("refused"), httpx.ConnectTimeout("slow"), httpx.ReadTimeout("x")]
)
def test_unreachable_goose_raises_upstream_unavailable(failure: Exception) -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}").mock(side_effect=failure)
        mock.get(f"/sessions/{SESSION}/events").mock(side_effect=failure)
        with pytest.raises(UpstreamUnavailable):
            await upstream.get_session(SESSION)
        with pytest.raises(UpstreamUnavailable):
            await collect(upstream, 3)

    run_with_upstream(scenario)


def test_success_without_json_object_is_an_upstream_error() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}").respond(200, text="<html>login</html>")
        mock.post("/agent/resume").respond(json={"extension_results": []})
        with pytest.raises(UpstreamError, match="not a JSON object"):
            await upstream.get_session(SESSION)
        with pytest.raises(UpstreamError, match="without a session id"):
            await upstream.resume_session(SESSION)

    run_with_upstream(scenario)


# --- sessions and turns


def test_sessions_are_started_resumed_and_read() -> None:
    conversation = [user_message("hello", created=1)]

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        start = mock.post("/agent/start").respond(json=SESSION_JSON)
        resume = mock.post("/agent/resume").respond(json={"session": SESSION_JSON})
        mock.get(f"/sessions/{SESSION}").respond(
            json={**SESSION_JSON, "conversation": conversation}
        )

        started = await upstream.start_session("/tmp/w")
        assert started.id == SESSION
        assert started.conversation is None
        assert json.loads(start.calls.last.request.content) == {"working_dir": "/tmp/w"}

        assert (await upstream.resume_session(SESSION)).id == SESSION
        assert json.loads(resume.calls.last.request.content) == {
            "session_id": SESSION,
            "load_model_and_extensions": True,
        }
        assert (await upstream.get_session(SESSION)).conversation == conversation

    run_with_upstream(scenario)


def load_schema(name: str) -> jsonschema.protocols.Validator:
    components = goose_openapi()["components"]
    # OpenAPI 3.0 schemas are JSON Schema plus `nullable`, which a validator ignores; the body
    # sends no nulls, so nothing depends on it.
    schema = {"$ref": f"#/components/schemas/{name}", "components": components}
    return jsonschema.Draft7Validator(schema)


def test_reply_body_matches_goose_schema_and_returns_a_fresh_uuid() -> None:
    validator = load_schema("SessionReplyRequest")
    # Proves the schema is really resolved: goose's Message requires `metadata`.
    no_metadata = {k: v for k, v in user_message("x").items() if k != "metadata"}
    assert not validator.is_valid({"request_id": str(uuid.uuid4()), "user_message": no_metadata})

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.post(f"/sessions/{SESSION}/reply").respond(json={"request_id": "ignored"})
        first = await upstream.reply(SESSION, "list the files")
        second = await upstream.reply(SESSION, "again")
        assert uuid.UUID(first).version == 4
        assert first != second
        body = json.loads(route.calls[0].request.content)
        validator.validate(body)
        assert body["request_id"] == first
        assert body["user_message"]["role"] == "user"
        assert body["user_message"]["content"] == [{"type": "text", "text": "list the files"}]

    run_with_upstream(scenario)


def test_reply_uses_the_given_request_id_and_message() -> None:
    message = {
        **user_message("hi", created=5),
        "metadata": {"userVisible": False, "agentVisible": True},
    }

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.post(f"/sessions/{SESSION}/reply").respond(json={"request_id": "r"})
        request_id = str(uuid.uuid4())
        assert await upstream.reply(SESSION, message, request_id=request_id) == request_id
        body = json.loads(route.calls.last.request.content)
        assert body == {"request_id": request_id, "user_message": message}

    run_with_upstream(scenario)


def test_cancel_sends_the_request_id() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.post(f"/sessions/{SESSION}/cancel").respond(200)
        await upstream.cancel(SESSION, "req-1")
        assert json.loads(route.calls.last.request.content) == {"request_id": "req-1"}

    run_with_upstream(scenario)


def test_status_is_true_only_for_200() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.get("/status")
        route.respond(text="ok")
        assert await upstream.status() is True
        route.respond(503)
        assert await upstream.status() is False
        route.mock(side_effect=httpx.ConnectError("refused"))
        assert await upstream.status() is False

    run_with_upstream(scenario)


# --- the event stream


@pytest.mark.parametrize(("cursor", "header"), [(None, None), (0, "0"), (41, "41")])
def test_last_event_id_is_sent_only_when_given(cursor: int | None, header: str | None) -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(b""))
        assert await collect(upstream, cursor) == []
        assert route.calls.last.request.headers.get("Last-Event-ID") == header

    run_with_upstream(scenario)


@pytest.mark.parametrize("cursor", [-1, True])
def test_a_cursor_goose_cannot_have_issued_is_refused(cursor: int) -> None:
    upstream = GooseUpstream(BASE, secret_key=SECRET, client=httpx.AsyncClient())
    with pytest.raises(ValueError, match="last_event_id"):
        upstream.events(SESSION, cursor)
    asyncio.run(upstream.client.aclose())


def test_frames_are_typed_and_pings_ignored() -> None:
    body = (
        frame_line(None, {"type": "ActiveRequests", "request_ids": ["r-1"]})
        + ": ping 0\n\n"
        + frame_line(4, {"type": "Message", "message": {"id": "m"}, "chat_request_id": "r-1"})
        + ": ping 1\n\n"
        + frame_line(5, {"type": "Finish", "reason": "stop", "chat_request_id": "r-1"})
    )

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(body.encode()))
        async with upstream.events(SESSION, 3) as frames:
            received = [frame async for frame in frames]
            assert frames.last_event_id == 5
        assert [(f.id, f.type, f.run_key) for f in received] == [
            (None, "ActiveRequests", None),
            (4, "Message", "r-1"),
            (5, "Finish", "r-1"),
        ]
        assert received[0].data["request_ids"] == ["r-1"]

    run_with_upstream(scenario)


def test_frame_without_id_line_after_an_id_gets_no_id() -> None:
    body = frame_line(7, {"type": "Finish", "chat_request_id": "a"}) + frame_line(
        None, {"type": "ActiveRequests", "request_ids": []}
    )

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(body.encode()))
        assert [f.id for f in await collect(upstream, None)] == [7, None]

    run_with_upstream(scenario)


def test_too_far_behind_is_raised_not_yielded() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(TOO_FAR_BEHIND.encode()))
        received: list[UpstreamFrame] = []
        with pytest.raises(UpstreamTooFarBehind) as caught:
            async with upstream.events(SESSION, 12) as frames:
                received.extend([frame async for frame in frames])
        assert received == []
        assert caught.value.last_event_id == 12
        assert "Client too far behind" in caught.value.message

    run_with_upstream(scenario)


def test_frames_the_standard_library_takes_are_taken_and_what_is_not_json_is_refused() -> None:
    # orjson decodes frames but refuses a lone surrogate escape and NaN; the standard library
    # takes both, as before (the log then decides about the surrogate).
    surrogate = parse_frame("3", '{"type":"Message","text":"\\ud800","chat_request_id":"r"}')
    assert (surrogate.type, surrogate.run_key, surrogate.data["text"]) == ("Message", "r", "\ud800")
    assert parse_frame("4", '{"type":"MessageUsage","cost":NaN}').type == "MessageUsage"
    for bad in ('{"type":"Message"', '["Message"]', '{"text":"no type"}'):
        with pytest.raises(UpstreamError):
            parse_frame("5", bad)


def test_only_goose_s_id_0_error_means_too_far_behind() -> None:
    signal = parse_frame("0", json.dumps({"type": "Error", "error": "Client too far behind"}))
    ordinary_error = parse_frame("9", json.dumps({"type": "Error", "error": "model failed"}))
    assert signal.too_far_behind
    assert not ordinary_error.too_far_behind


def test_incremental_stream_yields_frames_as_they_complete() -> None:
    arrived = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b'id: 1\ndata: {"type":"Message","chat_req'
        yield b'uest_id":"r"}\n\n: ping 0\n\n'
        # goose sends nothing more until the consumer has seen the first frame.
        await arrived.wait()
        yield b'id: 2\ndata: {"type":"Finish","reason":"stop","chat_request_id":"r"}\n\n'

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(body()))
        ids = []
        async with upstream.events(SESSION, None) as frames:
            async for frame in frames:
                ids.append(frame.id)
                arrived.set()
        assert ids == [1, 2]

    run_with_upstream(scenario)


def test_connection_lost_mid_stream_raises_upstream_unavailable() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'id: 1\ndata: {"type":"Message","chat_request_id":"r"}\n\n'
        raise httpx.ReadTimeout("no ping for too long")

    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(body()))
        ids = []
        with pytest.raises(UpstreamUnavailable):
            async with upstream.events(SESSION, None) as frames:
                async for frame in frames:
                    ids.append(frame.id)
        assert ids == [1]

    run_with_upstream(scenario)


def test_stream_error_status_and_wrong_content_type_fail_on_open() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        route = mock.get(f"/sessions/{SESSION}/events")
        route.respond(404)
        with pytest.raises(SessionNotFound):
            await collect(upstream, None)
        route.respond(200, json={"not": "sse"})
        with pytest.raises(UpstreamError, match="not an event stream"):
            await collect(upstream, None)

    run_with_upstream(scenario)


def test_stream_uses_the_dead_connection_read_timeout() -> None:
    async def scenario(upstream: GooseUpstream, mock: respx.MockRouter) -> None:
        events = mock.get(f"/sessions/{SESSION}/events").mock(return_value=sse(b""))
        session = mock.get(f"/sessions/{SESSION}").respond(json=SESSION_JSON)
        await collect(upstream, None)
        await upstream.get_session(SESSION)
        assert events.calls.last.request.extensions["timeout"]["read"] == 2.5
        assert session.calls.last.request.extensions["timeout"]["read"] == 30.0

    run_with_upstream(scenario, timeout=30.0, stream_read_timeout=2.5)


# --- client ownership


def test_aclose_never_closes_an_injected_client() -> None:
    async def main() -> None:
        async with httpx.AsyncClient() as client:
            upstream = GooseUpstream(BASE, secret_key=SECRET, client=client)
            await upstream.aclose()
            assert not client.is_closed

        async with GooseUpstream(BASE, secret_key=SECRET) as owning:
            own_client = owning.client
            assert not own_client.is_closed
        assert own_client.is_closed

    asyncio.run(main())
