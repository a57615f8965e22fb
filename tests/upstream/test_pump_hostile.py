"""The pump against a goose that cuts its event stream mid-frame on every connection."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import pytest

from gateway_kit.runs.model import RunStatus
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.testing.bus import parse_last_event_id
from gateway_kit.testing.event_stream import SSE_HEADERS
from gateway_kit.testing.records import EventsCall
from gateway_kit.types import Receive, Send
from gateway_kit.upstream.goose.pump import PumpSettings
from tests.support.upstream import STREAM, harness, types

LIVE_WAIT = 0.3
# What httpx raises when a chunked body stops before its end (the peer closed the socket).
INCOMPLETE_BODY = "peer closed connection without sending complete message body"


class CuttingGoose(FakeGoose):
    """Lists the active requests, starts a frame and cuts the connection, on every request."""

    clean_close = False  # end the body as if complete, the frame still unfinished

    # The fake's own events route, replaced: no public option of it breaks its wire format.
    async def _events(
        self, session_id: str, last_event_id: str | None, receive: Receive, send: Send
    ) -> None:
        self._session(session_id)
        self.events_calls.append(EventsCall(session_id, last_event_id))
        active = {"type": "ActiveRequests", "request_ids": self.active_request_ids(session_id)}
        body = f'data: {json.dumps(active)}\n\nid: 1\ndata: {{"type":"Mess'.encode()
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": body, "more_body": not self.clean_close})
        if not self.clean_close:
            raise httpx.RemoteProtocolError(INCOMPLETE_BODY)


class ClosingGoose(CuttingGoose):
    clean_close = True


GOOSES = pytest.mark.parametrize("goose", [CuttingGoose, ClosingGoose], ids=["reset", "closed"])


@GOOSES
def test_a_goose_cutting_its_stream_gets_backed_off_reconnects_then_the_run_ends(
    log_url: str, goose: type[FakeGoose]
) -> None:
    # Failures never reach max_failures here: the down clock alone must end the run.
    settings = PumpSettings(
        reconnect_delay=0.05,
        max_reconnect_delay=0.4,
        upstream_down_timeout=2.0,
        max_failures=1000,
        lease_ttl=3.0,
    )

    async def main() -> None:
        async with harness(log_url, goose=goose, settings=settings) as h:
            h.fake.script(h.session_id, Turn().hang())
            loop = asyncio.get_running_loop()
            started = loop.time()
            run = await h.runs.start(STREAM, "go")
            run = await h.finished(run, timeout=15.0)
            took = loop.time() - started
            connections = len(h.fake.events_calls)
            end = h.log.run_end(run.run_id)
            assert run.status is RunStatus.FAILED
            assert end is not None and end.type == "Error"
            assert "goose kept cutting its event stream" in end.data["error"]
            # Pauses of at least 0.025, 0.05, 0.1 s, then 0.2 s each, within the 2 s clock.
            assert 3 <= connections <= 15, connections
            assert took < 2.0 + 3.0, took

    asyncio.run(main())


@GOOSES
def test_connections_that_bring_nothing_count_toward_max_failures(
    log_url: str, goose: type[FakeGoose]
) -> None:
    settings = PumpSettings(
        reconnect_delay=0.02,
        max_reconnect_delay=0.1,
        upstream_down_timeout=60.0,
        max_failures=4,
        lease_ttl=3.0,
    )

    async def main() -> None:
        async with harness(log_url, goose=goose, settings=settings) as h:
            h.fake.script(h.session_id, Turn().hang())
            run = await h.finished(await h.runs.start(STREAM, "go"))
            end = h.log.run_end(run.run_id)
            assert end is not None and end.type == "Error"
            assert "4 connection(s) in a row" in end.data["error"]
            if goose is CuttingGoose:
                assert INCOMPLETE_BODY in end.data["error"]
            assert len(h.fake.events_calls) == 4
            assert h.fake.cancel_calls == []  # the run ended; goose keeps what it has

    asyncio.run(main())


class FlakyGoose(FakeGoose):
    """Serves the session's events, but cuts each connection mid-frame after one live event
    (or `LIVE_WAIT` seconds without one)."""

    # The fake's events route and its session's bus: serving the real events, then cutting
    # the stream mid-frame, has no public way in.
    async def _events(
        self, session_id: str, last_event_id: str | None, receive: Receive, send: Send
    ) -> None:
        self._session(session_id)
        self.events_calls.append(EventsCall(session_id, last_event_id))
        bus = self._bus(session_id)
        replay, subscription = bus.subscribe(parse_last_event_id(last_event_id))
        try:
            active = {"type": "ActiveRequests", "request_ids": bus.active_request_ids()}
            body = f"data: {json.dumps(active)}\n\n".encode()
            body += b"".join(event.frame for event in replay)
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            await send({"type": "http.response.body", "body": body, "more_body": True})
            with contextlib.suppress(TimeoutError):
                live = await asyncio.wait_for(subscription.next(), LIVE_WAIT)
                body = b"" if live is None else live.frame
            body += b'id: 999\ndata: {"type":"Mess'  # cut mid-frame
            await send({"type": "http.response.body", "body": body, "more_body": True})
            raise httpx.RemoteProtocolError(INCOMPLETE_BODY)
        finally:
            bus.unsubscribe(subscription)


def test_connections_that_bring_new_events_never_add_up_to_a_failure(log_url: str) -> None:
    settings = PumpSettings(
        reconnect_delay=0.02, max_reconnect_delay=0.1, max_failures=2, lease_ttl=3.0
    )

    async def main() -> None:
        async with harness(log_url, goose=FlakyGoose, settings=settings) as h:
            chunks = ["a", "b", "c", "d", "e"]
            turn = Turn()
            for chunk in chunks:
                turn = turn.delay(0.15).text(chunk)
            h.fake.script(h.session_id, turn)
            run = await h.finished(await h.runs.start(STREAM, "go"))
            assert run.status is RunStatus.FINISHED
            # More connections were cut than max_failures allows in a row
            assert len(h.fake.events_calls) > settings.max_failures
            assert types(h.events(run)).count("Message") == len(chunks)

    asyncio.run(main())


def test_stable_connection_must_be_a_positive_number() -> None:
    for value in (0, -1.0, True):
        with pytest.raises(ValueError, match="stable_connection"):
            PumpSettings(stable_connection=value)
