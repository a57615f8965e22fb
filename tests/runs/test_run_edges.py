"""What must still hold around the lifecycle: the translator and the 204 stop after follow-ups
and retries, oversized goose events, a pump that keeps failing, and slow or broken plugins (a
guard that fails: `test_guard_failures.py`)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any

import psycopg
import pytest

from gateway_kit import Event, EventLog, GatewaySettings, GuardVeto, RecoveryPlan, hookimpl
from gateway_kit.log.postgres import conninfo
from gateway_kit.runs.billing import BillingSettings
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.runs.store import RunStore
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.upstream.appends import FrameAppender
from gateway_kit.upstream.frames import UpstreamFrame
from gateway_kit.upstream.goose.pump import PumpSettings
from gateway_kit.upstream.goose.translator import is_duplicate
from tests.runs.plugins import Ledger, Recoveries, VetoOnce
from tests.support.postgres import PG_URL
from tests.support.runs import (
    bound_session,
    gateway_client,
    run_types,
    sse_events,
    start_run,
    terminal_count,
    wait_status,
)
from tests.support.upstream import FAST, STREAM, harness, until

MIB = 1024 * 1024


def goose_ids(events: list[Event]) -> list[int]:
    return [int(e.upstream_event_id) for e in events if e.upstream_event_id is not None]


def test_after_a_follow_up_takeover_resumes_from_goose_ids_and_the_run_ends_once(
    log_url: str,
) -> None:
    async def main() -> None:
        async with harness(log_url, plugins=[VetoOnce()]) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("a"), Turn().text("b").pause(release).text("c"))
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: run_types(h.events(run)).count("Message") == 2)
            newest = max(goose_ids(h.events(run)))
            pumps = await h.take_over()  # the process dies during the follow-up
            release.set()
            await h.finished(run)
            await pumps.stop()
            persisted = {e.upstream_event_id for e in h.events()}
            headers = h.sent_headers()
            # The header is always a goose id this session gave: never a gateway seq.
            assert {hdr for hdr in headers if hdr is not None} <= persisted
            assert headers[-1] == str(newest)
            ids = goose_ids(h.events(run))
            assert ids == list(range(1, len(ids) + 1))  # nothing twice, nothing lost
            assert terminal_count(run_types(h.events(run))) == 1

    asyncio.run(main())


def test_after_a_clean_session_retry_the_new_session_never_gets_an_old_id(log_url: str) -> None:
    planner = Recoveries([RecoveryPlan("fresh", clean_session=True)])

    async def main() -> None:
        async with harness(log_url, plugins=[planner]) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("x", "y", "z").error("image_url refused"))
            h.fake.default_turn = lambda message: Turn().text("ok").pause(release).text("!")
            run = await h.runs.start(STREAM, "go")
            await h.until(lambda: "RecoveryStarted" in run_types(h.events(run)))
            new_session = h.store.binding(STREAM).session_id  # type: ignore[union-attr]
            assert new_session != h.session_id
            await h.until(lambda: run_types(h.events(run)).count("Message") == 4)
            h.session_id = new_session
            pumps = await h.take_over()
            release.set()
            await h.finished(run)
            await pumps.stop()
            new_calls = [c for c in h.fake.events_calls if c.session_id == new_session]
            new_ids = {
                e.upstream_event_id
                for e in h.events(run)
                if e.upstream_event_id and e.data.get("chat_request_id") == run_request(h, run)
            }
            # Only ids the new session gave are ever sent to it (the old one's reached 4 or 5).
            assert {c.last_event_id for c in new_calls} - {None} <= new_ids
            assert new_calls[-1].last_event_id == "1"
            assert terminal_count(run_types(h.events(run))) == 1

    asyncio.run(main())


def test_a_clean_session_retry_while_other_transactions_run_sends_the_new_session_no_old_id(
    pg_url: str,
) -> None:
    """On PostgreSQL the settled head lags while an older transaction runs anywhere on the
    server; the new session's lifetime still begins after every event of the old one."""
    planner = Recoveries([RecoveryPlan("fresh", clean_session=True)])

    async def main() -> None:
        async with harness(pg_url, plugins=[planner]) as h:
            h.fake.script(h.session_id, Turn().text("x", "y", "z").error("image_url refused"))
            h.fake.default_turn = lambda message: Turn().text("ok")
            with psycopg.connect(conninfo(PG_URL), autocommit=False) as other:
                other.execute("SELECT pg_current_xact_id()")  # a transaction with an id, open

                def committed() -> list[Event]:
                    return h.log.read(run_id=run.run_id, settled=False)

                run = await h.runs.start(STREAM, "go")
                await h.until(lambda: "RecoveryStarted" in run_types(committed()))
                binding = h.store.binding(STREAM)
                assert binding is not None and binding.session_id != h.session_id
                await h.until(
                    lambda: any(c.session_id == binding.session_id for c in h.fake.events_calls)
                )
                events = committed()
                other.rollback()
            await h.finished(run)
            new_calls = [c for c in h.fake.events_calls if c.session_id == binding.session_id]
            texts = [e.data["message"]["content"][0]["text"] for e in h.events(run)
                     if e.type == "Message"]  # fmt: skip

        retry = next(e.seq for e in events if e.type == "RecoveryStarted")
        old = [e.seq for e in events if e.upstream_event_id is not None and e.seq < retry]
        assert binding.lifetime_start_seq >= max(old)
        assert new_calls[0].last_event_id is None  # nothing of the old session's ids
        assert texts[-1] == "ok"

    asyncio.run(main())


def run_request(h: Any, run: Any) -> str:
    current = h.store.get(run.run_id)
    return str(current.upstream_request_id)


def test_the_204_stop_and_cursors_hold_after_a_follow_up_and_after_a_retry(log_url: str) -> None:
    planner = Recoveries([RecoveryPlan("again")])

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        plugins = [VetoOnce(), planner]
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, log):
            bound_session(
                fake,
                gateway,
                Turn().text("first"),  # vetoed once
                Turn().text("second").error("image_url refused"),  # the follow-up fails
                Turn().text("third"),  # the retry
            )
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            events = log.read(run_id=run_id)
            url = f"/gateway/runs/{run_id}/events"
            end = events[-1]
            assert end.type == "Finish"
            for event in events:
                if event.type in ("FollowUpStarted", "RecoveryStarted"):
                    resumed = await client.get(url, headers={"Last-Event-ID": str(event.seq)})
                    rest = sse_events(resumed.text)
                    assert [e["seq"] for e in rest] == [e.seq for e in events if e.seq > event.seq]
                    assert terminal_count(run_types(rest)) == 1
            done = await client.get(url, headers={"Last-Event-ID": str(end.seq)})
            assert done.status_code == 204
            page = await client.get(
                f"/gateway/streams/conv/events?after={events[0].seq - 1}",
                headers={"Accept": "application/json"},
            )
            assert page.json()["terminal"] is True
            assert page.json()["next_after"] == end.seq

    asyncio.run(main())


def test_a_goose_event_too_large_for_the_log_is_replaced_and_the_run_goes_on(
    log_url: str,
) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            huge = "x" * (2 * MIB)
            bound_session(
                fake,
                gateway,
                Turn()
                .text("reading the log file")
                .tool_call("cat", {"path": "big.log"}, result=huge)
                .text("done"),
            )
            run_id = await start_run(client, "summarise big.log")
            following = asyncio.create_task(client.get(f"/gateway/runs/{run_id}/events"))
            await wait_status(client, run_id, "finished")
            received = sse_events((await following).text)
            second = await start_run(client, "and again")  # the stream is not wedged
            await wait_status(client, second, "finished")

        dropped = [e for e in received if e["type"] == "PayloadDropped"]
        assert len(dropped) == 1
        data = dropped[0]["data"]
        assert data["dropped_type"] == "Message" and data["bytes"] > 2 * MIB
        assert data["limit"] == log.max_payload_bytes and "above the limit" in data["reason"]
        assert dropped[0]["upstream_event_id"] is not None  # goose's id: resuming still works
        types = run_types(received)
        assert types[-1] == "Finish" and terminal_count(types) == 1
        texts = [e["data"]["message"]["content"][0].get("text") for e in received
                 if e["type"] == "Message"]  # fmt: skip
        assert texts[0] == "reading the log file" and texts[-1] == "done"

    asyncio.run(main())


def test_a_replay_of_a_dropped_event_is_recognised_not_taken_for_a_restart(log_url: str) -> None:
    async def main() -> None:
        with EventLog(log_url, max_payload_bytes=4096) as log:
            store = RunStore(log)
            binding = store.bind(STREAM, "session-1")
            appender = FrameAppender(log, store)
            big = {"type": "Message", "message": {"id": "m1", "content": "z" * 8192}}
            [stored] = await appender.append_all(STREAM, [UpstreamFrame(1, "Message", big)])
            assert stored.type == "PayloadDropped" and stored.upstream_event_id == "1"
            assert stored.data["message_id"] == "m1"
            # goose replays the same event header-less: recognised by its digest.
            assert await is_duplicate(log, binding, 1, big)
            other = {**big, "message": {"id": "m2", "content": "w" * 8192}}
            assert not await is_duplicate(log, binding, 1, other)  # a new goosed lifetime

    asyncio.run(main())


def test_a_pump_that_keeps_failing_backs_off_then_ends_the_run_saying_why(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[float] = []

    async def broken(self: FrameAppender, stream: str, frames: Any) -> Any:
        attempts.append(asyncio.get_running_loop().time())
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(FrameAppender, "append_all", broken)

    async def main() -> None:
        async with harness(log_url) as h:
            settings = PumpSettings(
                reconnect_delay=0.05, max_reconnect_delay=1.0, lease_ttl=3.0, max_failures=4
            )
            h.pumps.settings = settings
            run = await h.runs.start(STREAM, "go")
            run = await h.finished(run)
            end = h.log.run_end(run.run_id)
            assert end is not None and end.type == "Error"
            assert "failed 4 times in a row" in end.data["error"]
            assert "the disk is full" in end.data["error"]

    asyncio.run(main())
    assert len(attempts) == 4
    pauses = [later - earlier for earlier, later in itertools.pairwise(attempts)]
    # Each restart waited at least its pause, which doubles: 0.05 s, 0.1 s, 0.2 s.
    assert all(pause >= 0.05 * 2**n for n, pause in enumerate(pauses))


class SlowGuard:
    """Holds the runs of one stream in their guard until told to let them go."""

    __name__ = "slow-guard"

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.entered = threading.Event()
        self.release = threading.Event()

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> None:
        if run.stream == self.stream:
            self.entered.set()
            self.release.wait(30)


def test_a_slow_guard_holds_up_only_its_own_run(log_url: str) -> None:
    guard = SlowGuard("slow")

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, _, _):
            slow = await start_run(client, "one", stream="slow")
            await until(guard.entered.is_set)
            fast = await start_run(client, "two", stream="fast")
            await wait_status(client, fast, "finished")  # while the slow one waits
            assert (await client.get(f"/gateway/runs/{slow}")).json()["status"] == "active"
            guard.release.set()
            await wait_status(client, slow, "finished")

    try:
        asyncio.run(main())
    finally:
        guard.release.set()


def test_lifecycle_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="max_follow_ups"):
        LifecycleSettings(max_follow_ups=-1)
    with pytest.raises(ValueError, match="hook_timeout"):
        LifecycleSettings(hook_timeout=0)
    with pytest.raises(ValueError, match="kind"):
        RecoveryPlan("")
    with pytest.raises(ValueError, match="clean_session"):
        RecoveryPlan("x", context=[{"role": "user"}])
    with pytest.raises(ValueError, match="max_failures"):
        PumpSettings(max_failures=0)
    with pytest.raises(ValueError, match="lease_ttl"):
        PumpSettings(lease_ttl=-1)
    assert FAST.max_failures == 5


def test_a_run_waiting_for_its_guards_is_not_pruned_and_ends_once_pruned_after(
    log_url: str,
) -> None:
    guard = SlowGuard("conv")

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, _, log):
            run_id = await start_run(client, "go")
            await until(guard.entered.is_set)  # goose said Finish; the run has not ended
            assert await asyncio.to_thread(log.prune, 0) == 0
            # As the guards read it: committed, and settled or not (an older transaction
            # elsewhere on the server holds a cursor reader back, not the guards).
            assert "UpstreamFinish" in run_types(log.read(run_id=run_id, settled=False))
            guard.release.set()
            await wait_status(client, run_id, "finished")
            assert await asyncio.to_thread(log.prune, 0) > 0
            assert log.read(run_id=run_id) == []

    try:
        asyncio.run(main())
    finally:
        guard.release.set()


def test_a_cancel_during_a_follow_up_ends_the_run_cancelled_without_asking_again(
    log_url: str,
) -> None:
    guard = VetoOnce()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, gateway, log):
            bound_session(fake, gateway, Turn().text("a"), Turn().text("b").hang())
            run_id = await start_run(client, "go")
            await until(lambda: "FollowUpStarted" in run_types(log.read(run_id=run_id)))
            await until(lambda: len(fake.reply_calls) == 2)
            cancelled = await client.post(f"/gateway/runs/{run_id}/cancel")
            assert cancelled.status_code == 200
            shown = await wait_status(client, run_id, "cancelled")
            events = log.read(run_id=run_id)

        follow_up = fake.reply_calls[1].request_id
        assert [c.request_id for c in fake.cancel_calls][-1] == follow_up  # the current request
        assert shown["attempt"] == 2 and len(guard.calls) == 1  # not asked after the cancel
        types = run_types(events)
        assert terminal_count(types) == 1 and types[-1] == "Finish"
        assert events[-1].data["status"] == "cancelled"

    asyncio.run(main())


def test_a_run_ends_and_bills_from_all_it_wrote_while_other_transactions_run(
    pg_url: str,
) -> None:
    """On PostgreSQL a reader by cursor is not given events while an older transaction runs
    anywhere on the server; the lifecycle's guards and the bill still see the whole run."""
    ledger = Ledger()
    guard = VetoOnce()

    async def main() -> None:
        async with harness(pg_url, plugins=[ledger, guard]) as h:
            h.fake.script(h.session_id, Turn().text("a").usage(10, 5), Turn().text("b").usage(7, 3))
            with psycopg.connect(conninfo(PG_URL), autocommit=False) as other:
                other.execute("SELECT pg_current_xact_id()")  # a transaction with an id, open
                run = await h.runs.start(STREAM, "go")
                await h.until(lambda: not h.store.get(run.run_id).active)  # type: ignore[union-attr]
                await h.until(lambda: ledger.calls)
                other.rollback()
            [(_, _, usage)] = ledger.calls
            assert (usage["input_tokens"], usage["output_tokens"]) == (17, 8)
            # The guards saw goose's Finish of each turn.
            assert [calls.count("UpstreamFinish") for calls in guard.calls] == [1, 2]

    asyncio.run(main())


class HeldVeto(SlowGuard):
    """Holds its run in the guard until let go, then vetoes."""

    __name__ = "held-veto"

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto:
        self.entered.set()
        self.release.wait(30)
        return GuardVeto("not yet", missing=["the rest"])


def test_a_cancel_while_the_guards_decide_starts_no_follow_up(log_url: str) -> None:
    guard = HeldVeto("conv")

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, _, log):
            run_id = await start_run(client, "go")
            await until(guard.entered.is_set)  # goose said Finish; the guard is deciding
            assert (await client.post(f"/gateway/runs/{run_id}/cancel")).status_code == 200
            guard.release.set()  # the guard vetoes, but the run was cancelled meanwhile
            shown = await wait_status(client, run_id, "cancelled")
            types = run_types(log.read(run_id=run_id))

        assert len(fake.reply_calls) == 1  # no follow-up went to goose
        assert shown["attempt"] == 1 and "FollowUpStarted" not in types
        assert terminal_count(types) == 1 and types[-1] == "Finish"

    try:
        asyncio.run(main())
    finally:
        guard.release.set()


class SlowLedger:
    """Its first delivery outlives the billing timeout; it notes when each delivery began."""

    __name__ = "slow-ledger"

    def __init__(self) -> None:
        self.started: list[float] = []
        self.release = threading.Event()

    @hookimpl
    def bill_run(self, run: Any, usage: Any, idempotency_key: str) -> None:
        self.started.append(time.monotonic())
        if len(self.started) == 1:
            self.release.wait(10)


def test_a_delivery_that_timed_out_keeps_its_claim_so_none_runs_beside_it(
    sqlite_url: str,
) -> None:
    ledger = SlowLedger()
    billing = BillingSettings(claim_ttl=1.0, timeout=0.1, retry_delay=0.01, scan_interval=0.02)
    settings = LifecycleSettings(billing=billing)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        options: dict[str, Any] = {
            "plugins": [ledger],
            "settings": GatewaySettings(lifecycle=settings),
        }
        async with gateway_client(sqlite_url, fake, **options) as (client, gateway, _):
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            store = gateway.pumps.store  # type: ignore[union-attr]
            await until(lambda: (b := store.bill(run_id)) is not None and b.delivered_at)

    try:
        asyncio.run(main())
    finally:
        ledger.release.set()
    first, second = ledger.started[:2]
    assert second - first >= billing.claim_ttl * 0.9  # not before the first claim ran out


def test_a_run_the_log_already_ends_does_not_hold_its_stream(log_url: str) -> None:
    """A row left active for a run whose end is in the log (written by a process that died
    before it wrote the row, before both went in one transaction) is brought in line."""

    async def main() -> None:
        async with harness(log_url) as h:
            h.fake.script(h.session_id, Turn().hang())
            run = await h.runs.start(STREAM, "go")
            h.log.append(STREAM, "Error", {"error": "ended elsewhere"}, run_id=run.run_id)
            assert h.store.get(run.run_id).active  # type: ignore[union-attr]
            await h.runs.cancel(run.run_id)  # frees goose's session for the next run
            nxt = await h.runs.start(STREAM, "next")  # no 409: the log ended the first run
            assert h.store.get(run.run_id).status.value == "failed"  # type: ignore[union-attr]
            await h.finished(nxt)

    asyncio.run(main())
