"""The session pump and the cursor translator, against the fake goose: which goose id the pump
sends, and where a takeover or a new round resumes."""

from __future__ import annotations

import asyncio
from collections import Counter

from gateway_kit.runs.model import RunStatus
from gateway_kit.testing import Turn
from tests.support.upstream import STREAM, goose_ids, harness, types


def test_a_run_lands_in_the_log_with_goose_ids_and_ends(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            h.fake.script(h.session_id, Turn().text("Hel", "lo").usage(3, 2))
            run = await h.runs.start(STREAM, "say hello")
            run = await h.finished(run)
            await h.pumps.wait_idle()  # the pump stops once nothing is left to pump
            events = h.events(run)
            assert run.status is RunStatus.FINISHED
            assert types(events) == [
                "RunStarted", "Message", "Message", "MessageUsage", "UpstreamFinish", "Finish"
            ]  # fmt: skip
            assert goose_ids(events) == [1, 2, 3, 4]  # the run's own Finish is not goose's
            goose_events = events[1:-1]
            assert all(e.data["chat_request_id"] == run.upstream_request_id for e in goose_events)
            assert h.fake.reply_calls[0].request_id == run.upstream_request_id
            assert run.upstream_request_id != run.run_id  # each attempt has its own request id

    asyncio.run(main())


def test_a_gateway_seq_is_never_sent_to_goose(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            for i in range(40):  # seqs run far ahead of goose's ids
                h.log.append("elsewhere", "Note", {"i": i})
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("a", "b").pause(release).text("c"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: len(goose_ids(h.events(run))) == 2)
            pumps = await h.take_over()  # the process dies mid-run, another takes over
            release.set()
            await h.finished(run)
            await pumps.stop()
            persisted = {e.upstream_event_id for e in h.events()}
            assert h.sent_headers()[-1] == "2"
            assert {hdr for hdr in h.sent_headers() if hdr is not None} <= persisted
            assert Counter(types(h.events(run)))["Finish"] == 1

    asyncio.run(main())


def test_a_takeover_resumes_from_the_newest_persisted_goose_id(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("one", "two", "three").pause(release).text("4"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: len(goose_ids(h.events(run))) == 3)
            pumps = await h.take_over()
            release.set()
            await h.finished(run)
            await pumps.stop()
            assert h.sent_headers() == [None, "3"]
            assert goose_ids(h.events(run)) == [1, 2, 3, 4, 5]  # nothing twice, nothing lost

    asyncio.run(main())


def test_without_a_mappable_id_the_header_is_omitted_and_replay_is_not_doubled(
    log_url: str,
) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            h.runs.pumps.ensure = lambda session_id: None  # type: ignore[method-assign]
            run = await h.runs.start(STREAM, "hello there")  # goose works; nobody pumps yet
            await h.fake.wait_idle()
            assert goose_ids(h.events(run)) == []
            pumps = h.new_pumps()
            pumps.ensure(h.session_id)
            run = await h.finished(run)
            await pumps.stop()
            assert h.sent_headers() == [None]
            assert types(h.events(run))[-1] == "Finish"
            ids = goose_ids(h.events(run))
            assert ids == sorted(set(ids)) and ids[0] == 1

    asyncio.run(main())


def test_goose_is_not_contacted_when_the_log_ends_the_latest_run(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            run = await h.runs.start(STREAM, "hi")
            await h.finished(run)
            await h.pumps.wait_idle()
            calls = len(h.fake.events_calls)
            pumps = h.new_pumps()
            pumps.ensure(h.session_id)
            await pumps.wait_idle()
            assert len(h.fake.events_calls) == calls

    asyncio.run(main())


def test_a_new_round_resumes_after_the_previous_rounds_finish(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            first = await h.finished(await h.runs.start(STREAM, "round one"))
            await h.pumps.wait_idle()
            last_id = goose_ids(h.events(first))[-1]
            second = await h.finished(await h.runs.start(STREAM, "round two"))
            await h.pumps.wait_idle()
            assert h.sent_headers() == [None, str(last_id)]
            assert second.status is RunStatus.FINISHED
            assert types(h.events(second)).count("Finish") == 1
            assert goose_ids(h.events(second))[0] == last_id + 1
            assert goose_ids(h.events()) == sorted(set(goose_ids(h.events())))

    asyncio.run(main())


def test_events_that_arrive_together_are_written_together(sqlite_url: str) -> None:
    """A burst goose sends at once (its replay of a finished turn) costs a few commits, not one
    per event; every event is still written once, in goose's order."""

    async def main() -> None:
        async with harness(sqlite_url, replay_buffer_size=2000) as h:
            commits: list[int] = []
            remove = h.log.add_commit_listener(lambda token, events: commits.append(len(events)))
            h.runs.pumps.ensure = lambda session_id: None  # type: ignore[method-assign]
            chunks = [f"word{i} " for i in range(600)]
            h.fake.script(h.session_id, Turn().text(*chunks))
            run = await h.runs.start(STREAM, "go")
            await h.fake.wait_idle()  # goose has the whole turn buffered
            commits.clear()
            pumps = h.new_pumps()
            pumps.ensure(h.session_id)
            await h.finished(run)
            await pumps.stop()
            remove()
            events = h.events(run)
            assert goose_ids(events) == list(range(1, 602))  # 600 chunks and goose's Finish
            text = "".join(e.data["message"]["content"][0]["text"] for e in events
                           if e.type == "Message")  # fmt: skip
            assert text == "".join(chunks)
            assert len(commits) < 20, commits  # the 600 messages in a handful of commits
            assert max(commits) > 100

    asyncio.run(main())
