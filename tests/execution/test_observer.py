"""The observer around an ASGI app: what it notes of each request of a tmux session, and that
it hands every message on as it came."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from gateway_kit import EventLog
from gateway_kit.execution.observer import ExecutionObserver
from gateway_kit.execution.recorder import ExecutionRecorder
from gateway_kit.execution.request_rows import RequestRows
from gateway_kit.execution.state import Outcome, State, fold
from gateway_kit.types import Message, Receive, Scope, Send

TMUX = "agent-1"
SSE = [(b"content-type", b"text/event-stream")]
JSON = [(b"content-type", b"application/json")]
ANTHROPIC_MESSAGE = (
    b'{"id":"msg_1","type":"message","role":"assistant","content":[],"stop_reason":"tool_use"}'
)


def openai_chunk(reason: str | None) -> bytes:
    choice = {"index": 0, "delta": {"content": "hi"}, "finish_reason": reason}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


def by_header(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-tmux-session-id":
            return str(value.decode())
    return None


def scope(tmux: str | None = TMUX) -> Scope:
    headers = [(b"x-tmux-session-id", tmux.encode())] if tmux else []
    return {"type": "http", "method": "POST", "path": "/v1/chat", "headers": headers}


def streaming(chunks: list[bytes], headers: list[tuple[bytes, bytes]] = SSE) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def call(
    app: Any, scope: Scope, *, on_send: Callable[[Message], Awaitable[None]] | None = None
) -> list[Message]:
    sent: list[Message] = []
    body = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive() -> Message:
        # As a server does: the body, then nothing until the client leaves (it never does).
        message = next(body, None)
        if message is None:
            await asyncio.Event().wait()
        return message  # type: ignore[return-value]

    async def send(message: Message) -> None:
        sent.append(message)
        if on_send is not None:
            await on_send(message)

    await app(scope, receive, send)
    return sent


class Observed:
    def __init__(self, log: EventLog) -> None:
        self.recorder = ExecutionRecorder(RequestRows(log))
        self.rows = self.recorder.rows

    def around(self, app: Any) -> ExecutionObserver:
        return ExecutionObserver(app, recorder=self.recorder, resolve=by_header)

    async def state(self) -> Any:
        assert await self.recorder.flush()
        now = self.recorder.clock()
        return fold(TMUX, await asyncio.to_thread(self.rows.read, TMUX, now), now)

    async def only_record(self) -> Any:
        assert await self.recorder.flush()
        (record,) = await asyncio.to_thread(self.rows.read, TMUX, self.recorder.clock())
        return record


def test_every_message_passes_as_it_came(sqlite_url: str) -> None:
    chunks = [
        openai_chunk(None)[:7],
        openai_chunk(None)[7:],
        openai_chunk("stop"),
        b"data: [DONE]\n\n",
    ]
    app = streaming(chunks)

    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        bare = await call(app, scope())
        through = await call(observed.around(app), scope())
        assert through == bare  # the same messages, the same chunk boundaries, in order
        assert [m.get("body") for m in through[1:]] == [*chunks, b""]
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))


def test_a_stream_is_open_until_its_last_byte_and_its_reason_is_read(sqlite_url: str) -> None:
    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        seen: list[State] = []

        async def look(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("more_body"):
                seen.append((await observed.state()).state)

        app = streaming([openai_chunk(None), openai_chunk("tool_calls"), b"data: [DONE]\n\n"])
        await call(observed.around(app), scope(), on_send=look)
        assert seen == [State.STREAMING_OPEN] * 3
        record = await observed.only_record()
        assert (record.outcome, record.finish_reason) == ("completed", "tool_calls")
        assert (await observed.state()).state is State.POST_RESPONSE_GRACE
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))


@pytest.mark.parametrize(
    ("body", "headers", "outcome", "reason"),
    [
        (b'{"choices":[{"finish_reason":"stop","message":{}}]}', JSON, "completed", "stop"),
        (ANTHROPIC_MESSAGE, JSON, "completed", "tool_calls"),
        (b"<html>status page</html>", [(b"content-type", b"text/html")], "completed", None),
    ],
)
def test_a_whole_answer_ends_its_request(
    sqlite_url: str, body: bytes, headers: Any, outcome: str, reason: str | None
) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        await call(observed.around(app), scope())
        record = await observed.only_record()
        assert (record.outcome, record.finish_reason) == (outcome, reason)
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))


def test_a_client_that_leaves_mid_stream_is_noted(sqlite_url: str) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        await send({"type": "http.response.body", "body": openai_chunk(None), "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass  # a server's app that stops streaming when its client leaves

    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        messages = iter([{"type": "http.disconnect"}])

        async def receive() -> Message:
            return next(messages)

        async def send(message: Message) -> None:
            pass

        await observed.around(app)(scope(), receive, send)
        record = await observed.only_record()
        assert record.outcome == Outcome.CLIENT_CLOSED.value
        state = await observed.state()
        assert (state.state, state.last_client_close_before_terminal) == (State.STALED, True)
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))


def test_an_app_that_fails_is_noted_and_its_exception_goes_on(sqlite_url: str) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE})
        raise RuntimeError("the handler broke")

    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        with pytest.raises(RuntimeError, match="handler broke"):
            await call(observed.around(app), scope())
        assert (await observed.only_record()).outcome == Outcome.ERROR.value
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))


def test_a_request_of_no_tmux_session_is_not_noted(sqlite_url: str) -> None:
    async def scenario(log: EventLog) -> None:
        observed = Observed(log)
        await call(observed.around(streaming([openai_chunk("stop")])), scope(tmux=None))
        assert observed.recorder.open_requests == 0
        assert (await observed.state()).state is State.UNKNOWN
        await observed.recorder.stop()

    with EventLog(sqlite_url) as log:
        asyncio.run(scenario(log))
