"""A revoked token or a logged-out cookie loses its open streams and its polls, in every
process, within the bound of the credentials' reads (`CUT_BOUND`, generous: reads come every
half second)."""

from __future__ import annotations

import asyncio
import time

import httpx

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.asgi_driver import Request
from tests.support.flask_site import BASE, log_in, strict_gateway
from tests.support.waiting import until

CUT_BOUND = 2.0
STREAM = "carol-work"
RUN = "carol-run"
JSON = {"accept": "application/json"}


def served(answer: Request) -> int:
    assert answer.status is not None
    return answer.status


async def status(gateway: object, path: str, headers: dict[str, str]) -> int:
    return served(await Request(gateway, path, headers={**JSON, **headers}).run())  # type: ignore[arg-type]


async def cut_within_bound(
    gateway: object, streams: list[Request], polls: list[str], headers: dict[str, str]
) -> tuple[float, float]:
    """Seconds from now until every stream ended, and until every poll is a 401."""
    started = time.monotonic()
    for stream in streams:
        await stream.finished(CUT_BOUND)
    streams_cut = time.monotonic() - started

    async def refused() -> bool:
        return all([await status(gateway, p, headers) == 401 for p in polls])

    await until(refused, CUT_BOUND, interval=0.01)
    return streams_cut, time.monotonic() - started


def test_a_token_revoked_by_another_process_ends_its_streams_and_polls(log_url: str) -> None:
    log = EventLog(log_url)
    log.append(STREAM, "Message", {"text": "before"}, run_id=RUN)
    StreamOwners(log).declare(STREAM, "carol")
    cli = EventLog(log_url)  # what `gateway-kit tokens` opens, in its own process
    record, token = ApiTokens(cli).create("carol")
    gateway = strict_gateway(log)
    bearer = {"authorization": f"Bearer {token}"}
    polls = [f"/gateway/streams/{STREAM}/events", f"/api/tasks/{RUN}"]

    async def main() -> tuple[float, float]:
        streams = [
            Request(gateway, f"/gateway/streams/{STREAM}/events", headers=bearer).start(),
            Request(gateway, f"/gateway/runs/{RUN}/events", headers=bearer).start(),
        ]
        for stream in streams:
            await stream.wait_events(1)
        assert [await status(gateway, p, bearer) for p in polls] == [200, 200]
        await asyncio.to_thread(ApiTokens(cli).revoke, record.token_id)
        times = await cut_within_bound(gateway, streams, polls, bearer)
        await log.aappend(STREAM, "Message", {"text": "after"}, run_id=RUN)
        for stream in streams:
            assert [e["data"]["text"] for e in stream.events] == ["before"]
            assert stream.status == 200 and stream.complete  # ended cleanly
        return times

    try:
        streams_cut, polls_cut = asyncio.run(main())
        print(
            f"token revoked elsewhere: streams cut in {streams_cut:.3f} s, polls {polls_cut:.3f} s"
        )
    finally:
        cli.close()
        log.close()


def test_a_logout_through_one_process_ends_the_cookies_streams_in_another(log_url: str) -> None:
    first, second = EventLog(log_url), EventLog(log_url)
    first.append("alice-notes", "Message", {"text": "before"}, run_id="alice-run")
    StreamOwners(first).declare("alice-notes", "alice")
    app_side, reader_side = strict_gateway(first), strict_gateway(second)
    polls = ["/gateway/streams/alice-notes/events", "/api/tasks/alice-run"]

    async def main() -> tuple[float, float]:
        transport = httpx.ASGITransport(app=app_side, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as browser:
            await log_in(browser, "alice")
            cookie = {"cookie": f"session={browser.cookies['session']}"}
            streams = [
                Request(reader_side, "/gateway/streams/alice-notes/events", headers=cookie),
                Request(reader_side, "/gateway/runs/alice-run/events", headers=cookie),
            ]
            for stream in streams:
                await stream.start().wait_events(1)
            assert [await status(reader_side, p, cookie) for p in polls] == [200, 200]
            assert (await browser.post("/logout")).status_code == 200
            times = await cut_within_bound(reader_side, streams, polls, cookie)
        await first.aappend("alice-notes", "Message", {"text": "after"}, run_id="alice-run")
        for stream in streams:
            assert [e["data"]["text"] for e in stream.events] == ["before"]
        return times

    try:
        streams_cut, polls_cut = asyncio.run(main())
        print(f"logout elsewhere: streams cut in {streams_cut:.3f} s, polls {polls_cut:.3f} s")
    finally:
        first.close()
        second.close()
