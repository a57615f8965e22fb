"""SSE of a stream, driven by hand: frames, cursors, replay then live, pings, disconnects."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import EventLog, Gateway, GatewaySettings, StreamSettings
from tests.support.asgi_driver import Request
from tests.support.waiting import settled

from .conftest import MakeGateway

ENVELOPE_KEYS = ["seq", "stream", "pos", "run_id", "type", "data", "upstream_event_id"]


def append(log: EventLog, count: int, stream: str = "conv", **fields: object) -> list[int]:
    return [log.append(stream, "Message", {"i": i}, **fields).seq for i in range(count)]  # type: ignore[arg-type]


def events_path(stream: str = "conv") -> str:
    return f"/gateway/streams/{stream}/events"


def test_frames_carry_id_and_one_data_line_with_the_envelope(
    log: EventLog, gateway: Gateway
) -> None:
    log.append("conv", "Message", {"text": "line one\nline two", "emoji": "✓"}, run_id="r1")

    async def main() -> None:
        request = Request(gateway, events_path()).start()
        await request.wait_events(1)
        request.disconnect()
        await request.finished()
        assert request.status == 200
        assert request.body.startswith(b"id: 1\ndata: {")
        (frame,) = request.frames
        assert frame.id == "1"
        assert list(frame.envelope) == ENVELOPE_KEYS
        assert frame.envelope["data"] == {"text": "line one\nline two", "emoji": "✓"}
        assert frame.envelope["run_id"] == "r1"

    asyncio.run(main())


def test_headers_tell_proxies_not_to_buffer_cache_or_compress(gateway: Gateway) -> None:
    async def main() -> None:
        request = Request(gateway, events_path(), headers={"accept-encoding": "gzip"}).start()
        await request.wait_for(lambda r: r.status is not None)
        request.disconnect()
        await request.finished()
        headers = request.response_headers
        assert headers["content-type"] == "text/event-stream"
        assert "no-store" in headers["cache-control"].split(", ")
        assert headers["x-accel-buffering"] == "no"
        assert "content-encoding" not in headers

    asyncio.run(main())


def test_replay_hands_over_to_live_without_gap_or_duplicate(
    log: EventLog, gateway: Gateway
) -> None:
    append(log, 30)

    async def main() -> None:
        request = Request(gateway, events_path()).start()

        async def writer() -> None:  # appends racing the replay and the hand-over
            for i in range(40):
                await log.aappend("conv", "Message", {"live": i})

        await asyncio.gather(writer(), request.wait_events(70))
        request.disconnect()
        await request.finished()
        assert [e["seq"] for e in request.events] == list(range(1, 71))

    asyncio.run(main())


def test_only_events_of_the_requested_stream(log: EventLog, gateway: Gateway) -> None:
    append(log, 2, stream="other")
    mine = append(log, 2)

    async def main() -> None:
        request = Request(gateway, events_path()).start()
        await request.wait_events(2)
        log.append("other", "Message", {})
        mine.append(log.append("conv", "Message", {}).seq)
        await request.wait_events(3)
        request.disconnect()
        await request.finished()
        assert [e["seq"] for e in request.events] == mine
        assert {e["stream"] for e in request.events} == {"conv"}

    asyncio.run(main())


@pytest.mark.parametrize(
    ("params", "headers", "expected_first"),
    [
        ({"after": "3"}, {}, 4),
        ({"after": "1"}, {"Last-Event-ID": "4"}, 5),  # the header wins over the parameter
        ({}, {"Last-Event-ID": ""}, 1),  # an empty header is no cursor
    ],
)
def test_resumes_after_the_cursor(
    log: EventLog,
    gateway: Gateway,
    params: dict[str, str],
    headers: dict[str, str],
    expected_first: int,
) -> None:
    append(log, 6)

    async def main() -> None:
        request = Request(gateway, events_path(), params=params, headers=headers).start()
        await request.wait_events(7 - expected_first)
        request.disconnect()
        await request.finished()
        assert [e["seq"] for e in request.events] == list(range(expected_first, 7))

    asyncio.run(main())


@pytest.mark.parametrize("cursor", ["abc", "-1", "1.5", "0x10", "", "epoch:-3"])
@pytest.mark.parametrize("accept", ["text/event-stream", "application/json"])
def test_a_bad_cursor_is_a_400_json_error(gateway: Gateway, cursor: str, accept: str) -> None:
    async def main() -> None:
        request = await Request(
            gateway, events_path(), params={"after": cursor}, headers={"accept": accept}
        ).run()
        assert request.status == 400
        assert request.response_headers["content-type"] == "application/json"
        body = request.json()
        assert body["error"] == "invalid_cursor"
        assert "after" in body["message"]

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["beyond_head", "other_epoch"])
def test_an_untrustworthy_cursor_gets_a_reset_then_everything(
    log: EventLog, gateway: Gateway, kind: str
) -> None:
    append(log, 3)
    settled(log)  # the reset names the head readers are given
    cursor = "4" if kind == "beyond_head" else "another-epoch:2"

    async def main() -> None:
        request = Request(gateway, events_path(), headers={"Last-Event-ID": cursor}).start()
        await request.wait_events(4)
        request.disconnect()
        await request.finished()
        reset, *events = request.frames
        assert reset.id == "0"
        assert reset.envelope["type"] == "reset"
        assert reset.envelope["data"] == {
            "epoch": log.epoch,
            "head": 3,
            "reason": "cursor_beyond_head" if kind == "beyond_head" else "epoch_mismatch",
        }
        assert [f.envelope["seq"] for f in events] == [1, 2, 3]

    asyncio.run(main())


def test_an_epoch_qualified_cursor_of_this_log_resumes_normally(
    log: EventLog, gateway: Gateway
) -> None:
    append(log, 3)

    async def main() -> None:
        cursor = f"{log.epoch}:2"
        request = Request(gateway, events_path(), params={"after": cursor}).start()
        await request.wait_events(1)
        request.disconnect()
        await request.finished()
        assert [e["seq"] for e in request.events] == [3]

    asyncio.run(main())


def test_pings_keep_an_idle_stream_alive(make_gateway: MakeGateway) -> None:
    gateway = make_gateway(settings=GatewaySettings(streams=StreamSettings(ping_interval=0.01)))

    async def main() -> None:
        request = Request(gateway, events_path()).start()
        await request.wait_for(lambda r: len(r.frames) >= 2)
        request.disconnect()
        await request.finished()
        assert request.body.startswith(b": ping\n\n: ping\n\n")
        assert all(f.comment for f in request.frames)

    asyncio.run(main())


def test_a_client_disconnect_ends_the_response(log: EventLog, gateway: Gateway) -> None:
    append(log, 1)

    async def main() -> None:
        request = Request(gateway, events_path()).start()
        await request.wait_events(1)
        request.disconnect()
        await request.finished()
        assert not request.complete  # nobody is listening: nothing more is written
        assert len(gateway.streams.state().hub) == 0

    asyncio.run(main())
