"""The JSON page of a stream, for clients that poll."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.log.postgres import conninfo
from tests.support.asgi_driver import Request
from tests.support.postgres import PG_URL
from tests.support.waiting import settled

JSON = {"accept": "application/json"}


def page(gateway: Gateway, **params: str) -> tuple[int, Any]:
    """The page once every event written so far is given to readers by cursor."""
    settled(gateway.log)
    return page_now(gateway, **params)


def page_now(gateway: Gateway, **params: str) -> tuple[int, Any]:
    async def main() -> tuple[int, Any]:
        request = await Request(
            gateway, "/gateway/streams/conv/events", params=params, headers=JSON
        ).run()
        assert request.status is not None
        return request.status, request.json()

    return asyncio.run(main())


def test_a_page_holds_envelopes_and_the_next_cursor(log: EventLog, gateway: Gateway) -> None:
    first = log.append("conv", "Message", {"text": "hi"}, run_id="r1")
    log.append("elsewhere", "Message", {})
    log.append("conv", "Finish", {}, run_id="r1")
    status, body = page(gateway)
    assert status == 200
    assert list(body) == ["epoch", "events", "next_after", "terminal"]
    assert body["epoch"] == log.epoch
    assert body["events"][0] == first.envelope()
    assert [e["seq"] for e in body["events"]] == [1, 3]
    assert body["next_after"] == 3
    assert body["terminal"] is True


def test_polling_with_next_after_walks_the_stream_in_limited_pages(
    log: EventLog, gateway: Gateway
) -> None:
    for i in range(5):
        log.append("conv", "Message", {"i": i})
    seen: list[int] = []
    after = "0"
    for _ in range(3):
        _, body = page(gateway, after=after, limit="2")
        assert len(body["events"]) <= 2
        seen += [e["seq"] for e in body["events"]]
        after = str(body["next_after"])
    assert seen == [1, 2, 3, 4, 5]
    _, body = page(gateway, after=after)
    assert body["events"] == [] and body["next_after"] == 5 and body["terminal"] is False


def test_terminal_stays_true_while_nothing_follows_the_finish(
    log: EventLog, gateway: Gateway
) -> None:
    log.append("conv", "Message", {}, run_id="r1")
    log.append("conv", "Error", {"message": "boom"}, run_id="r1")
    _, body = page(gateway, after="2")
    assert body == {"epoch": log.epoch, "events": [], "next_after": 2, "terminal": True}
    log.append("conv", "Message", {}, run_id="r2")
    _, body = page(gateway, after="2")
    assert body["terminal"] is False


def test_a_cursor_beyond_the_head_gets_a_reset_page(log: EventLog, gateway: Gateway) -> None:
    log.append("conv", "Message", {})
    _, body = page(gateway, after="9")
    reset, event = body["events"]
    assert reset["type"] == "reset" and reset["seq"] == 0
    assert reset["data"] == {"epoch": log.epoch, "head": 1, "reason": "cursor_beyond_head"}
    assert event["seq"] == 1 and body["next_after"] == 1


def test_a_cursor_of_a_committed_event_is_no_reset_while_other_transactions_run(
    pg_url: str,
) -> None:
    """On PostgreSQL readers are given an event only once no older transaction runs anywhere
    on the server; its seq, handed out by the writer meanwhile, is still a cursor of this log."""
    with EventLog(pg_url) as log:
        gateway = Gateway(log=log, allow_anonymous=True)
        log.append("conv", "Message", {"n": 0})
        with psycopg.connect(conninfo(PG_URL), autocommit=False) as other:
            other.execute("SELECT pg_current_xact_id()")  # a transaction with an id, open
            written = log.append("conv", "Finish", {"n": 1})
            status, body = page_now(gateway, after=str(written.seq))
            other.rollback()
        assert status == 200
        assert body["events"] == [] and body["next_after"] == written.seq  # no reset, no replay
        assert body["terminal"] is True  # the client has the stream's last event, a Finish


@pytest.mark.parametrize("limit", ["0", "-2", "many"])
def test_a_bad_limit_is_a_400_json_error(gateway: Gateway, limit: str) -> None:
    status, body = page(gateway, limit=limit)
    assert status == 400
    assert body["error"] == "invalid_limit"


def test_a_large_limit_is_served_as_the_cap(log: EventLog, gateway: Gateway) -> None:
    log.append_many([{"stream": "conv", "type": "Message"} for _ in range(1005)])
    _, body = page(gateway, limit="5000")
    assert len(body["events"]) == 1000
