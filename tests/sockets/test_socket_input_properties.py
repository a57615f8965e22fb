"""The Socket.IO surface under careless and hostile payloads: every ``subscribe`` and
``unsubscribe`` that is not a valid request is answered ``{"ok": false, "error", "message"}``,
the connection stays up, nothing is written, and a valid subscription still works after."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway
from gateway_kit.access import ApiTokens, StreamOwners

from ..identity.helpers import flask_app
from ..serving import serve_in_thread
from .clients import Client, connected, with_token

OWN = "own-stream"
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
PAYLOADS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {"stream": st.one_of(st.just(OWN), st.text(max_size=250), st.integers(), st.none())},
        optional={
            "after": JSON
            | st.text(max_size=30)
            | st.integers(min_value=-(2**70), max_value=2**70)
            | st.sampled_from(["7", " 12 ", "other:3", "-1", "1e3", "+4", "٣", str(2**70)])
        },
    ),
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EventLog, str]]:
    db = tmp_path_factory.mktemp("hostile") / "gateway.db"
    log = EventLog(f"sqlite:///{db}")
    _, token = ApiTokens(log).create("user")
    StreamOwners(log).declare(OWN, "user")
    try:
        # One connect per example: the ticket rate limit is not what is tested here.
        gateway = Gateway(flask_app(log), log=log, ticket_rate=(10_000, 1.0))
        with serve_in_thread(gateway) as base:
            yield base, log, token
    finally:
        log.close()


def valid(payload: Any) -> bool:
    """A subscription the server must take: the own stream, and a cursor that is a whole
    number or its text (any size, and `<epoch>:` before it: what it cannot use is a reset)."""
    if not isinstance(payload, dict) or payload.get("stream") != OWN:
        return False
    after = payload.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, int | str):
        return False
    seq = str(after).strip().rpartition(":")[2]
    return seq.isascii() and seq.isdigit()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(payloads=st.lists(PAYLOADS, min_size=1, max_size=6))
def test_bad_subscriptions_are_answered_and_change_nothing(
    served: tuple[str, EventLog, str], payloads: list[Any]
) -> None:
    base, log, token = served

    async def main() -> None:
        client: Client = with_token(base, token)
        async with connected(client):
            head = await log.alast_seq()
            for payload in payloads:
                for event in ("subscribe", "unsubscribe"):
                    ack = await client.sio.call(event, payload, timeout=10)
                    assert isinstance(ack, dict) and isinstance(ack.get("ok"), bool), ack
                    if not ack["ok"]:
                        assert isinstance(ack["error"], str) and isinstance(ack["message"], str)
                    if event == "subscribe":
                        assert ack["ok"] is valid(payload), (payload, ack)
            assert client.sio.connected
            assert await log.alast_seq() == head  # nothing was written
            assert await client.subscribe(OWN) == {"ok": True}
            mark = await log.aappend(OWN, "Message", {"text": "still works"})
            await client.until(lambda: mark.seq in client.seqs(OWN), "the event after all that")
            assert {e["stream"] for e in client.events} <= {OWN}

    asyncio.run(main())
