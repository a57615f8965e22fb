"""`OwnedRunSweeper` ends the owned runs whose process died, and every gateway runs one: at
start-up, periodically, and also when it is served without a lifespan."""

from __future__ import annotations

import asyncio
import time

import httpx
from flask import Flask

from gateway_kit import (
    AppRunSettings,
    EventLog,
    Gateway,
    GatewaySettings,
    OwnedRunSweeper,
    SweepOwnedRuns,
    owned_run,
)
from gateway_kit.app_runs.sweeper import OWNER_STOPPED_ERROR
from gateway_kit.coordination.leases import Lease
from gateway_kit.types import Message, Receive, Scope, Send
from tests.support.owned_runs import STREAM, dead_owner, lease_count, lease_of, types
from tests.support.waiting import answered_while_another_writes, until

QUICK = 0.05  # seconds between sweeps
LIFESPAN: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}}


def test_a_sweeper_ends_a_dead_owners_run_with_an_error_saying_so(log: EventLog) -> None:
    dead_owner(log, "r-1")
    expired_at = lease_of(log, "r-1").expires_at
    [event] = OwnedRunSweeper(log).sweep()
    assert log.run_end("r-1") == event
    assert (event.stream, event.type) == (STREAM, "Error")
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(expired_at))
    assert event.data == {"error": OWNER_STOPPED_ERROR.format(expired_at=iso)}
    assert lease_count(log) == 0
    assert OwnedRunSweeper(log).sweep() == []


def test_a_sweeper_leaves_live_leases_and_other_leases_alone(log: EventLog) -> None:
    with owned_run(log, stream=STREAM, run_id="live") as run:
        assert Lease(log, "pump:session-1", "a process now gone", ttl=-1.0).acquire()
        assert OwnedRunSweeper(log).sweep() == []
        run.append("Message", {"text": "still ours"})
    assert types(log, "live") == ["Message", "Finish"]
    assert lease_count(log) == 1  # the pump's lease is the pumps' business


def test_a_sweeper_clears_the_lease_of_a_run_that_had_ended(log: EventLog) -> None:
    dead_owner(log, "r-1")
    log.append(STREAM, "Finish", {}, run_id="r-1")  # written around the owned run
    assert OwnedRunSweeper(log).sweep() == []
    assert types(log, "r-1") == ["Message", "Finish"]
    assert lease_count(log) == 0


def test_a_sweep_that_finds_nothing_does_not_wait_for_a_writer(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    try:
        log.append(STREAM, "Message", {})  # the tables exist
        sweep = OwnedRunSweeper(log).sweep
        assert answered_while_another_writes(sqlite_url, sweep) == []
    finally:
        log.close()


# --- in a gateway -----------------------------------------------------------------------------


def test_a_gateway_without_an_upstream_sweeps_at_start_up_and_then_periodically(
    log: EventLog,
) -> None:
    dead_owner(log, "before-start")
    gateway = Gateway(
        log=log,
        settings=GatewaySettings(app_runs=AppRunSettings(sweep_interval=QUICK)),
        allow_anonymous=True,
    )

    async def main() -> list[str]:
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        sent: list[str] = []

        async def send(message: Message) -> None:
            sent.append(message["type"])

        served = asyncio.create_task(gateway(LIFESPAN, inbox.get, send))
        await inbox.put({"type": "lifespan.startup"})
        await until(lambda: log.run_end("before-start") is not None)
        dead_owner(log, "after-start")
        await until(lambda: log.run_end("after-start") is not None)
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(served, 10)
        return sent

    assert asyncio.run(main()) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    for run_id in ("before-start", "after-start"):
        assert types(log, run_id) == ["Message", "Error"]


def test_a_gateway_served_without_a_lifespan_sweeps_from_its_first_request(
    log: EventLog,
) -> None:
    flask_app = Flask("legacy")
    flask_app.add_url_rule("/hello", "hello", lambda: {"from": "flask"})
    gateway = Gateway(
        flask_app,
        log=log,
        settings=GatewaySettings(app_runs=AppRunSettings(sweep_interval=QUICK)),
        allow_anonymous=True,
    )
    dead_owner(log, "r-1")

    async def main() -> None:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.get("/hello")).json() == {"from": "flask"}
            await until(lambda: log.run_end("r-1") is not None)

    asyncio.run(main())
    assert types(log, "r-1") == ["Message", "Error"]


def test_the_sweeping_part_alone_passes_every_request_through(log: EventLog) -> None:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    part = SweepOwnedRuns(app, log=log, interval=QUICK)
    dead_owner(log, "r-1")

    async def main() -> None:
        transport = httpx.ASGITransport(app=part)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.get("/anything")).status_code == 204
            await until(lambda: log.run_end("r-1") is not None)
        await part.sweeper.stop()

    asyncio.run(main())
