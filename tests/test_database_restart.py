"""The gateway heals by itself when PostgreSQL restarts under it.

A throwaway PostgreSQL server, a gateway served by uvicorn on it, a fake goose with a run in
flight, a live SSE client and a live Socket.IO client of the run's stream, and another log on
the same database standing for another process that appends to that stream. The server is
killed (SIGKILL, as a crash) and started again a few seconds later on the same port and data:

- during the outage a request that needs the database is a 503 with ``Retry-After`` and the
  JSON error ``database_unavailable``;
- after it, within `HEAL_BOUND` seconds of the server accepting connections and with nothing
  restarted by hand: a write through the gateway (a run start) succeeds, another process's
  appends reach the SSE client at a notification's latency (LISTEN listens again), a new
  Socket.IO client connects and subscribes, and the run in flight ends with its `Finish`;
- no client misses or repeats an event: the seqs each saw are the stream's seqs in the log,
  and goose's events of the run are each in the log once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import socketio

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.exceptions import DatabaseUnavailable
from gateway_kit.http.errors import DATABASE_UNAVAILABLE
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.upstream.goose.pump import PumpSettings
from tests.support.postgres import PgServer
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import Client

STREAM = "conv"
OUTAGE_SECONDS = 3.0  # how long the server stays down: the scenario, not a wait for a state
HEAL_BOUND = 15.0  # seconds after the server accepts connections again
# Seconds between tries for a socket ticket: well within the default rate (20 per 10 s).
TICKET_SPACING = 0.6
# A notification's latency, far below the idle re-check below: only LISTEN delivers this fast.
NOTIFIED_WITHIN = 1.0
IDLE_RECHECK = 30.0
LATENCY_SAMPLES = 5
WAIT = 20.0
PUMP = PumpSettings(reconnect_delay=0.1, max_reconnect_delay=1.0)


class Gate(asyncio.Event):
    """An `asyncio.Event` the test's thread sets, for a fake goose serving in a loop of its own."""

    def __init__(self) -> None:
        super().__init__()
        self._flag = threading.Event()

    def set(self) -> None:
        self._flag.set()

    def is_set(self) -> bool:
        return self._flag.is_set()

    async def wait(self) -> bool:
        while not self._flag.is_set():
            await asyncio.sleep(0.01)
        return True


class SseClient:
    """An `EventSource`: follows the stream, and reconnects with ``Last-Event-ID`` whenever its
    response ends or fails (a 503 included), as a browser does."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.events: list[dict[str, Any]] = []
        self.arrived: dict[int, float] = {}  # seq: when it arrived
        self.reconnects = 0
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        async with httpx.AsyncClient(base_url=self.base, timeout=None) as http:
            while True:
                headers = {"accept": "text/event-stream"}
                if self.events:
                    headers["last-event-id"] = str(self.events[-1]["seq"])
                try:
                    async with http.stream(
                        "GET", f"/gateway/streams/{STREAM}/events", headers=headers
                    ) as response:
                        if response.status_code == 200:
                            async for line in response.aiter_lines():
                                if line.startswith("data: "):
                                    envelope = json.loads(line[6:])
                                    self.events.append(envelope)
                                    self.arrived[envelope["seq"]] = time.monotonic()
                except httpx.TransportError:
                    pass
                self.reconnects += 1
                await asyncio.sleep(0.1)

    def seqs(self) -> list[int]:
        return [e["seq"] for e in self.events]

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def healed(what: Callable[[], Awaitable[bool]], since: float, server: PgServer) -> float:
    """Seconds from `since` until `what()` first holds; fails past `HEAL_BOUND`."""
    while not await what():
        if time.monotonic() - since > HEAL_BOUND:
            running = await asyncio.to_thread(server.running)
            tail = server.output()[-3000:]
            raise AssertionError(
                f"{what.__name__}: not healed in time; server up: {running}\n{tail}"
            )
        await asyncio.sleep(0.05)
    return time.monotonic() - since


def assert_unavailable(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) > 0
    body = answer.json()
    assert body["error"] == DATABASE_UNAVAILABLE and isinstance(body["message"], str), body


def test_the_gateway_heals_after_postgresql_restarts(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    fake = FakeGoose(ping_interval=0.05)
    session = fake.create_session()
    outage, back = Gate(), Gate()
    run_turn = Turn().text("before").pause(outage).text("during").pause(back).text("after")
    fake.script(session, run_turn)
    log = EventLog(throwaway_pg_url, idle_recheck=IDLE_RECHECK)
    other = EventLog(throwaway_pg_url)  # another process's log on the same database
    figures: dict[str, float] = {}
    try:
        with serve_in_thread(fake, lifespan="off") as goose_url:
            upstream = GooseUpstream(base_url=goose_url, secret_key=fake.secret_key)
            gateway = Gateway(
                log=log,
                upstream=upstream,
                allow_anonymous=True,
                settings=GatewaySettings(pumps=PUMP),
            )
            assert gateway.pumps is not None
            gateway.pumps.store.bind(STREAM, session)
            with serve_in_thread(gateway) as base:
                asyncio.run(scenario(base, throwaway_pg, log, other, outage, back, figures))
        events = log.read(stream=STREAM, settled=False)
    finally:
        outage.set()
        back.set()
        other.close()
        log.close()
    texts = [e.data["message"]["content"][0]["text"] for e in events if e.type == "Message"]
    assert texts == ["before", "during", "after"]
    goose_ids = [e.upstream_event_id for e in events if e.upstream_event_id is not None]
    assert len(goose_ids) == len(set(goose_ids)), "a goose event was appended twice"
    assert [e.type for e in events].count("Finish") == 1
    print("time to heal, seconds after the database accepts connections:", figures)


async def scenario(
    base: str,
    server: PgServer,
    log: EventLog,
    other: EventLog,
    outage: Gate,
    back: Gate,
    figures: dict[str, float],
) -> None:
    http = httpx.AsyncClient(base_url=base, timeout=WAIT)
    sse = SseClient(base)
    live = Client(base, {})  # a Socket.IO client connected through the outage
    late = Client(base, {})  # one that connects after it
    try:
        started = await http.post(f"/gateway/streams/{STREAM}/runs", json={"message": "go"})
        assert started.status_code == 200, started.text
        run_id = started.json()["run_id"]
        sse.start()
        await live.connect()
        assert await live.subscribe(STREAM) == {"ok": True}
        await until_seen(lambda: texts_of(sse.events), "before")
        await until_seen(lambda: texts_of(live.events), "before")

        server.kill()
        outage.set()  # goose goes on: its events wait in goose's buffer for the pump
        for answer in (
            await http.post("/gateway/streams/other/runs", json={"message": "hi"}),
            await http.get(
                f"/gateway/streams/{STREAM}/events", headers={"accept": "application/json"}
            ),
            await http.post("/gateway/socket-tickets"),
            await http.get(f"/gateway/runs/{run_id}"),
            await http.get(f"/gateway/streams/{STREAM}/presence"),
        ):
            assert_unavailable(answer)
        await asyncio.sleep(OUTAGE_SECONDS)

        await asyncio.to_thread(server.start)
        up = time.monotonic()
        back.set()  # the run goes on in goose

        async def writes() -> bool:
            answer = await http.post("/gateway/socket-tickets")
            return answer.status_code == 200

        async def delivered_by_notification() -> bool:
            try:
                event = await other.aappend(STREAM, "Note", {"from": "another process"})
            except DatabaseUnavailable:  # its log tried to connect while the server started
                return False
            sent = time.monotonic()
            while time.monotonic() - sent < NOTIFIED_WITHIN:
                if event.seq in sse.arrived:
                    return True
                await asyncio.sleep(0.01)
            return False

        ticket_asked = [0.0]

        async def socket_connects() -> bool:
            if not late.sio.connected:  # a refused subscribe leaves it connected: ask again
                # Tickets are rate-limited per credential: one try per TICKET_SPACING seconds.
                if time.monotonic() - ticket_asked[0] < TICKET_SPACING:
                    return False
                ticket_asked[0] = time.monotonic()
                # The ticket first: asked inside connect, a refusal would leave the client
                # waiting.
                answer = await http.post("/gateway/socket-tickets")
                if answer.status_code != 200:
                    return False
                try:
                    await late.connect(auth={"ticket": answer.json()["ticket"]})
                except socketio.exceptions.ConnectionError:
                    return False
            return bool(await late.subscribe(STREAM) == {"ok": True})

        async def run_ended() -> bool:
            answer = await http.get(f"/gateway/runs/{run_id}")
            return answer.status_code == 200 and answer.json()["status"] != "active"

        checks = {
            "writes": writes,
            "delivery": delivered_by_notification,
            "socketio": socket_connects,
            "run": run_ended,
        }
        times = await asyncio.gather(*(healed(check, up, server) for check in checks.values()))
        figures.update(zip(checks, times, strict=True))
        latencies = []
        for _ in range(LATENCY_SAMPLES):
            notified = await other.aappend(STREAM, "Note", {"from": "another process"})
            sent = time.monotonic()
            await until(lambda n=notified: n.seq in sse.arrived, "a note")
            latencies.append(sse.arrived[notified.seq] - sent)
        figures["delivery latency, median"] = sorted(latencies)[len(latencies) // 2]
        figures["delivery latency, max"] = max(latencies)
        status = (await http.get(f"/gateway/runs/{run_id}")).json()["status"]
        assert status == "finished", status

        second = await http.post("/gateway/streams/later/runs", json={"message": "again"})
        assert second.status_code == 200, second.text

        expected = [e.seq for e in await log.aread(stream=STREAM, settled=False)]
        for name, seqs in (
            ("sse", sse.seqs),
            ("socket.io, connected through", lambda: live.seqs(STREAM)),
            ("socket.io, connected after", lambda: late.seqs(STREAM)),
        ):
            await until(lambda s=seqs: s() == expected or len(s()) > len(expected), name)
            assert seqs() == expected, (name, seqs(), expected)
            figures[f"events seen: {name}"] = len(seqs())
        figures["sse reconnects"] = sse.reconnects
    finally:
        await sse.stop()
        for client in (live, late):
            await client.sio.disconnect()
        await http.aclose()


def texts_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["data"]["message"]["content"][0]["text"] for e in events if e["type"] == "Message"]


async def until(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"not in {WAIT:g} s: {what}"
        await asyncio.sleep(0.02)


async def until_seen(texts: Callable[[], list[str]], text: str) -> None:
    await until(lambda: text in texts(), f"{text!r} received")
