"""Requests a hostile or careless client sends: each answered with a 4xx JSON error (or a 2xx
that serves it), never a 5xx, and a refused one writes nothing and asks nothing of goose.

Each test guards one way the HTTP surface used to fail; "writes nothing" is checked on the three
tables (events, runs, session bindings) and on goose's record of session starts and replies.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable

import pytest

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings, RunSettings
from gateway_kit.log.event import MAX_NAME_LENGTH
from gateway_kit.streams.page import MAX_PAGE_LIMIT
from gateway_kit.streams.request import MAX_SEQ
from gateway_kit.testing import FakeGoose
from tests.support.raw_requests import (
    JSON_TYPE,
    PREFIX,
    Answer,
    Call,
    assert_json_error,
    get,
    goose_calls,
    post_json,
    running_gateway,
    wait_run_ended,
    writes,
)
from tests.support.waiting import settled

HUGE = "9" * 5000  # more digits than Python converts to an int (4300)
Check = Callable[[Gateway, EventLog, FakeGoose], Awaitable[None]]


def runs_path(stream: str) -> str:
    return f"{PREFIX}/streams/{stream}/runs"


def with_gateway(log_url: str, check: Check, **options: object) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with running_gateway(log_url, fake, **options) as (gateway, log):
            await check(gateway, log, fake)

    asyncio.run(main())


async def refused(
    gateway: Gateway, log: EventLog, fake: FakeGoose, call: Call, status: int, code: str
) -> Answer:
    """Send `call`; it must be the JSON error (`status`, `code`) and change nothing."""
    before, asked = writes(log), goose_calls(fake)
    answer = await call(gateway)
    assert_json_error(answer, status, code)
    assert writes(log) == before, "a refused request wrote to the database"
    assert goose_calls(fake) == asked, "a refused request reached goose"
    return answer


async def starts(
    gateway: Gateway, stream: str, headers: list[tuple[bytes, bytes]] = JSON_TYPE
) -> str:
    """A valid run on `stream` starts (200); waits until it ended, so that nothing writes on."""
    answer = await post_json(runs_path(stream), {"message": "hello"}, headers=headers)(gateway)
    assert answer.status == 200, answer.body
    run_id: str = answer.json()["run_id"]
    await wait_run_ended(gateway, run_id)
    return run_id


def a_run_of(log: EventLog, stream: str = "conv") -> str:
    """A run the log knows (its first event written directly: no goose involved)."""
    run_id = str(uuid.uuid4())
    log.append(stream, "RunStarted", {"run_id": run_id, "message": "hi"}, run_id=run_id)
    settled(log)  # readers by cursor are given it (on PostgreSQL, once older transactions end)
    return run_id


# --- a stream name the log cannot hold ----------------------------------------------------


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param("s" * (MAX_NAME_LENGTH + 1), id="too-long"),
        pytest.param("%C3%A9" * (MAX_NAME_LENGTH + 1), id="too-long-non-ascii"),
        pytest.param("a%00b", id="nul"),
    ],
)
def test_a_run_on_a_stream_name_the_log_cannot_hold_is_a_400_that_binds_nothing(
    log_url: str, stream: str
) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = post_json(runs_path(stream), {"message": "hi"})
        await refused(gateway, log, fake, call, 400, "invalid_run")
        # Once wedged the stream answered 409 from then on; now it is refused the same way.
        await refused(gateway, log, fake, call, 400, "invalid_run")
        await starts(gateway, "s" * MAX_NAME_LENGTH)  # the longest name that can be a stream

    with_gateway(log_url, check)


# --- bodies the decoder or the log cannot take ----------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"[" * 100_000, id="unclosed"),
        pytest.param(b"[" * 50_000 + b"]" * 50_000, id="closed"),
        pytest.param(b'{"message": "hi", "x": ' + b"[" * 50_000 + b"]", id="beside-the-message"),
    ],
)
def test_deeply_nested_json_is_a_400_not_a_recursion_error(log_url: str, body: bytes) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = Call("POST", runs_path("conv").encode(), headers=JSON_TYPE, body=body)
        answer = await refused(gateway, log, fake, call, 400, "invalid_body")
        assert "deeper" in answer.json()["message"]
        await starts(gateway, "conv")

    with_gateway(log_url, check)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"message": "\\ud800"}', id="high"),
        pytest.param(b'{"message": "x\\udfffy"}', id="low"),
        pytest.param(b'{"message": "\\udc00\\ud800"}', id="pair-reversed"),
        pytest.param(b'{"message": "\xed\xa0\x80"}', id="raw-utf8-surrogate"),  # surrogatepass
    ],
)
def test_a_lone_surrogate_in_the_message_is_a_400_before_a_session_is_bound(
    log_url: str, body: bytes
) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = Call("POST", runs_path("conv").encode(), headers=JSON_TYPE, body=body)
        await refused(gateway, log, fake, call, 400, "invalid_run")
        await starts(gateway, "conv")

    with_gateway(log_url, check)


def test_a_nul_in_the_message_is_a_400_before_a_session_is_bound(log_url: str) -> None:
    # The run row keeps the message as text, and PostgreSQL text cannot hold NUL: this was a
    # 500 there, raised after goose had started a session and the stream was bound to it.
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = post_json(runs_path("conv"), {"message": "a\x00b"})
        answer = await refused(gateway, log, fake, call, 400, "invalid_run")
        assert "NUL" in answer.json()["message"]
        await starts(gateway, "conv")

    with_gateway(log_url, check)


# --- cursors, limits and indexes of more digits than an int takes ----------------------------


def test_a_huge_cursor_on_a_json_page_is_a_reset_not_a_503(log_url: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        run_id = a_run_of(log)
        before = writes(log)
        pages = [
            get(f"{PREFIX}/streams/conv/events", f"after={HUGE}", accept="application/json"),
            get(f"{PREFIX}/streams/conv/events", accept="application/json", last_event_id=HUGE),
            get(
                f"{PREFIX}/streams/conv/events",
                accept="application/json",
                last_event_id=f"{log.epoch}:{HUGE}",
            ),
            get(f"{PREFIX}/runs/{run_id}/events", f"after={HUGE}", accept="application/json"),
        ]
        for call in pages:
            answer = await call(gateway)
            assert answer.status == 200, answer.body[:300]
            events = answer.json()["events"]
            assert events[0]["type"] == "reset"
            assert events[0]["data"]["reason"] == "cursor_beyond_head"
            assert [e["type"] for e in events[1:]] == ["RunStarted"]  # the replay follows
        assert writes(log) == before

    with_gateway(log_url, check)


def test_a_huge_cursor_on_an_event_stream_is_a_reset_not_a_503(log_url: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        run_id = a_run_of(log)
        streams = [
            get(f"{PREFIX}/streams/conv/events", last_event_id=HUGE),
            get(f"{PREFIX}/streams/conv/events", f"after={HUGE}"),
            get(f"{PREFIX}/runs/{run_id}/events", last_event_id=HUGE),
        ]
        for call in streams:
            call.enough = lambda body: body.count(b"\n\n") >= 2  # the reset and one event
            answer = await call(gateway)
            assert answer.status == 200 and answer.streamed, answer.body[:300]
            frames = [f for f in answer.body.decode().split("\n\n") if f]
            assert frames[0].startswith("id: 0\ndata: ")
            reset = json.loads(frames[0].partition("data: ")[2])
            assert (reset["type"], reset["data"]["reason"]) == ("reset", "cursor_beyond_head")
            assert '"type":"RunStarted"' in frames[1]

    with_gateway(log_url, check)


def test_a_huge_limit_is_served_as_the_cap(log_url: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        log.append_many([{"stream": "conv", "type": "Note"}] * (MAX_PAGE_LIMIT + 1))
        settled(log)
        answer = await get(
            f"{PREFIX}/streams/conv/events", f"limit={HUGE}", accept="application/json"
        )(gateway)
        assert answer.status == 200, answer.body[:300]
        page = answer.json()
        assert len(page["events"]) == MAX_PAGE_LIMIT
        assert page["next_after"] == page["events"][-1]["seq"]

    with_gateway(log_url, check)


@pytest.mark.parametrize("offset", [HUGE, str(MAX_SEQ + 1), "0" * 5000 + HUGE])
def test_a_huge_legacy_from_is_a_400_not_a_503(log_url: str, offset: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        task_id = a_run_of(log)
        call = get(f"/api/tasks/{task_id}", f"from={offset}")
        answer = await refused(gateway, log, fake, call, 400, "invalid_cursor")
        assert answer.header("retry-after") is None  # nothing a retry would change
        served = await get(f"/api/tasks/{task_id}", f"from={MAX_SEQ}")(gateway)
        assert (served.status, served.json()["events"]) == (200, [])  # the largest one is fine

    with_gateway(log_url, check)


ZEROS = "0" * 5000  # digits too: a small number behind them takes more than an int converts


def test_a_small_cursor_behind_thousands_of_zeros_is_served_as_that_cursor(log_url: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        run_id = a_run_of(log)
        second = log.append("conv", "Message", {"text": "second"}, run_id=run_id)
        settled(log)
        before = writes(log)
        pages = [
            get(f"{PREFIX}/streams/conv/events", f"after={ZEROS}1", accept="application/json"),
            get(
                f"{PREFIX}/streams/conv/events",
                accept="application/json",
                last_event_id=ZEROS + "1",
            ),
            get(f"{PREFIX}/runs/{run_id}/events", f"after={ZEROS}1", accept="application/json"),
            get(
                f"{PREFIX}/streams/conv/events",
                f"after=1&limit={ZEROS}1",
                accept="application/json",
            ),
        ]
        for call in pages:
            answer = await call(gateway)
            assert answer.status == 200, answer.body[:300]
            assert answer.json()["next_after"] == second.seq
        streams = [
            get(f"{PREFIX}/streams/conv/events", f"after={ZEROS}1"),
            get(f"{PREFIX}/streams/conv/events", last_event_id=ZEROS + "1"),
            get(f"{PREFIX}/runs/{run_id}/events", last_event_id=ZEROS + "1"),
        ]
        for call in streams:
            call.enough = lambda body: b"\n\n" in body
            answer = await call(gateway)
            assert answer.status == 200 and answer.streamed, answer.body[:300]
            assert answer.body.startswith(f"id: {second.seq}\n".encode())  # after seq 1
        legacy = await get(f"/api/tasks/{run_id}", f"from={ZEROS}1")(gateway)
        assert legacy.status == 200, legacy.body[:300]
        assert [e["idx"] for e in legacy.json()["events"]] == [1]
        assert writes(log) == before

    with_gateway(log_url, check)


def test_a_message_above_max_message_bytes_is_a_413_that_writes_nothing(log_url: str) -> None:
    limit = 1000

    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        over = post_json(runs_path("conv"), {"message": "é" * (limit // 2) + "x"})  # UTF-8 bytes
        answer = await refused(gateway, log, fake, over, 413, "payload_too_large")
        assert str(limit) in answer.json()["message"]
        at_limit = await post_json(runs_path("conv"), {"message": "é" * (limit // 2)})(gateway)
        assert at_limit.status == 200, at_limit.body
        await wait_run_ended(gateway, at_limit.json()["run_id"])

    with_gateway(
        log_url, check, settings=GatewaySettings(runs=RunSettings(max_message_bytes=limit))
    )


def test_a_message_of_a_million_characters_is_a_413_by_default(log_url: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = post_json(runs_path("conv"), {"message": "x" * 1_000_000})  # within the body limit
        await refused(gateway, log, fake, call, 413, "payload_too_large")

    with_gateway(log_url, check)


# --- the events of a run nobody started ---------------------------------------------------


@pytest.mark.parametrize(
    "run_id",
    ["nope", "5b1c4ab4-7b1e-4c1f-9a0e-3f1f5e1d2c3b", "r" * (MAX_NAME_LENGTH + 1), "%00", "a%2Fb"],
)
@pytest.mark.parametrize("accept", ["text/event-stream", "application/json"])
def test_the_events_of_an_unknown_run_are_a_404_not_an_endless_stream(
    log_url: str, run_id: str, accept: str
) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        a_run_of(log)  # the log is not empty: another run is there
        for call in (
            get(f"{PREFIX}/runs/{run_id}/events", accept=accept),
            get(f"{PREFIX}/runs/{run_id}/events", accept=accept, last_event_id="1"),
        ):
            answer = await refused(gateway, log, fake, call, 404, "run_not_found")
            assert not answer.streamed

    with_gateway(log_url, check)


# --- what a body must be declared as, and how large it may be -----------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "",
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "text/json",
        "application/json+x",
    ],
)
def test_a_run_body_not_declared_json_is_a_415(log_url: str, content_type: str | None) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        headers = [] if content_type is None else [(b"content-type", content_type.encode())]
        call = post_json(runs_path("conv"), {"message": "hi"}, headers=headers)
        await refused(gateway, log, fake, call, 415, "unsupported_media_type")
        await starts(
            gateway, "conv", headers=[(b"content-type", b"Application/JSON; charset=utf-8")]
        )
        await starts(gateway, "conv", headers=[(b"content-type", b"application/merge-patch+json")])

    with_gateway(log_url, check)


LIMIT = 4096


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(  # told by Content-Length: refused before a byte is read
            Call(
                "POST",
                runs_path("conv").encode(),
                headers=[*JSON_TYPE, (b"content-length", str(LIMIT + 1).encode())],
                body=b'{"message": "hi"}',
            ),
            id="declared",
        ),
        pytest.param(
            Call(
                "POST",
                runs_path("conv").encode(),
                headers=[*JSON_TYPE, (b"content-length", HUGE.encode())],
                body=b'{"message": "hi"}',
            ),
            id="declared-huge",
        ),
        pytest.param(  # no Content-Length (chunked): the bytes run past the limit
            Call(
                "POST",
                runs_path("conv").encode(),
                headers=JSON_TYPE,
                body=b'{"message": "' + b"x" * LIMIT + b'"}',
                chunk=1000,
            ),
            id="streamed",
        ),
        pytest.param(  # a Content-Length that lies low does not let more through
            Call(
                "POST",
                runs_path("conv").encode(),
                headers=[*JSON_TYPE, (b"content-length", b"10")],
                body=b'{"message": "' + b"x" * LIMIT + b'"}',
                chunk=1000,
            ),
            id="lying",
        ),
    ],
)
def test_a_body_over_the_limit_is_a_413(log_url: str, call: Call) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        await refused(gateway, log, fake, call, 413, "payload_too_large")
        exactly = b'{"message": "' + b"x" * (LIMIT - 15) + b'"}'
        assert len(exactly) == LIMIT
        fits = Call("POST", runs_path("conv").encode(), headers=JSON_TYPE, body=exactly)
        answer = await fits(gateway)
        assert answer.status == 200, answer.body
        await wait_run_ended(gateway, answer.json()["run_id"])

    with_gateway(log_url, check, settings=GatewaySettings(http=HttpSettings(max_body_bytes=LIMIT)))


@pytest.mark.parametrize("length", ["abc", "-1", "1e3", "5, 5", "+5", "\u0665"])
def test_a_content_length_that_is_not_a_number_is_a_400(log_url: str, length: str) -> None:
    async def check(gateway: Gateway, log: EventLog, fake: FakeGoose) -> None:
        call = post_json(runs_path("conv"), {"message": "hi"})
        call.headers = [*JSON_TYPE, (b"content-length", length.encode("utf-8"))]
        await refused(gateway, log, fake, call, 400, "invalid_body")
        await starts(gateway, "conv")

    with_gateway(log_url, check)
