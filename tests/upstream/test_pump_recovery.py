"""The pump when goose restarts, drops a cursor or forgets a run."""

from __future__ import annotations

import asyncio
from collections import Counter

from gateway_kit import Event
from gateway_kit.runs.model import RunStatus
from gateway_kit.testing import Turn
from gateway_kit.upstream.goose.connection import LOST_RUN_ERROR
from gateway_kit.upstream.goose.translator import goose_id_at
from tests.support.upstream import STREAM, goose_ids, harness, types


def test_a_run_goose_no_longer_lists_is_ended_as_lost(log_url: str) -> None:
    """goose restarted mid-run: the run ends with an Error, and the next round goes to the new
    goose without an id of its previous lifetime."""

    async def main() -> None:
        async with harness(log_url) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("a", "b").pause(release).text("c"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: len(goose_ids(h.events(run))) == 2)
            h.fake.restart()
            run = await h.finished(run)
            assert run.status is RunStatus.FAILED
            last = h.events(run)[-1]
            assert last.type == "Error"
            assert last.data["error"] == LOST_RUN_ERROR.format(request_id=run.upstream_request_id)

            # the next round goes to the new goosed: no id of the old lifetime is sent to it
            calls_before = len(h.fake.events_calls)
            second = await h.finished(await h.runs.start(STREAM, "again"))
            assert second.status is RunStatus.FINISHED
            assert h.sent_headers()[calls_before:] == [None]
            assert goose_ids(h.events(second))[0] == 1  # goose counts from 1 again
            assert types(h.events(second)).count("Finish") == 1

    asyncio.run(main())


def test_goose_ids_going_backwards_start_a_new_lifetime(log_url: str) -> None:
    """goose restarted between rounds, with nothing running: its ids count from 1 again."""

    async def main() -> None:
        async with harness(log_url) as h:
            h.fake.script(h.session_id, Turn().text("one", "two", "three", "four"))
            first = await h.finished(await h.runs.start(STREAM, "round one"))
            await h.pumps.wait_idle()
            old_ids = goose_ids(h.events(first))
            h.fake.restart()  # nothing was running: no gateway can notice yet

            second = await h.finished(await h.runs.start(STREAM, "round two"))
            # The first connection could only offer the newest id it had (5); goose's new ids
            # came in below it, and every reconnection since went without a header.
            headers = h.sent_headers()
            assert headers[1] == str(old_ids[-1])
            assert all(hdr is None for hdr in headers[2:]) and len(headers) >= 3
            events = h.events(second)
            assert second.status is RunStatus.FINISHED
            assert goose_ids(events) == sorted(set(goose_ids(events)))
            assert goose_ids(events)[0] == 1
            counts = Counter(types(events))
            assert (counts["RunStarted"], counts["Finish"], counts["Error"]) == (1, 1, 0)
            # and the next round resumes from the new lifetime's ids only
            await h.pumps.wait_idle()
            calls = len(h.fake.events_calls)
            third = await h.finished(await h.runs.start(STREAM, "round three"))
            assert h.sent_headers()[calls] == str(goose_ids(events)[-1])
            assert third.status is RunStatus.FINISHED

    asyncio.run(main())


def test_a_cursor_too_far_behind_is_not_a_run_error_and_the_run_is_recovered(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url, replay_buffer_size=8) as h:
            release = asyncio.Event()
            chunks = [f"c{i} " for i in range(20)]
            h.fake.script(h.session_id, Turn().text("a", "b", "c").pause(release).text(*chunks))
            run = await h.runs.start(STREAM, "long answer")
            await h.until(lambda: len(goose_ids(h.events(run))) == 3)
            await h.pumps.stop()  # the gateway is down while goose goes on
            release.set()
            await h.fake.wait_idle()
            pumps = h.new_pumps()
            pumps.ensure(h.session_id)
            run = await h.finished(run)
            await pumps.wait_idle()
            events = h.events(run)
            assert h.sent_headers()[1:] == ["3", None]  # refused, then header-less
            assert run.status is RunStatus.FINISHED
            assert not any("too far behind" in str(e.data.get("error", "")) for e in events)
            recovered = [e for e in events if e.data.get("recovered")]
            assert len(recovered) == 1
            texts = [c["text"] for m in recovered[0].data["conversation"] for c in m["content"]]
            assert "".join(texts).endswith("c19 ")
            assert types(events).count("Finish") == 1
            assert goose_ids(events) == sorted(set(goose_ids(events)))

    asyncio.run(main())


def test_active_requests_frames_never_move_the_cursor(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            releases = [asyncio.Event(), asyncio.Event()]
            turn = Turn().text("x", "y").pause(releases[0]).text("z").pause(releases[1])
            h.fake.script(h.session_id, turn.text("w"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: len(goose_ids(h.events(run))) == 2)
            for seen, release in enumerate(releases, start=3):
                # Each takeover is greeted by an ActiveRequests frame; the event goose sends
                # next on that connection is written once the pump has read past the frame.
                await h.take_over()
                release.set()
                await h.until(lambda n=seen: len(goose_ids(h.events(run))) >= n)
            await h.finished(run)
            assert h.sent_headers()[1:] == ["2", "3"]
            assert "ActiveRequests" not in types(h.events())

    asyncio.run(main())


def test_a_phone_that_dropped_before_finish_gets_finish_once(log_url: str) -> None:
    """The phone kept only its gateway cursor; goose restarted and the gateway died meanwhile."""

    async def main() -> list[Event]:
        async with harness(log_url) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("a").pause(release).text("b"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: len(goose_ids(h.events(run))) == 1)
            phone_cursor = h.events(run)[-1].seq  # the phone saw this much, then locked
            await h.take_over()
            release.set()
            await h.finished(run)
            return h.log.read(after=phone_cursor, run_id=run.run_id)

    resumed = asyncio.run(main())
    assert [e.type for e in resumed] == ["Message", "UpstreamFinish", "Finish"]


def test_a_gateway_cursor_maps_to_the_goose_id_at_or_before_it(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            first = await h.finished(await h.runs.start(STREAM, "one"))
            events = h.events(first)
            binding = h.store.binding(STREAM)
            assert binding is not None
            started, message = events[0], events[1]
            assert await goose_id_at(h.log, binding, started.seq) is None  # nothing yet: omit
            assert await goose_id_at(h.log, binding, message.seq) == 1
            assert await goose_id_at(h.log, binding, events[-1].seq) == goose_ids(events)[-1]
            note = h.log.append(STREAM, "Note")  # a gateway-only event maps to the id before it
            assert await goose_id_at(h.log, binding, note.seq) == goose_ids(events)[-1]
            h.store.start_lifetime(h.session_id, note.seq)  # goose restarted: nothing maps
            assert await goose_id_at(h.log, binding.__class__(STREAM, h.session_id, note.seq),
                                     note.seq) is None  # fmt: skip

    asyncio.run(main())
