"""Fan-out and stopping: every subscriber gets each event once, slow clients cut off, streams
closed on shutdown."""

from __future__ import annotations

import asyncio

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings, StreamSettings
from tests.support.asgi_driver import Request, hang_up_all, wait_all
from tests.support.waiting import until

from .conftest import MakeGateway

PATH = "/gateway/streams/conv/events"


def test_many_subscribers_each_get_every_event_once_in_order(
    log: EventLog, gateway: Gateway
) -> None:
    """(How few reads one live reader makes for them all: bench/fanout_reads.py.)"""

    async def main() -> None:
        requests = [Request(gateway, PATH).start() for _ in range(100)]
        log.append("conv", "Message", {"n": 0})
        await wait_all(requests, 1)
        for n in range(1, 4):
            await log.aappend("conv", "Message", {"n": n})
            await wait_all(requests, n + 1)
        await hang_up_all(requests)
        assert all([e["seq"] for e in r.events] == [1, 2, 3, 4] for r in requests)

    asyncio.run(main())


def test_appends_of_this_process_reach_subscribers_one_by_one(sqlite_url: str) -> None:
    """On SQLite a commit is readable at once, so the fan-out takes it from the commit (that it
    then reads nothing for it: bench/fanout_reads.py); each append reaches every subscriber
    before the next is written, once and in order."""
    with EventLog(sqlite_url) as log:
        gateway = Gateway(None, log=log, allow_anonymous=True)

        async def main() -> None:
            requests = [Request(gateway, PATH).start() for _ in range(3)]
            for n in range(41):
                await log.aappend("conv", "Message", {"n": n})
                await wait_all(requests, n + 1)
            await hang_up_all(requests)
            assert all([e["data"]["n"] for e in r.events] == list(range(41)) for r in requests)

        asyncio.run(main())


def test_commits_handed_off_and_commits_read_from_the_log_interleave_exactly_once(
    log: EventLog, gateway: Gateway
) -> None:
    """Appends of this process race appends that only a read can find (another process's)."""
    per_writer = 150

    async def main(other: EventLog) -> None:
        requests = [Request(gateway, PATH).start() for _ in range(2)]
        log.append("conv", "Start")
        await wait_all(requests, 1)

        def write(source: EventLog, name: str) -> None:
            for i in range(per_writer):
                source.append("conv", name, {"i": i})

        await asyncio.gather(
            asyncio.to_thread(write, log, "Here"),
            asyncio.to_thread(write, other, "Elsewhere"),
        )
        await wait_all(requests, 1 + 2 * per_writer)
        await hang_up_all(requests)
        everything = [e.seq for e in log.read(0, "conv", limit=1000)]
        assert len(everything) == 1 + 2 * per_writer
        for r in requests:
            assert [e["seq"] for e in r.events] == everything

    with EventLog(log.url) as other:  # its commits are not handed to this process's fan-out
        asyncio.run(main(other))


def test_subscribers_that_join_while_commits_are_handed_off_miss_nothing(
    log: EventLog, gateway: Gateway
) -> None:
    """Each newcomer replays what the fan-out has handed out, then takes the rest live."""
    total, every, starters = 300, 15, 10

    async def main() -> None:
        loop = asyncio.get_running_loop()
        requests: list[Request] = []

        def join() -> None:
            requests.append(Request(gateway, PATH).start())

        def write() -> None:
            for i in range(total):
                log.append("conv", "Message", {"i": i})
                if i % every == every - 1:  # a newcomer while the appends go on
                    loop.call_soon_threadsafe(join)

        writer = asyncio.ensure_future(asyncio.to_thread(write))
        for _ in range(starters):  # the first ones arrive while the live reader starts
            join()
            await asyncio.sleep(0.001)
        await writer
        await until(lambda: len(requests) == starters + total // every)  # the last join() ran
        await wait_all(requests, total)
        await hang_up_all(requests)
        everything = [e.seq for e in log.read(0, "conv", limit=1000)]
        assert len(everything) == total
        for r in requests:
            assert [e["seq"] for e in r.events] == everything

    asyncio.run(main())


def test_a_client_that_stops_reading_is_cut_off_and_the_others_carry_on(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(
        settings=GatewaySettings(
            streams=StreamSettings(queue_size=4), http=HttpSettings(send_timeout=60)
        )
    )

    async def main() -> None:
        healthy = Request(gateway, PATH).start()
        stuck = Request(gateway, PATH, send_blocked=True).start()
        await stuck.wait_for(lambda r: r.status == 200)
        await healthy.wait_for(lambda r: r.status == 200)
        # The stuck client is still writing its first chunk when these arrive.
        await log.aappend("conv", "Message", {"n": 0})
        for n in range(1, 20):
            await log.aappend("conv", "Message", {"n": n})
        await healthy.wait_events(20)
        await stuck.finished()  # cut off without waiting for its 60 s send timeout
        assert not stuck.complete
        healthy.disconnect()
        await healthy.finished()
        assert [e["seq"] for e in healthy.events] == list(range(1, 21))

    asyncio.run(main())


def test_a_write_that_times_out_ends_the_stream(log: EventLog, make_gateway: MakeGateway) -> None:
    gateway = make_gateway(
        settings=GatewaySettings(
            streams=StreamSettings(ping_interval=0.01), http=HttpSettings(send_timeout=0.05)
        )
    )

    async def main() -> None:
        stuck = Request(gateway, PATH, send_blocked=True).start()
        await stuck.finished()  # a ping could not be written in time
        assert stuck.status == 200 and not stuck.body

    asyncio.run(main())


def test_a_data_write_that_times_out_ends_the_stream_between_pings(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(
        settings=GatewaySettings(
            streams=StreamSettings(ping_interval=60), http=HttpSettings(send_timeout=0.2)
        )
    )
    log.append("conv", "Message", {"n": 0})

    async def main() -> None:
        stuck = Request(gateway, PATH, send_blocked=True).start()
        # The replay's write never completes; no ping is due for a minute.
        await asyncio.wait_for(stuck.finished(), timeout=10)
        assert stuck.status == 200 and not stuck.complete

    asyncio.run(main())


def test_close_streams_ends_open_streams_and_refuses_new_ones(
    log: EventLog, gateway: Gateway
) -> None:
    log.append("conv", "Message", {})

    async def main() -> None:
        requests = [Request(gateway, PATH).start() for _ in range(3)]
        await wait_all(requests, 1)
        gateway.close_streams()
        await asyncio.gather(*(r.finished() for r in requests))
        assert all(r.complete for r in requests)  # a clean end: the client reconnects
        late = await Request(gateway, PATH).run()
        assert late.status == 503
        assert late.json()["error"] == "shutting_down"

    asyncio.run(main())


def test_close_streams_works_from_another_thread(log: EventLog, gateway: Gateway) -> None:
    async def main() -> None:
        request = Request(gateway, PATH).start()
        await request.wait_for(lambda r: r.status == 200)
        await asyncio.to_thread(gateway.close_streams)
        await request.finished()
        assert request.complete

    asyncio.run(main())
