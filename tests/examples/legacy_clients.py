"""The legacy clients of the example apps, as their users ran them: the task poller (log in,
start a task, poll it from `next_offset` until it is done) and a Socket.IO connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import httpx
import socketio

from tests.support.waiting import until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flask_legacy"
CONVERSATION = "conv-legacy"
POLL_TIMEOUT = 10.0
POLL_PAUSE = 0.01  # a legacy client polls again this long after an answer
Answer = dict[str, Any]


async def log_in(client: httpx.AsyncClient) -> None:
    answer = await client.post("/login", json={"username": "demo", "password": "demo"})
    assert answer.status_code == 200, answer.text


async def start_task(client: httpx.AsyncClient, message: str) -> str:
    answer = await client.post(
        "/api/tasks", json={"conversation_id": CONVERSATION, "message": message}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["conversation_id"] == CONVERSATION and body["status"] == "running"
    task_id: str = body["task_id"]
    return task_id


async def poll_until_done(client: httpx.AsyncClient, task_id: str) -> list[Answer]:
    """What a legacy client does: poll from `next_offset` until the status is not running."""
    answers: list[Answer] = []

    async def done() -> bool:
        offset = answers[-1]["next_offset"] if answers else 0
        answer = await client.get(f"/api/tasks/{task_id}", params={"from": offset})
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        return bool(answers[-1]["status"] != "running")

    failure = f"task {task_id} still running after {POLL_TIMEOUT} s"
    await until(done, POLL_TIMEOUT, interval=POLL_PAUSE, failure=lambda: failure)
    return answers


def transcript(answers: list[Answer]) -> list[tuple[int, str, dict[str, Any]]]:
    """Every event handed to the client: (idx, type, data without the random message id)."""
    return [
        (e["idx"], e["type"], {k: v for k, v in e["data"].items() if k != "message_id"})
        for answer in answers
        for e in answer["events"]
    ]


async def connect(
    base: str, path: str, auth: Any, cookies: httpx.Cookies | None, transport: str = "websocket"
) -> str | None:
    """Connect a Socket.IO client; None when it connected, else the refusal it was told."""
    async with aiohttp.ClientSession() as session:  # closed here, long-polling's pool too
        return await _connect(session, base, path, auth, cookies, transport)


async def _connect(
    session: aiohttp.ClientSession,
    base: str,
    path: str,
    auth: Any,
    cookies: httpx.Cookies | None,
    transport: str,
) -> str | None:
    client = socketio.AsyncClient(reconnection=False, http_session=session)
    refusals: list[Any] = []
    client.on("connect_error", refusals.append)
    cookie = "; ".join(f"{k}={v}" for k, v in (cookies or {}).items())
    try:
        await client.connect(
            base,
            socketio_path=path,
            auth=auth,
            headers={"cookie": cookie} if cookie else {},
            transports=[transport],
            wait_timeout=10,
        )
    except socketio.exceptions.ConnectionError as exc:
        reason = refusals[-1] if refusals else exc
        return str(reason.get("message") if isinstance(reason, dict) else reason)
    await client.disconnect()
    return None
