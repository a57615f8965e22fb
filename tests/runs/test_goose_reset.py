"""A goose whose session store was reset hands out its session ids from 1 again: an id the
gateway still has bound to another stream. The new session is the starting stream's; the old
binding, naming a session goose no longer has, goes, so that neither stream ever talks into
the other's conversation. While that old binding still serves an active run, the start is a
502 that writes nothing."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from gateway_kit import Gateway
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.testing import sessions as fake_sessions
from tests.support.raw_requests import goose_calls, writes
from tests.support.runs import gateway_client, start_run, wait_status
from tests.support.waiting import until


def reset_session_store(
    fake: FakeGoose, monkeypatch: pytest.MonkeyPatch, first_id: str, *, restart: bool = True
) -> None:
    """What goose does when its sessions database is wiped and goosed restarts: every session
    is gone, and the next one made gets the id `first_id` got ("<date>_<n>") again. Without
    `restart`, the streams goosed has open go on (the database was wiped under it)."""
    number = int(first_id.rpartition("_")[2])
    if restart:
        fake.restart()
    fake.sessions.clear()
    monkeypatch.setattr(fake_sessions, "_session_numbers", itertools.count(number))


def binding_of(gateway: Gateway, stream: str) -> str | None:
    assert gateway.pumps is not None
    binding = gateway.pumps.store.binding(stream)
    return None if binding is None else binding.session_id


def said(gateway: Gateway, stream: str) -> list[str]:
    """The text of every goose message the stream holds."""
    texts = []
    for event in gateway.log.read(stream=stream, limit=1000, settled=False):
        message = event.data.get("message") if event.type == "Message" else None
        for item in message.get("content", []) if isinstance(message, dict) else []:
            if item.get("type") == "text":
                texts.append(item["text"])
    return texts


def test_a_session_id_goose_hands_out_again_starts_the_run_and_unbinds_the_stale_stream(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, _):
            await wait_status(client, await start_run(client, "to a", "a"), "finished")
            first = binding_of(gateway, "a")
            assert first is not None
            reset_session_store(fake, monkeypatch, first)
            fake.script_next_session(Turn().text("b's answer"))

            answer = await client.post("/gateway/streams/b/runs", json={"message": "to b"})
            assert answer.status_code == 200, answer.text
            await wait_status(client, answer.json()["run_id"], "finished")
            assert binding_of(gateway, "b") == first  # goose's new session is b's
            assert binding_of(gateway, "a") is None  # a's session is gone from goose

            fake.script_next_session(Turn().text("a's answer"))
            await wait_status(client, await start_run(client, "to a again", "a"), "finished")
            again = binding_of(gateway, "a")
            assert again is not None and again != first  # a new session of its own
            assert "b's answer" in said(gateway, "b") and "b's answer" not in said(gateway, "a")
            assert "a's answer" in said(gateway, "a") and "a's answer" not in said(gateway, "b")
            assert [c.session_id for c in fake.reply_calls[-2:]] == [first, again]

    asyncio.run(main())


def test_a_session_id_that_still_serves_an_active_run_is_a_502_writing_nothing(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        fake.script_next_session(Turn().text("working").hang())
        async with gateway_client(log_url, fake) as (client, gateway, log):
            running = await start_run(client, "to a", "a")
            first = binding_of(gateway, "a")
            assert first is not None
            await until(lambda: "working" in said(gateway, "a"), 10.0)  # "a" is written so far
            # The open events stream of "a" goes on, so its run is still active when "b" starts
            # (a restart would end it once its pump heard goose no longer knows the session).
            reset_session_store(fake, monkeypatch, first, restart=False)
            before = writes(log)

            answer = await client.post("/gateway/streams/b/runs", json={"message": "to b"})
            assert answer.status_code == 502, answer.text
            assert answer.headers["content-type"] == "application/json"
            assert answer.json()["error"] == "upstream_error"
            assert first in answer.json()["message"]
            assert writes(log) == before  # no run, no binding, no event
            assert binding_of(gateway, "a") == first
            assert (await client.get(f"/gateway/runs/{running}")).json()["status"] == "active"
            assert goose_calls(fake).replies == 1  # b's message went nowhere
            await client.post(f"/gateway/runs/{running}/cancel")

    asyncio.run(main())
