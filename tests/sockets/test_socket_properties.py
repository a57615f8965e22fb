"""Socket.IO under random users, owners, subscriptions and appends: no client ever receives an
event of a stream it did not subscribe to or may not read, and each gets every event of the
streams it was let into, once, in order.

Each example makes fresh streams with random owners, connects a few clients of random users
(real python-socketio clients, tickets over HTTP), subscribes each to a random set of streams
(the streams it may not read are refused), appends random events, then a last marker to every
stream; once every client has the markers of its streams, what each received is checked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GatewaySettings, IdentitySettings
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.flask_site import flask_app
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import connected, with_token

USERS = ("ann", "ben", "cat")
STREAMS = 4
EXAMPLES = 20
examples = itertools.count()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EventLog, dict]]:
    db = tmp_path_factory.mktemp("sockets") / "gateway.db"
    log = EventLog(f"sqlite:///{db}")
    tokens = {user: ApiTokens(log).create(user)[1] for user in USERS}
    try:
        # Many tickets per credential in little time: the rate limit is not what is tested.
        gateway = Gateway(
            flask_app(log),
            log=log,
            settings=GatewaySettings(identity=IdentitySettings(ticket_rate=(10_000, 1.0))),
        )
        with serve_in_thread(gateway) as base:
            yield base, log, tokens
    finally:
        log.close()


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(
    owners=st.lists(st.sampled_from(USERS), min_size=STREAMS, max_size=STREAMS),
    clients=st.lists(
        st.tuples(
            st.sampled_from(USERS),
            st.sets(st.integers(0, STREAMS - 1), max_size=STREAMS),
        ),
        min_size=1,
        max_size=4,
    ),
    appends=st.lists(st.integers(0, STREAMS - 1), max_size=30),
)
def test_no_client_gets_what_it_did_not_subscribe_to_or_may_not_read(
    served: tuple[str, EventLog, dict[str, str]],
    owners: list[str],
    clients: list[tuple[str, set[int]]],
    appends: list[int],
) -> None:
    base, log, tokens = served
    example = next(examples)
    streams = [f"p{example}-s{i}" for i in range(STREAMS)]
    for stream, owner in zip(streams, owners, strict=True):
        StreamOwners(log).declare(stream, owner)

    async def main() -> None:
        sockets = [with_token(base, tokens[user]) for user, _ in clients]
        async with connected(*sockets):
            allowed: list[set[str]] = []
            for socket, (user, wanted) in zip(sockets, clients, strict=True):
                let_in = set()
                for i in sorted(wanted):
                    ack = await socket.subscribe(streams[i])
                    assert ack["ok"] is (owners[i] == user), (user, owners[i], ack)
                    if ack["ok"]:
                        let_in.add(streams[i])
                allowed.append(let_in)
            written = [
                await log.aappend(streams[i], "Message", {"n": n}) for n, i in enumerate(appends)
            ]
            markers = {s: await log.aappend(s, "Marker", {}) for s in streams}
            for socket, let_in in zip(sockets, allowed, strict=True):
                await socket.until(
                    lambda s=socket, a=let_in: all(markers[x].seq in s.seqs(x) for x in a),
                    "every marker of the client's streams",
                )
            for socket, let_in in zip(sockets, allowed, strict=True):
                got = {e["stream"] for e in socket.events}
                assert got <= let_in, (got, let_in)
                for stream in let_in:
                    expected = [e.seq for e in written if e.stream == stream]
                    expected.append(markers[stream].seq)
                    assert socket.seqs(stream) == expected

    asyncio.run(main())
