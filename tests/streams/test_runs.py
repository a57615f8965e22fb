"""SSE of one run: only its events, an end after its terminal event, 204 once it is over."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import EventLog, Gateway
from tests.support.asgi_driver import Request
from tests.support.waiting import settled


def run_path(run_id: str = "r1") -> str:
    return f"/gateway/runs/{run_id}/events"


@pytest.mark.parametrize("terminal", ["Finish", "Error"])
def test_a_finished_run_is_replayed_and_the_response_ends(
    log: EventLog, gateway: Gateway, terminal: str
) -> None:
    log.append("conv", "Message", {}, run_id="r0")
    log.append("conv", "Message", {"a": 1}, run_id="r1")
    log.append("conv", terminal, {}, run_id="r1")
    log.append("conv", "Message", {}, run_id="r2")

    async def main() -> None:
        request = Request(gateway, run_path()).start()
        await request.finished()
        assert request.complete
        assert [(e["seq"], e["type"]) for e in request.events] == [(2, "Message"), (3, terminal)]

    asyncio.run(main())


def test_a_live_run_ends_after_its_terminal_event(log: EventLog, gateway: Gateway) -> None:
    log.append("conv", "Message", {}, run_id="r1")

    async def main() -> None:
        request = Request(gateway, run_path()).start()
        await request.wait_events(1)
        await log.aappend("conv", "Message", {}, run_id="other")
        await log.aappend("conv", "Message", {}, run_id="r1")
        await log.aappend("conv", "Finish", {}, run_id="r1")
        await request.finished()
        assert request.complete
        assert [e["seq"] for e in request.events] == [1, 3, 4]

    asyncio.run(main())


@pytest.mark.parametrize("cursor", ["3", "5"])
def test_a_cursor_at_or_past_the_terminal_event_gets_204(
    log: EventLog, gateway: Gateway, cursor: str
) -> None:
    log.append("conv", "Message", {}, run_id="r1")
    log.append("conv", "Message", {}, run_id="r1")
    log.append("conv", "Finish", {}, run_id="r1")
    log.append("conv", "Message", {}, run_id="r2")
    log.append("conv", "Message", {}, run_id="r2")
    settled(log)

    async def main() -> None:
        request = await Request(gateway, run_path(), headers={"Last-Event-ID": cursor}).run()
        assert request.status == 204
        assert request.body == b""

    asyncio.run(main())


@pytest.mark.parametrize("accept", ["text/event-stream", "application/json"])
def test_a_run_the_log_holds_nothing_of_is_a_404(
    log: EventLog, gateway: Gateway, accept: str
) -> None:
    log.append("conv", "Message", {}, run_id="known")

    async def main() -> None:
        for run_id in ("unknown", "x" * 300, "nul%00"):
            request = await Request(gateway, run_path(run_id), headers={"accept": accept}).run()
            assert request.status == 404, run_id
            assert request.json()["error"] == "run_not_found"

    asyncio.run(main())


def test_a_run_page_in_json(log: EventLog, gateway: Gateway) -> None:
    log.append("conv", "Message", {}, run_id="r1")
    log.append("conv", "Message", {}, run_id="r2")
    log.append("conv", "Finish", {}, run_id="r1")
    settled(log)

    async def main() -> None:
        request = await Request(gateway, run_path(), headers={"accept": "application/json"}).run()
        body = request.json()
        assert [e["seq"] for e in body["events"]] == [1, 3]
        assert body["next_after"] == 3 and body["terminal"] is True

    asyncio.run(main())
