"""Who owns a conversation: a stream the app wrote is never taken by starting a run in it.

The attack: the app writes alice's conversation (with no owner, or with alice as its owner);
bob, who knows its name, starts a run there. He must get a 403, write nothing, and still read
nothing of it by any route (SSE, JSON page, run SSE, legacy poll). A stream with no event and
no owner is still taken by its first run's starter.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from gateway_kit import EventLog, Principal, hookimpl, owned_run
from gateway_kit.identity.owners import UNOWNED_WRITE, StreamOwners, StreamTaken
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.runs.store import RunStore
from tests.support.flask_site import signed_cookie
from tests.support.raw_requests import JSON_TYPE, Call, assert_json_error, wait_run_ended

from .claims import Site, site, texts

STREAM = "alice-conv"


def victim_history(log: EventLog, *, owner: str | None) -> str:
    """The app writes alice's conversation, as the README's step 2 did: one task run."""
    with owned_run(log, stream=STREAM, owner=owner) as run:
        run.append("Message", {"role": "user", "text": "victim-secret-1"})
        run.append("Message", {"role": "assistant", "text": "victim-secret-2"})
    return run.run_id


async def assert_reads_nothing(s: Site, user: str, run_id: str) -> None:
    answers = await s.reads(user, STREAM, run_id)
    for name, answer in answers.items():
        assert texts(answer) == [], (name, answer.status, answer.body[:200])
        assert answer.status in (403, 404), (name, answer.status, answer.body[:200])
        assert_json_error(answer, answer.status)


@pytest.mark.parametrize("owner", [None, "alice"])
def test_starting_a_run_never_takes_a_conversation_the_app_wrote(
    log_url: str, owner: str | None
) -> None:
    async def main() -> None:
        async with site(log_url) as s:
            run_id = victim_history(s.log, owner=owner)
            await assert_reads_nothing(s, "bob", run_id)
            before = s.snapshot()
            answer = await s.start("bob", STREAM)
            assert_json_error(answer, 403, "forbidden")
            assert s.snapshot() == before, "a refused start wrote, or reached goose"
            await assert_reads_nothing(s, "bob", run_id)  # and it stays so
            assert StreamOwners(s.log).owner(STREAM) == owner

    asyncio.run(main())


def test_a_start_goose_refuses_in_a_conversation_with_history_takes_nothing(
    log_url: str,
) -> None:
    """The start used to write its owner row before goose answered: a 502 left bob owning
    alice's history."""

    async def main() -> None:
        async with site(log_url, reply_status=502) as s:
            run_id = victim_history(s.log, owner=None)
            before = s.snapshot()
            answer = await s.start("bob", STREAM)
            assert_json_error(answer, 403, "forbidden")
            assert s.snapshot() == before
            await assert_reads_nothing(s, "bob", run_id)
            assert StreamOwners(s.log).owner(STREAM) is None

    asyncio.run(main())


def test_the_owner_the_app_declares_starts_runs_and_reads_the_history(log_url: str) -> None:
    async def main() -> None:
        async with site(log_url) as s:
            run_id = victim_history(s.log, owner=None)
            # Nobody, alice included, takes a conversation with history by starting a run.
            assert_json_error(await s.start("alice", STREAM), 403, "forbidden")
            StreamOwners(s.log).set_owner(STREAM, "alice")  # what `streams owner` does
            started = await s.start("alice", STREAM)
            assert started.status == 200, started.body
            await wait_run_ended(s.gateway, started.json()["run_id"])
            answers = await s.settled("alice", STREAM, run_id, ["victim-secret-2"])
            assert {name: a.status for name, a in answers.items()} == {
                "sse": 200,
                "page": 200,
                "run_sse": 200,
                "legacy": 200,
            }
            assert texts(answers["page"]) == ["victim-secret-1", "victim-secret-2"]
            assert texts(answers["legacy"]) == ["victim-secret-1", "victim-secret-2"]
            await assert_reads_nothing(s, "bob", run_id)

    asyncio.run(main())


def test_a_new_stream_is_taken_by_its_first_starter_alone(log_url: str) -> None:
    async def main() -> None:
        async with site(log_url) as s:
            started = await s.start("bob", "bob-new", "bobs-first-words")
            assert started.status == 200, started.body
            run_id = started.json()["run_id"]
            await wait_run_ended(s.gateway, run_id)
            assert StreamOwners(s.log).owner("bob-new") == "bob"
            page = (await s.settled("bob", "bob-new", run_id, ["bobs-first-words"]))["page"]
            assert page.status == 200, page.body[:200]
            assert_json_error(await s.start("alice", "bob-new"), 403, "forbidden")
            reads = await s.reads("alice", "bob-new", run_id)
            assert {a.status for a in reads.values()} <= {403, 404}

    asyncio.run(main())


def test_a_claim_loses_to_an_event_written_first_and_records_no_run(log: EventLog) -> None:
    """The claim is made in the run's transaction: an event or an owner that came in between
    the look and the run's record wins, and the run is not recorded."""
    store = RunStore(log)

    def run(stream: str) -> Run:
        return Run(str(uuid.uuid4()), stream, "session", str(uuid.uuid4()),
                   RunStatus.ACTIVE, 1, False, "hi", 0.0)  # fmt: skip

    log.append("written", "Message", {"text": "the app's"})
    StreamOwners(log).declare("declared", "alice")
    for stream in ("written", "declared"):
        with pytest.raises(StreamTaken):
            store.create(run(stream), "bob")
        assert store.active_run(stream) is None
    assert StreamOwners(log).owner("written") is None
    assert StreamOwners(log).owner("declared") == "alice"
    taken = store.create(run("fresh"), "bob")
    assert store.active_run("fresh") == taken
    assert StreamOwners(log).owner("fresh") == "bob"


def test_a_write_with_no_owner_is_told_once_per_stream(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway_kit.identity.owners")
    for _ in range(3):
        with owned_run(log, stream="nobodys") as run:
            run.append("Message", {"text": "x"})
    with owned_run(log, stream="carols", owner="carol") as run:
        run.append("Message", {"text": "x"})
    told = [r for r in caplog.records if r.msg == UNOWNED_WRITE]
    assert [r.getMessage() for r in told] == [UNOWNED_WRITE % "nobodys"]
    assert "gateway-kit streams owner" in told[0].getMessage()


@pytest.mark.parametrize("user", ["u" * 201, "bob\nsmith", "bob\x00", "tab\there"])
def test_a_user_id_no_stream_can_be_owned_by_is_a_403_at_run_start(log_url: str, user: str) -> None:
    """The app's session may name any user; one the owners table cannot hold used to be a 500
    when its run would have made it a new stream's owner."""
    cookie = signed_cookie({"username": user, "login_id": "l1", "csrf_token": "the-csrf"})
    headers = [
        *JSON_TYPE,
        (b"cookie", f"session={cookie}".encode()),
        (b"x-csrf-token", b"the-csrf"),
    ]

    async def main() -> None:
        async with site(log_url) as s:
            before = s.snapshot()
            call = Call(
                "POST", b"/gateway/streams/fresh/runs", headers=headers, body=b'{"message": "hi"}'
            )
            answer = await call(s.gateway)
            assert_json_error(answer, 403, "invalid_user")
            assert s.snapshot() == before

    asyncio.run(main())


def test_a_new_stream_whose_first_start_goose_refuses_stays_its_starters(log_url: str) -> None:
    """The failed run is recorded (its RunStarted and Error say what was asked and why it
    failed), with its claim in the same transaction: the stream holds the starter's own events,
    so it stays his (he may try again), and nobody else reads the failure."""

    async def main() -> None:
        async with site(log_url, reply_status=502) as s:
            failed = await s.start("bob", "bob-new", "bobs-first-words")
            assert_json_error(failed, 502, "upstream_error")
            assert StreamOwners(s.log).owner("bob-new") == "bob"
            [run_id] = {e.run_id for e in s.log.read(stream="bob-new", settled=False)}
            assert run_id is not None
            assert_json_error(await s.start("bob", "bob-new"), 502, "upstream_error")
            assert_json_error(await s.start("alice", "bob-new"), 403, "forbidden")
            reads = await s.reads("alice", "bob-new", run_id)
            assert all(b"bobs-first-words" not in a.body for a in reads.values())
            assert {a.status for a in reads.values()} <= {403, 404}

    asyncio.run(main())


def test_a_stream_appended_with_no_owner_is_told_once_when_it_is_refused(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An app appending with `EventLog.append` names no owner: the first refused read or start
    says why nobody may read the stream, and how to declare its owner; later ones add nothing."""
    caplog.set_level(logging.WARNING, logger="gateway_kit.identity.owners")

    async def main() -> None:
        async with site(sqlite_url) as s:
            stream = f"appended-{uuid.uuid4().hex[:8]}"
            s.log.append(stream, "Message", {"text": "victim-secret-1"})
            for user in ("alice", "bob"):
                assert_json_error(await s.start(user, stream), 403, "forbidden")
                await s.reads(user, stream, None)

    asyncio.run(main())
    told = [r.getMessage() for r in caplog.records if r.msg == UNOWNED_WRITE]
    assert len(told) == 1 and "appended-" in told[0], told


class NoSecrets:
    """A deployment's rule: nobody uses a stream whose name starts with ``secret-``."""

    @hookimpl
    def authorize_subscription(self, principal: Principal, stream: str) -> bool | None:
        return False if stream.startswith("secret-") else None


def test_a_deployments_refusal_stops_the_first_run_of_a_new_stream(sqlite_url: str) -> None:
    """A new stream is taken by its first run's starter only if the plugins asked before the
    default rule let its owner-to-be use it."""

    async def main() -> None:
        async with site(sqlite_url, plugins=[NoSecrets()]) as s:
            before = s.snapshot()
            assert_json_error(await s.start("bob", "secret-new"), 403, "forbidden")
            assert s.snapshot() == before
            assert StreamOwners(s.log).owner("secret-new") is None
            started = await s.start("bob", "open-new")  # the plugin defers: bob takes it
            assert started.status == 200, started.body
            await wait_run_ended(s.gateway, started.json()["run_id"])
            assert StreamOwners(s.log).owner("open-new") == "bob"

    asyncio.run(main())
