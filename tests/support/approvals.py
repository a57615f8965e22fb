"""A gateway whose goose asks for approvals, and the waits its tests share."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from gateway_kit import Gateway
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session
from tests.support.waiting import until

TOOL = "developer__shell"
ARGUMENTS = {"command": "rm -rf build/"}
CONFIRMATIONS = "/action-required/tool-confirmation"


def asking_turn(*, call_id: str = "call_approve_1", result: str = "removed") -> Turn:
    """A turn that asks to run `TOOL` and waits for the answer, then says it is done."""
    return Turn().confirm_tool(TOOL, ARGUMENTS, result=result, call_id=call_id).text("done")


async def start_asking_run(
    client: httpx.AsyncClient, fake: FakeGoose, gateway: Gateway, *turns: Turn
) -> tuple[str, str]:
    """Start a run on stream "conv" whose goose asks for approval; (run id, session id)."""
    session_id = bound_session(fake, gateway, *(turns or (asking_turn(),)))
    started = await client.post("/gateway/streams/conv/runs", json={"message": "clean up"})
    assert started.status_code == 200, started.text
    return started.json()["run_id"], session_id


async def listed(client: httpx.AsyncClient, stream: str = "conv") -> list[dict[str, Any]]:
    answer = await client.get(f"/gateway/streams/{stream}/approvals")
    assert answer.status_code == 200, answer.text
    approvals: list[dict[str, Any]] = answer.json()["approvals"]
    return approvals


async def pending_approval(client: httpx.AsyncClient, stream: str = "conv") -> dict[str, Any]:
    """The stream's first pending approval, once there is one."""
    found: list[dict[str, Any]] = []

    async def some() -> bool:
        found[:] = [a for a in await listed(client, stream) if a["status"] == "pending"]
        return bool(found)

    await until(some, 10, failure=lambda: "no pending approval appeared")
    return found[0]


def confirmations(fake: FakeGoose) -> list[tuple[str, str]]:
    """(tool request id, action) of every confirmation goose was sent."""
    return [(call.id, call.action) for call in fake.confirmation_calls]


async def decide(
    client: httpx.AsyncClient,
    approval: dict[str, Any],
    decision: str = "approve",
    **body: Any,
) -> httpx.Response:
    document = {"decision": decision, "args_hash": approval["args_hash"], **body}
    return await client.post(
        f"/gateway/approvals/{approval['approval_id']}/decision", json=document
    )


def in_loop(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """A coroutine test run on a loop of its own (pytest passes the fixtures through)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run
