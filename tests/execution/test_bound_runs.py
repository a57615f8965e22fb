"""Runs count as a tmux session's work: a run started for a session (the run API's
``tmux_session``, or the request's own header through `resolve_tmux_session`) keeps heartbeats
away while it goes on; requests naming a bound conversation are that session's; and only the
user who holds a session binds it or speaks for it."""

from __future__ import annotations

import asyncio

from gateway_kit import EventLog, Gateway
from gateway_kit.bindings.claims import claims_of
from gateway_kit.bindings.tmux_sessions import bindings_of
from gateway_kit.execution.observer import held_only
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.principal import PRINCIPAL_KEY, Principal
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session, gateway_client, wait_status

TMUX = "agent-3"


async def heartbeat(client: object, tmux: str = TMUX) -> dict[str, object]:
    answer = await client.get(f"/gateway/heartbeat/{tmux}")  # type: ignore[attr-defined]
    assert answer.status_code == 200, answer.text
    document: dict[str, object] = answer.json()
    return document


def test_a_run_started_for_a_tmux_session_keeps_it_busy_until_it_ends(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, _):
            release = asyncio.Event()
            bound_session(fake, gateway, Turn().text("working").pause(release))
            body = {"message": "build it", "tmux_session": TMUX}
            started = await client.post("/gateway/streams/conv/runs", json=body)
            assert started.status_code == 200, started.text
            run_id = started.json()["run_id"]
            during = await heartbeat(client)
            assert (during["decision"], during["reason"]) == ("skip", "run_active")
            assert during["evidence"]["active_runs"] == [run_id]  # type: ignore[index]
            release.set()
            await wait_status(client, run_id, "finished")
            after = await heartbeat(client)
            assert after["reason"] != "run_active"

    asyncio.run(main())


def test_the_requests_own_tmux_header_binds_the_stream(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            bound_session(fake, gateway, Turn().text("done"))
            headers = {"X-Tmux-Session-Id": TMUX}
            started = await client.post(
                "/gateway/streams/conv/runs", json={"message": "hi"}, headers=headers
            )
            assert started.status_code == 200, started.text
            assert bindings_of(log).streams_of(TMUX) == ["conv"]

    asyncio.run(main())


def test_a_tmux_session_no_tmux_can_have_is_a_400_and_nothing_starts(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, _, log):
            for bad in ["", "a\nb", 7, "x" * 300]:
                body = {"message": "hi", "tmux_session": bad}
                answer = await client.post("/gateway/streams/conv/runs", json=body)
                assert answer.status_code == 400, answer.text
                assert answer.json()["error"] == "invalid_body"
            assert fake.reply_calls == []
            assert log.read(stream="conv") == []
            assert bindings_of(log).streams_of("") == []

    asyncio.run(main())


def test_requests_naming_a_bound_conversation_are_its_sessions(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    bindings_of(log).bind("conv-7", TMUX, "alice")
    resolve = gateway.plugins.resolve_tmux_session

    def scope(headers: list[tuple[bytes, bytes]], query: bytes = b"") -> dict[str, object]:
        return {"type": "http", "headers": headers, "query_string": query}

    assert resolve(scope([(b"x-tmux-session-id", b"agent-9")])) == "agent-9"
    assert resolve(scope([(b"x-session-id", b"conv-7")])) == TMUX
    assert resolve(scope([(b"x-conversation-id", b"conv-7")])) == TMUX
    assert resolve(scope([], b"conversation_id=conv-7")) == TMUX
    assert resolve(scope([], b"session_id=nobody")) is None
    assert resolve(scope([(b"x-tmux-session-id", b"bad\x01id")])) is None


def test_only_the_holders_requests_speak_for_a_session(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False)
    bindings_of(log).bind("conv-7", TMUX, "alice")
    resolve = held_only(gateway.plugins.resolve_tmux_session, claims_of(log))

    def scope(headers: list[tuple[bytes, bytes]], user: str | None) -> dict[str, object]:
        found: dict[str, object] = {"type": "http", "headers": headers, "query_string": b""}
        if user is not None:
            found[PRINCIPAL_KEY] = Principal(user_id=user, method="bearer")
        return found

    by_header = [(b"x-tmux-session-id", TMUX.encode())]
    by_conversation = [(b"x-session-id", b"conv-7")]
    for headers in (by_header, by_conversation):
        assert resolve(scope(headers, "alice")) == TMUX
        assert resolve(scope(headers, "bob")) is None  # another user's request
        assert resolve(scope(headers, None)) is None  # an unauthenticated one
    # A session nobody holds is nobody's: what requests say of it is not believed.
    assert resolve(scope([(b"x-tmux-session-id", b"agent-free")], "alice")) is None


def test_a_run_binds_only_a_session_its_starter_may_use(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            tokens = ApiTokens(log)
            alice = {"authorization": f"Bearer {tokens.create('alice')[1]}"}
            bob = {"authorization": f"Bearer {tokens.create('bob')[1]}"}
            bound_session(fake, gateway, Turn().text("done"))
            mine = {"message": "hi", "tmux_session": TMUX}
            started = await client.post("/gateway/streams/conv/runs", json=mine, headers=alice)
            assert started.status_code == 200, started.text
            await wait_status(client, started.json()["run_id"], "finished")
            replies = len(fake.reply_calls)
            # Naming alice's session in the body: refused, nothing started, nothing bound.
            taken = await client.post("/gateway/streams/b-conv/runs", json=mine, headers=bob)
            assert taken.status_code == 403, taken.text
            assert taken.json()["error"] == "tmux_session_taken"
            assert len(fake.reply_calls) == replies
            assert log.read(stream="b-conv") == []
            # Naming it by header: the run starts, unbound.
            header = {**bob, "X-Tmux-Session-Id": TMUX}
            other = await client.post(
                "/gateway/streams/c-conv/runs", json={"message": "hi"}, headers=header
            )
            assert other.status_code == 200, other.text
            assert bindings_of(log).streams_of(TMUX) == ["conv"]
            assert claims_of(log).holder(TMUX) == "alice"

    asyncio.run(main())
