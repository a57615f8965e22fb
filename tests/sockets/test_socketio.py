"""The gateway's Socket.IO endpoint with real clients: python-socketio's client over a real
uvicorn server, tickets from httpx, the log written beside them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import socketio

from gateway_kit import EventLog, Gateway, GatewaySettings, StreamSettings
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.secrets import digest
from gateway_kit.identity.tables import socket_tickets
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.log.postgres import conninfo
from tests.support.flask_site import USERS, flask_app
from tests.support.postgres import PG_URL
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import Client, connected, logged_in, with_token
from tests.support.waiting import settled, until

GATEWAY_KIT = Path(sys.executable).parent / "gateway-kit"
ALICE = "alice-conv"
BOB = "bob-conv"


@pytest.fixture
def served(log_url: str) -> Iterator[tuple[str, EventLog]]:
    log = EventLog(log_url)
    owners = StreamOwners(log)
    owners.declare(ALICE, "alice")
    owners.declare(BOB, "bob")
    gateway = Gateway(flask_app(log), log=log)
    try:
        with serve_in_thread(gateway) as base:
            yield base, log
    finally:
        log.close()


def run(body: Any) -> Any:
    return asyncio.run(body)


def test_two_tabs_and_a_cli_of_one_user_connect_at_the_same_moment(
    served: tuple[str, EventLog],
) -> None:
    base, log = served
    _, token = ApiTokens(log).create("alice")

    async def main() -> None:
        tabs = await asyncio.gather(*(logged_in(base, "alice", USERS["alice"]) for _ in range(2)))
        cli = with_token(base, token)
        clients = [*tabs, cli]
        # Every client asks for its ticket at the same moment, then connects at once: no
        # ticket revokes another, as the legacy token endpoint did.
        tickets = await asyncio.gather(*(c.ticket() for c in clients))
        assert len(set(tickets)) == 3
        await asyncio.gather(
            *(c.connect(auth={"ticket": t}) for c, t in zip(clients, tickets, strict=True))
        )
        try:
            assert all(c.sio.connected for c in clients)
            acks = await asyncio.gather(*(c.subscribe(ALICE) for c in clients))
            assert acks == [{"ok": True}] * 3
            event = await log.aappend(ALICE, "Message", {"text": "to every client"})
            for client in clients:
                await client.until(lambda c=client: event.seq in c.seqs(ALICE), "delivered")
                assert client.events[-1]["data"] == {"text": "to every client"}
        finally:
            for client in clients:
                await client.sio.disconnect()

    run(main())


def test_replay_then_live_without_gap_or_duplicate(served: tuple[str, EventLog]) -> None:
    base, log = served
    _, token = ApiTokens(log).create("alice")
    before = log.append_many(
        [{"stream": ALICE, "type": "Message", "data": {"n": n}} for n in range(40)]
    )
    log.append(BOB, "Message", {"text": "not alice's"})
    settled(log)  # a cursor readers were given, as a client's is

    async def main() -> None:
        cli = with_token(base, token)
        async with connected(cli):
            appending = asyncio.create_task(
                asyncio.to_thread(
                    lambda: [log.append(ALICE, "Message", {"n": 40 + n}) for n in range(60)]
                )
            )
            assert await cli.subscribe(ALICE, after=before[9].seq) == {"ok": True}
            await appending
            await cli.until(lambda: len(cli.seqs(ALICE)) >= 90, "90 events")
        numbers = [e["data"]["n"] for e in cli.events]
        assert numbers == list(range(10, 100))  # each once, in order, nothing of BOB's
        assert {e["stream"] for e in cli.events} == {ALICE}

    run(main())


def test_a_cursor_ahead_of_what_readers_are_given_resets_and_is_sent_nothing_twice(
    pg_url: str,
) -> None:
    """On PostgreSQL readers are given an event only once no older transaction runs anywhere
    on the server. A room cannot hold back what a connection already has: such a cursor
    resets, as one beyond the head does."""
    log = EventLog(pg_url)
    StreamOwners(log).declare(ALICE, "alice")
    _, token = ApiTokens(log).create("alice")
    try:
        with serve_in_thread(Gateway(flask_app(log), log=log)) as base:

            async def main() -> None:
                cli = with_token(base, token)
                async with connected(cli):
                    with psycopg.connect(conninfo(PG_URL), autocommit=False) as other:
                        other.execute("SELECT pg_current_xact_id()")  # open, with an id
                        written = log.append_many(
                            [{"stream": ALICE, "type": "Message", "data": {"n": n}}
                             for n in range(3)]
                        )  # fmt: skip
                        ack = await cli.subscribe(ALICE, after=written[-1].seq)
                        other.rollback()
                    assert ack == {"ok": True}
                    await cli.until(lambda: len(cli.events) >= 4, "the reset and 3 events")
                reset, *events = cli.events
                assert reset["type"] == "reset" and reset["data"]["reason"] == "cursor_beyond_head"
                assert [e["data"]["n"] for e in events] == [0, 1, 2]  # each once

            run(main())
    finally:
        log.close()


def test_a_cursor_from_another_log_or_beyond_the_head_resets_as_over_sse(
    served: tuple[str, EventLog],
) -> None:
    base, log = served
    _, token = ApiTokens(log).create("alice")
    log.append_many([{"stream": ALICE, "type": "Message", "data": {"n": n}} for n in range(3)])

    async def main() -> None:
        for cursor, reason in ((10_000, "cursor_beyond_head"), ("0" * 32 + ":2", "epoch_mismatch")):
            cli = with_token(base, token)
            async with connected(cli):
                assert await cli.subscribe(ALICE, after=cursor) == {"ok": True}
                await cli.until(lambda c=cli: len(c.events) >= 4, "the reset and 3 events")
            reset, *events = cli.events
            assert reset["type"] == "reset" and reset["seq"] == 0
            assert reset["data"]["reason"] == reason and reset["data"]["epoch"] == log.epoch
            assert [e["data"]["n"] for e in events] == [0, 1, 2]  # from the start again

    run(main())


def test_a_stream_the_user_may_not_read_is_refused_and_sends_nothing(
    served: tuple[str, EventLog],
) -> None:
    base, log = served
    _, token = ApiTokens(log).create("bob")
    log.append(ALICE, "Message", {"text": "alice's"})

    async def main() -> None:
        bob = with_token(base, token)
        async with connected(bob):
            refused = await bob.subscribe(ALICE)
            assert refused["ok"] is False and refused["error"] == "forbidden"
            for bad in ({"stream": ""}, {"stream": 5}, "nonsense", {"stream": BOB, "after": -1}):
                ack = await bob.sio.call("subscribe", bad, timeout=10)
                assert ack["ok"] is False and ack["error"] and ack["message"], (bad, ack)
            assert await bob.subscribe(BOB) == {"ok": True}
            mark = await log.aappend(BOB, "Message", {"text": "bob's"})
            await log.aappend(ALICE, "Message", {"text": "never to bob"})
            await bob.until(lambda: mark.seq in bob.seqs(BOB), "bob's own event")
        assert {e["stream"] for e in bob.events} == {BOB}

    run(main())


def test_refused_tickets_say_why(served: tuple[str, EventLog]) -> None:
    base, log = served
    _, alice_token = ApiTokens(log).create("alice")

    async def refused(client: Client, auth: Any, **connect: Any) -> str:
        """Why the server refused the connect, as a client can show it."""
        reasons: list[Any] = []
        client.sio.on("connect_error", reasons.append)
        try:
            await client.sio.connect(
                base,
                socketio_path="gateway/socket.io",
                auth=auth,
                wait_timeout=10,
                **{"transports": ["websocket"], **connect},
            )
        except socketio.exceptions.ConnectionError as exc:
            reason = reasons[-1] if reasons else str(exc)
            return str(reason.get("message") if isinstance(reason, dict) else reason)
        await client.sio.disconnect()
        raise AssertionError(f"connected with {auth!r}")

    async def main() -> None:
        cli = with_token(base, alice_token)
        ticket = await cli.ticket()
        first = Client(base, {})
        await first.connect(auth={"ticket": ticket})
        await first.sio.disconnect()
        assert "used already" in await refused(Client(base, {}), {"ticket": ticket})
        assert "auth={'ticket'" in await refused(Client(base, {}), None)
        assert "unknown" in await refused(Client(base, {}), {"ticket": "made-up"})
        # Expired: its time to live is over (moved into the past, not waited for).
        late = await cli.ticket()
        with log.tables.transaction() as conn:
            conn.execute(
                socket_tickets.update()
                .where(socket_tickets.c.ticket_hash == digest(late))
                .values(expires_at=time.time() - 1)
            )
        assert "expired" in await refused(Client(base, {}), {"ticket": late})
        # Bound to the Origin of the page that asked for it.
        tab = await logged_in(base, "alice", USERS["alice"])
        tab_ticket = await tab.ticket()
        foreign = await refused(
            Client(base, {}), {"ticket": tab_ticket}, headers={"origin": "http://evil.example"}
        )
        assert "not an accepted origin" in foreign
        other_page = await refused(Client(base, {}), {"ticket": await tab.ticket()})
        assert "another origin" in other_page
        # Bound to its user: a handshake carrying bob's credentials cannot use alice's ticket.
        _, bob_token = ApiTokens(log).create("bob")
        stolen = await cli.ticket()
        bob_headers = {"authorization": f"Bearer {bob_token}"}
        assert "another user" in await refused(
            Client(base, {}), {"ticket": stolen}, headers=bob_headers
        )

    run(main())


def test_revoking_a_token_or_logging_out_closes_that_credentials_sockets_only(
    served: tuple[str, EventLog], log_url: str
) -> None:
    base, log = served
    record, token = ApiTokens(log).create("alice")
    _, other_token = ApiTokens(log).create("alice")

    async def main() -> None:
        revoked_cli = with_token(base, token)
        kept_cli = with_token(base, other_token)
        tab = await logged_in(base, "alice", USERS["alice"])
        async with connected(revoked_cli, kept_cli, tab):
            cli = await asyncio.to_thread(
                subprocess.run,
                [str(GATEWAY_KIT), "tokens", "revoke", record.token_id, "--db", log_url],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert cli.returncode == 0, cli.stderr
            await until(lambda: not revoked_cli.sio.connected, timeout=10)
            assert kept_cli.sio.connected and tab.sio.connected
            async with tab.http() as http:
                assert (await http.post("/logout")).status_code == 200
            await until(lambda: not tab.sio.connected, timeout=10)
            assert kept_cli.sio.connected
            # A revoked token gets no new ticket either.
            async with revoked_cli.http() as http:
                assert (await http.post("/gateway/socket-tickets")).status_code == 401

    run(main())


def test_presence_shows_who_watches_a_stream_and_tells_its_room(
    served: tuple[str, EventLog],
) -> None:
    base, log = served
    _, token = ApiTokens(log).create("alice")
    _, bob_token = ApiTokens(log).create("bob")

    async def main() -> None:
        cli = with_token(base, token)
        tab = await logged_in(base, "alice", USERS["alice"])
        async with connected(cli, tab):
            assert await cli.subscribe(ALICE) == {"ok": True}
            assert await tab.subscribe(ALICE) == {"ok": True}
            await cli.until(
                lambda: any(len(p["connections"]) == 2 for p in cli.presence), "both watching"
            )
            async with cli.http() as http:
                shown = (await http.get(f"/gateway/streams/{ALICE}/presence")).json()
            assert shown["stream"] == ALICE
            assert shown["users"] == [{"user_id": "alice", "connections": 2}]
            assert sorted(c["method"] for c in shown["connections"]) == ["bearer", "cookie"]
            assert all("sid" not in c for c in shown["connections"])  # a sid is a secret
            async with with_token(base, bob_token).http() as http:
                refused = await http.get(f"/gateway/streams/{ALICE}/presence")
                assert refused.status_code == 403
            assert await tab.unsubscribe(ALICE) == {"ok": True}
            await cli.until(lambda: len(cli.presence[-1]["connections"]) == 1, "one left watching")
        async with httpx.AsyncClient(base_url=base, headers=cli.headers) as http:
            await until_async_empty(http)

    async def until_async_empty(http: httpx.AsyncClient) -> None:
        async def empty() -> bool:
            answer = await http.get(f"/gateway/streams/{ALICE}/presence")
            return answer.json()["connections"] == []

        await until(empty, timeout=10)

    run(main())


def test_a_conversation_event_of_no_run_reaches_socket_and_rest_only_clients(
    served: tuple[str, EventLog],
) -> None:
    base, log = served

    async def main() -> None:
        tab = await logged_in(base, "alice", USERS["alice"])
        async with connected(tab):
            assert await tab.subscribe(ALICE) == {"ok": True}
            async with tab.http() as http:
                renamed = await http.post(
                    f"/api/conversations/{ALICE}/title", json={"title": "Fox facts"}
                )
                assert renamed.status_code == 200, renamed.text
                seq = renamed.json()["seq"]
                await tab.until(lambda: seq in tab.seqs(ALICE), "the title over Socket.IO")
                page = await http.get(
                    f"/gateway/streams/{ALICE}/events", headers={"accept": "application/json"}
                )
            [event] = [e for e in page.json()["events"] if e["seq"] == seq]
            assert event["type"] == "TitleChanged" and event["run_id"] is None
            assert event["data"] == {"title": "Fox facts"}
            assert tab.events[-1] == event  # the same envelope on both
        bob = await logged_in(base, "bob", USERS["bob"])
        async with bob.http() as http:
            refused = await http.post(f"/api/conversations/{ALICE}/title", json={"title": "x"})
            assert refused.status_code == 404  # not bob's conversation; nothing written
        assert [e.type for e in log.read(stream=ALICE)] == ["TitleChanged"]

    run(main())


def test_a_replay_in_pages_capped_by_bytes_sends_every_event_once(log_url: str) -> None:
    log = EventLog(log_url)
    StreamOwners(log).declare(ALICE, "alice")
    _, token = ApiTokens(log).create("alice")
    sizes = [1000, 1000, 1000, 7000, 10, 10, 2500, 3000, 1, 1] * 3
    for n, size in enumerate(sizes):
        log.append(ALICE, "Message", {"n": n, "text": "é" * (size // 2)})  # UTF-8 bytes count
    gateway = Gateway(
        flask_app(log),
        log=log,
        settings=GatewaySettings(streams=StreamSettings(max_page_bytes=3000)),
    )

    async def main() -> None:
        cli = with_token(base, token)
        async with connected(cli):
            assert await cli.subscribe(ALICE, after=0) == {"ok": True}
            await cli.until(lambda: len(cli.events) >= len(sizes), "every event")
            mark = await log.aappend(ALICE, "Message", {"n": len(sizes)})
            await cli.until(lambda: mark.seq in cli.seqs(ALICE), "the live event after them")
        assert [e["data"]["n"] for e in cli.events] == list(range(len(sizes) + 1))

    try:
        with serve_in_thread(gateway) as base:
            run(main())
    finally:
        log.close()
