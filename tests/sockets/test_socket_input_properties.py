"""The Socket.IO surface under careless and hostile payloads: every ``subscribe`` and
``unsubscribe`` that is not a valid request is answered ``{"ok": false, "error", "message"}``,
the connection stays up, nothing is written, and a valid subscription still works after."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import socketio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, Gateway, GatewaySettings, IdentitySettings
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.flask_site import flask_app
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import Client, connected

OWN = "own-stream"
RAW = "\x00raw:"  # a text `RawNumbers` sends as the JSON number that follows it
LONE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)  # not in st.text() by default
NAMES = st.one_of(
    st.text(max_size=250),
    st.lists(st.one_of(st.characters(), LONE), min_size=1, max_size=6).map("".join),
)
# Cursors of more digits than Python converts to an int (4,300; zeros count), as text, and as
# JSON numbers of more digits than python-socketio's decoder takes (100).
HUGE = st.one_of(
    st.builds(lambda n, tail: "0" * n + tail, st.integers(4290, 6000), st.sampled_from(["", "7"])),
    st.integers(4290, 6000).map(lambda n: "9" * n),
    st.builds(
        lambda sign, n: f"{RAW}{sign}{'9' * n}",
        st.sampled_from(["", "-"]),
        st.sampled_from([101, 5000]),
    ),
)
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
        {"stream": st.one_of(st.just(OWN), NAMES, st.integers(), st.none())},
        optional={
            "after": JSON
            | st.text(max_size=30)
            | st.integers(min_value=-(2**70), max_value=2**70)
            | st.sampled_from(["7", " 12 ", "other:3", "-1", "1e3", "+4", "٣", str(2**70)])
            | HUGE
            | NAMES
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
        gateway = Gateway(
            flask_app(log),
            log=log,
            settings=GatewaySettings(identity=IdentitySettings(ticket_rate=(10_000, 1.0))),
        )
        with serve_in_thread(gateway) as base:
            yield base, log, token
    finally:
        log.close()


class RawNumbers:
    """The ``json`` of a client that sends numbers of any size: a text starting with `RAW`
    goes out as the JSON number after it (Python's own encoder cannot write one of more than
    4,300 digits, a hostile client can)."""

    loads = staticmethod(json.loads)

    @staticmethod
    def dumps(data: Any, **options: Any) -> str:
        text = json.dumps(data, **options)
        return re.sub(r'"\\u0000raw:(-?\d+)"', r"\1", text)


class RawNumbersPacket(socketio.packet.Packet):  # type: ignore[misc]
    json = RawNumbers


def valid(payload: Any) -> bool:
    """A subscription the server must take: the own stream, and a cursor that is a whole
    number or its text (any size, and `<epoch>:` before it: what it cannot use is a reset)."""
    if not isinstance(payload, dict) or payload.get("stream") != OWN:
        return False
    after = payload.get("after", 0)
    if isinstance(after, str) and after.startswith(RAW):
        return not after.startswith(RAW + "-")  # a number: beyond any seq is a reset
    if isinstance(after, bool) or not isinstance(after, int | str):
        return False
    if isinstance(after, int):
        return after >= 0
    seq = after.strip().rpartition(":")[2]
    return seq.isascii() and seq.isdigit()


@settings(max_examples=60, deadline=None, derandomize=True)
@given(payloads=st.lists(PAYLOADS, min_size=1, max_size=6))
# Each went unanswered: an int() of more than 4,300 digits, a number the decoder refused, a
# name the presence table could not hold.
@example(payloads=[{"stream": OWN, "after": "0" * 5000 + "1"}])
@example(
    payloads=[
        {"stream": OWN, "after": RAW + "9" * 5000},
        {"stream": OWN, "after": RAW + "-" + "1" * 120},
    ]
)
@example(payloads=[{"stream": "\ud800"}, {"stream": "a\udfffb", "after": 0}])
def test_bad_subscriptions_are_answered_and_change_nothing(
    served: tuple[str, EventLog, str], payloads: list[Any]
) -> None:
    base, log, token = served

    async def main() -> None:
        sio = socketio.AsyncClient(reconnection=False, serializer=RawNumbersPacket)
        client = Client(base, {"authorization": f"Bearer {token}"}, sio=sio)
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
