"""A gateway process SIGKILLed while its ACP agent runs a turn: another process ends the run
with an Error saying why, and the stream's next run continues the same ACP session, nothing
that ``session/load`` replays written twice."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import EventLog
from gateway_kit.testing import AcpScript
from tests.support.processes import gateway_process
from tests.support.waiting import wait_until

MODULE = "tests.support.acp_process"
TIMEOUT = 30.0


def run_of(base: str, message: str) -> str:
    answer = httpx.post(f"{base}/gateway/streams/conv/runs", json={"message": message})
    assert answer.status_code == 200, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


def status(base: str, run_id: str) -> str:
    state: str = httpx.get(f"{base}/gateway/runs/{run_id}").json()["status"]
    return state


def end_of(base: str, run_id: str) -> Any:
    """The run's terminal event as readers see it; None until they do."""
    run = httpx.get(f"{base}/gateway/runs/{run_id}").json()
    page = httpx.get(
        f"{base}/gateway/streams/conv/events",
        params={"after": str(run["terminal_seq"] - 1), "limit": "1"},
        headers={"Accept": "application/json"},
    ).json()["events"]
    return page[0] if page else None


def assistant_texts(log: EventLog) -> list[str]:
    said: list[str] = []
    for event in log.read(0, "conv", 1000, settled=False):
        message: Any = event.data.get("message") if event.type == "Message" else None
        if message and message["role"] == "assistant":
            said += [item["text"] for item in message["content"] if item["type"] == "text"]
    return said


def test_a_killed_gateways_acp_run_ends_and_the_next_run_continues_its_session(
    pg_url: str, tmp_path: Path
) -> None:
    state = str(tmp_path / "sessions")
    args = (pg_url, state)
    with gateway_process(MODULE, *args, tmp=tmp_path, name="first") as first:
        done = run_of(first.url, AcpScript().text("before").prompt())
        wait_until(lambda: status(first.url, done) == "finished", timeout=TIMEOUT)
        hanging = run_of(first.url, AcpScript().text("half").hang().prompt())
        log = EventLog(pg_url)
        try:
            wait_until(lambda: "half" in assistant_texts(log), timeout=TIMEOUT)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait()
            with gateway_process(MODULE, *args, tmp=tmp_path, name="second") as second:
                wait_until(lambda: status(second.url, hanging) == "failed", timeout=TIMEOUT)
                # On PostgreSQL readers see the end once the rows before it are settled.
                wait_until(lambda: end_of(second.url, hanging) is not None, timeout=TIMEOUT)
                end = end_of(second.url, hanging)
                assert end["type"] == "Error" and "stopped" in end["data"]["error"], end
                after = run_of(second.url, AcpScript().text("after").prompt())
                wait_until(lambda: status(second.url, after) == "finished", timeout=TIMEOUT)
                assert assistant_texts(log) == ["before", "half", "after"], second.said()
                attempts = [
                    attempt
                    for run_id in (done, after)
                    for attempt in httpx.get(f"{second.url}/gateway/runs/{run_id}").json()[
                        "attempts"
                    ]
                ]
                # The same ACP session, loaded again by the new process's agent.
                assert len({attempt["session_id"] for attempt in attempts}) == 1
        finally:
            log.close()
