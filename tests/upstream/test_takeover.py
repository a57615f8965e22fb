"""Two gateway processes on PostgreSQL: one is killed mid-run, the other finishes the run."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import httpx

from gateway_kit import EventLog
from gateway_kit.testing import FakeGoose, echo_turn
from tests.support.processes import gateway_process
from tests.support.serving import serve_in_thread
from tests.support.waiting import settled, wait_until

MODULE = "tests.support.upstream_process"


def test_the_surviving_gateway_takes_the_pump_over(pg_url: str, tmp_path: Path) -> None:
    fake = FakeGoose(ping_interval=0.2, default_turn=functools.partial(echo_turn, chunk_delay=0.8))
    words = " ".join(f"word{i}" for i in range(30))
    with (
        EventLog(pg_url) as log,
        serve_in_thread(fake, lifespan="off") as goose_url,
        gateway_process(MODULE, *args(pg_url, goose_url, fake), tmp=tmp_path, name="1") as first,
        gateway_process(MODULE, *args(pg_url, goose_url, fake), tmp=tmp_path, name="2") as second,
    ):
        started = httpx.post(f"{first.url}/gateway/streams/conv/runs", json={"message": words})
        assert started.status_code == 200, started.text
        run_id = started.json()["run_id"]
        # Read as committed, not as readers by cursor are given it: another transaction on
        # the server (another suite, say) holds those back, and the kill must come mid-run.
        wait_until(
            lambda: any(e.upstream_event_id for e in log.read(run_id=run_id, settled=False)), 20
        )
        os.kill(first.proc.pid, signal.SIGKILL)  # mid-run: goose is still typing
        first.proc.wait()
        at_kill = log.read(run_id=run_id, settled=False)
        assert "Finish" not in [e.type for e in at_kill]

        def ended() -> bool:
            state = httpx.get(f"{second.url}/gateway/runs/{run_id}").json()
            return bool(state["status"] != "active")

        wait_until(ended, 30)
        state = httpx.get(f"{second.url}/gateway/runs/{run_id}").json()
        settled(log)
        events = log.read(run_id=run_id)

    assert state["status"] == "finished"
    # the survivor resumed from the newest goose id the killed one had persisted
    newest_at_kill = max(int(e.upstream_event_id) for e in at_kill if e.upstream_event_id)
    assert str(newest_at_kill) in [call.last_event_id for call in fake.events_calls[1:]]
    ids = [int(e.upstream_event_id) for e in events if e.upstream_event_id is not None]
    assert ids == list(range(1, len(ids) + 1))  # every goose event once, none lost
    assert [e.type for e in events].count("Finish") == 1
    text = "".join(
        c["text"] for e in events if e.type == "Message" for c in e.data["message"]["content"]
    )
    assert text == words


def args(db_url: str, goose_url: str, fake: FakeGoose) -> tuple[str, ...]:
    return (db_url, goose_url, fake.secret_key)
