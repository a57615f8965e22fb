"""The lifecycle as clients over real HTTP see it: a gateway and a fake goose, both served by
uvicorn, a client following the run's stream and another polling the legacy task API."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx

from gateway_kit import (
    Event,
    EventLog,
    Gateway,
    GatewaySettings,
    GooseUpstream,
    GuardVeto,
    LegacySurfaces,
    hookimpl,
)
from gateway_kit.testing import FakeGoose, Turn
from tests.support.serving import serve_in_thread
from tests.support.upstream import FAST
from tests.support.waiting import wait_until

TIMEOUT = 20.0


class HeldVeto:
    """Vetoes the first Finish once the test has looked at the run, then passes."""

    __name__ = "held-veto"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto | None:
        self.calls += 1
        if self.calls > 1:
            return None
        self.entered.set()
        self.release.wait(TIMEOUT)
        return GuardVeto("the summary was not saved", missing=["summary.md"])


def follow(url: str, into: list[dict[str, Any]]) -> None:
    with (
        httpx.Client(timeout=TIMEOUT) as client,
        client.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream,
    ):
        into.extend(
            json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")
        )


def test_clients_see_the_follow_up_in_the_same_run_and_one_end_after_it(sqlite_url: str) -> None:
    fake = FakeGoose(ping_interval=0.05)
    session = fake.create_session()
    fake.script(session, Turn().text("Summary: done."), Turn().text("Saved summary.md."))
    guard = HeldVeto()
    log = EventLog(sqlite_url)
    try:
        with serve_in_thread(fake, lifespan="off") as goose_url:
            upstream = GooseUpstream(base_url=goose_url, secret_key=fake.secret_key)
            gateway = Gateway(
                log=log,
                upstream=upstream,
                plugins=[guard],
                load_entry_points=False,
                allow_anonymous=True,
                settings=GatewaySettings(pumps=FAST),
                legacy=LegacySurfaces(tasks="/api/tasks"),
            )
            assert gateway.pumps is not None
            gateway.pumps.store.bind("conv", session)
            with serve_in_thread(gateway) as base, httpx.Client(base_url=base) as client:
                started = client.post("/gateway/streams/conv/runs", json={"message": "summarise"})
                run_id = started.json()["run_id"]
                received: list[dict[str, Any]] = []
                follower = threading.Thread(
                    target=follow, args=(f"{base}/gateway/runs/{run_id}/events", received)
                )
                follower.start()
                assert guard.entered.wait(TIMEOUT)
                # goose said Finish, but the run has not ended: the poll still says running.
                poll = client.get(f"/api/tasks/{run_id}").json()
                assert "UpstreamFinish" in [e["type"] for e in poll["events"]]
                assert poll["status"] == "running"
                guard.release.set()
                follower.join(TIMEOUT)
                assert not follower.is_alive()
                wait_until(lambda: client.get(f"/gateway/runs/{run_id}").json()["status"]
                           == "finished", TIMEOUT)  # fmt: skip
                poll = client.get(f"/api/tasks/{run_id}").json()
    finally:
        guard.release.set()
        log.close()
    types = [e["type"] for e in received]
    assert types.count("Finish") + types.count("Error") == 1 and types[-1] == "Finish"
    assert types.index("FollowUpStarted") < types.index("Finish")
    texts = [e["data"]["message"]["content"][0]["text"] for e in received if e["type"] == "Message"]
    assert texts == ["Summary: done.", "Saved summary.md."]
    assert poll["status"] == "completed" and poll["events"][-1]["type"] == "Finish"
    prompt = fake.reply_calls[1].user_message["content"][0]["text"]
    assert "the summary was not saved" in prompt and "- summary.md" in prompt
