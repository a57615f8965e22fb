"""Gateway processes SIGKILLed with an approval pending, and with one decided but not yet
delivered: after the restart each reaches goose, once."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from gateway_kit.testing import FakeGoose
from gateway_kit.types import Receive, Scope, Send
from tests.support.approvals import CONFIRMATIONS, asking_turn, confirmations
from tests.support.processes import GatewayProcess, gateway_process
from tests.support.serving import serve_in_thread
from tests.support.waiting import wait_until

MODULE = "tests.support.upstream_process"


class Gate:
    """goose behind a gate that can turn its tool confirmations away (a proxy in trouble)."""

    def __init__(self, fake: FakeGoose) -> None:
        self.fake = fake
        self.refusing = False
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.refusing and scope["type"] == "http" and scope["path"] == CONFIRMATIONS:
            self.refused += 1
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": b'{"message": "try later"}'})
            return
        await self.fake(scope, receive, send)


@contextmanager
def goose_behind_gate() -> Iterator[tuple[FakeGoose, Gate, str]]:
    fake = FakeGoose(ping_interval=0.2)
    fake.script_next_session(asking_turn())
    gate = Gate(fake)
    with serve_in_thread(gate, lifespan="off") as url:
        yield fake, gate, url


def start_run(gateway: GatewayProcess) -> str:
    started = httpx.post(f"{gateway.url}/gateway/streams/conv/runs", json={"message": "go"})
    assert started.status_code == 200, started.text
    return str(started.json()["run_id"])


def approvals(gateway: GatewayProcess) -> list[dict[str, Any]]:
    answer = httpx.get(f"{gateway.url}/gateway/streams/conv/approvals")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["approvals"]
    return found


def pending_on(gateway: GatewayProcess) -> dict[str, Any]:
    wait_until(lambda: any(a["status"] == "pending" for a in approvals(gateway)), 20)
    return next(a for a in approvals(gateway) if a["status"] == "pending")


def kill(gateway: GatewayProcess) -> None:
    os.kill(gateway.proc.pid, signal.SIGKILL)
    gateway.proc.wait()


def finished(gateway: GatewayProcess, run_id: str) -> bool:
    return bool(httpx.get(f"{gateway.url}/gateway/runs/{run_id}").json()["status"] == "finished")


def decide(gateway: GatewayProcess, approval: dict[str, Any]) -> httpx.Response:
    body = {"decision": "approve", "args_hash": approval["args_hash"]}
    return httpx.post(
        f"{gateway.url}/gateway/approvals/{approval['approval_id']}/decision", json=body
    )


def test_a_pending_approval_survives_a_killed_gateway(pg_url: str, tmp_path: Path) -> None:
    with goose_behind_gate() as (fake, _, goose_url):
        args = (pg_url, goose_url, fake.secret_key)
        with gateway_process(MODULE, *args, tmp=tmp_path, name="1") as first:
            run_id = start_run(first)
            asked = pending_on(first)
            kill(first)
        with gateway_process(MODULE, *args, tmp=tmp_path, name="2") as second:
            still = pending_on(second)
            assert still["approval_id"] == asked["approval_id"]
            assert decide(second, still).status_code == 200
            wait_until(lambda: finished(second, run_id), 30)
            after = approvals(second)[0]
        assert confirmations(fake) == [("call_approve_1", "allow_once")]
        assert after["status"] == "approved"
        assert after["delivered_at"] is not None


def test_a_decided_but_undelivered_answer_survives_a_killed_gateway(
    pg_url: str, tmp_path: Path
) -> None:
    with goose_behind_gate() as (fake, gate, goose_url):
        args = (pg_url, goose_url, fake.secret_key)
        with gateway_process(MODULE, *args, tmp=tmp_path, name="1") as first:
            run_id = start_run(first)
            asked = pending_on(first)
            gate.refusing = True
            assert decide(first, asked).status_code == 200
            # the sending was tried, and turned away: the answer is owed
            wait_until(lambda: gate.refused >= 1, 10)
            kill(first)
        assert confirmations(fake) == []
        gate.refusing = False
        with gateway_process(MODULE, *args, tmp=tmp_path, name="2") as second:
            wait_until(lambda: finished(second, run_id), 40)
            after = approvals(second)[0]
        assert confirmations(fake) == [("call_approve_1", "allow_once")]
        assert (after["status"], after["approval_id"]) == ("approved", asked["approval_id"])
        assert after["delivered_at"] is not None
