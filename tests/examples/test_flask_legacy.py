"""The legacy example app through `Gateway`: the old client flow keeps working at every step.

A legacy client logs in (session cookie), starts a task with ``POST /api/tasks`` and polls
``GET /api/tasks/<id>?from=<next_offset>`` until the task is done. Its answers must look the same
whether the app keeps each task's events in its own deque (step 1: mounted) or writes them to
the log and the gateway answers the poll (step 2: ``EVENT_LOG``).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import psycopg
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.demo import create_app
from gateway_kit.demo.agent import FAILURE, reply_chunks
from gateway_kit.log.postgres import conninfo
from tests.support.legacy_paths import EXAMPLE_LEGACY
from tests.support.owned_runs import lease_count
from tests.support.postgres import PG_URL

from .legacy_clients import (
    CONVERSATION,
    EXAMPLE,
    Answer,
    log_in,
    poll_until_done,
    start_task,
    transcript,
)


def gateway_over(log: EventLog, *, events_in_log: bool) -> Gateway:
    flask_app = create_app({"TURN_CHUNK_DELAY": 0})
    if events_in_log:
        flask_app.config["EVENT_LOG"] = log
    return Gateway(flask_app, log=log, allow_anonymous=True, **EXAMPLE_LEGACY)


def with_client(gateway: Gateway, body: Callable[[httpx.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            return await body(client)

    return asyncio.run(main())


def legacy_session(gateway: Gateway, message: str) -> tuple[str, list[Answer], list[Answer]]:
    """Log in, run a task to its end; then its answers, and re-polls from 0, 3 and past the end."""

    async def body(client: httpx.AsyncClient) -> tuple[str, list[Answer], list[Answer]]:
        await log_in(client)
        task_id = await start_task(client, message)
        answers = await poll_until_done(client, task_id)
        end = answers[-1]["next_offset"]
        again = []
        for offset in (0, 3, end, end + 5):
            answer = await client.get(f"/api/tasks/{task_id}?from={offset}")
            again.append(answer.json())
        return task_id, answers, again

    result: tuple[str, list[Answer], list[Answer]] = with_client(gateway, body)
    return result


def expected_transcript(message: str, ending: tuple[str, dict[str, Any]]) -> list[Any]:
    chunks = reply_chunks(message)[:1] if ending[0] == "Error" else reply_chunks(message)
    events: list[tuple[str, dict[str, Any]]] = [("Message", {"role": "user", "text": message})]
    events += [("Message", {"role": "assistant", "text": chunk}) for chunk in chunks]
    return [(idx, type, data) for idx, (type, data) in enumerate([*events, ending])]


def shape(answer: Answer) -> tuple[Any, ...]:
    """An answer with its values reduced to their types, times and message ids left out."""
    events = [
        (sorted(e), e["idx"], e["type"], type(e["ts"]).__name__, sorted(e["data"]))
        for e in answer["events"]
    ]
    return (sorted(answer), answer["status"], answer["next_offset"], events)


@pytest.mark.parametrize("events_in_log", [False, True], ids=["deque", "log"])
def test_a_legacy_client_runs_a_task_to_its_end(log: EventLog, events_in_log: bool) -> None:
    message = "hello there"
    task_id, answers, _ = legacy_session(gateway_over(log, events_in_log=events_in_log), message)
    assert transcript(answers) == expected_transcript(message, ("Finish", {"reason": "stop"}))
    assert answers[-1]["status"] == "completed"
    assert all(answer["task_id"] == task_id for answer in answers)
    assert all(answer["status"] == "running" for answer in answers[:-1])
    in_log = log.read(run_id=task_id)
    if events_in_log:
        assert [(e.pos - 1, e.type) for e in in_log] == [(i, t) for i, t, _ in transcript(answers)]
        assert {e.stream for e in in_log} == {CONVERSATION}
        assert lease_count(log) == 0  # the task's thread owned its run until the Finish
    else:
        assert in_log == []


def test_a_task_the_log_cannot_hold_is_refused_before_anything_is_written(log: EventLog) -> None:
    async def body(client: httpx.AsyncClient) -> None:
        await log_in(client)
        answer = await client.post(
            "/api/tasks", json={"conversation_id": "c" * 201, "message": "hello"}
        )
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "bad_request"

    with_client(gateway_over(log, events_in_log=True), body)
    assert log.last_seq() == 0
    assert lease_count(log) == 0


@pytest.mark.parametrize("message", ["hello there", "/fail now"])
def test_poll_answers_keep_their_shape_when_events_move_to_the_log(
    log: EventLog, message: str
) -> None:
    _, deque_answers, deque_again = legacy_session(gateway_over(log, events_in_log=False), message)
    _, log_answers, log_again = legacy_session(gateway_over(log, events_in_log=True), message)
    assert transcript(log_answers) == transcript(deque_answers)
    assert [shape(a) for a in log_again] == [shape(a) for a in deque_again]
    assert shape(log_answers[-1])[:2] == shape(deque_answers[-1])[:2]
    if message.startswith("/fail"):
        assert deque_answers[-1]["status"] == "failed"
        assert deque_answers[-1]["events"][-1]["data"] == {"error": FAILURE}


def test_the_apps_own_routes_keep_working_through_the_gateway(log: EventLog) -> None:
    async def body(client: httpx.AsyncClient) -> None:
        refused = await client.post("/api/tasks", json={"message": "hi"})
        assert refused.status_code == 401
        assert refused.json()["error"] == "login_required"
        wrong = await client.post("/login", json={"username": "demo", "password": "nope"})
        assert wrong.status_code == 401
        index = await client.get("/")
        assert index.status_code == 302
        assert index.headers["location"] == "/conversations/demo"
        page = await client.get("/conversations/demo")
        assert page.status_code == 200 and "new EventSource(" in page.text
        assert "/gateway" in page.text
        form = await client.post(
            "/login", data={"username": "demo", "password": "demo", "next": "/conversations/x"}
        )
        assert form.status_code == 302 and form.headers["location"] == "/conversations/x"
        unknown = await client.get("/api/tasks/no-such-task?from=0")
        assert unknown.status_code == 404

    with_client(gateway_over(log, events_in_log=True), body)


def test_the_task_events_are_the_conversations_stream_in_the_gateway(log: EventLog) -> None:
    async def body(client: httpx.AsyncClient) -> None:
        await log_in(client)
        task_id = await start_task(client, "hi")
        await poll_until_done(client, task_id)
        page = await client.get(
            f"/gateway/streams/{CONVERSATION}/events", headers={"accept": "application/json"}
        )
        assert page.status_code == 200
        events = page.json()["events"]
        assert [e["type"] for e in events][-1] == "Finish"
        assert {e["run_id"] for e in events} == {task_id}
        assert events[0]["data"]["text"] == "hi"

    with_client(gateway_over(log, events_in_log=True), body)


def test_the_examples_gateway_module_serves_the_legacy_flow(
    log_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KIT_DB", log_url)
    spec = importlib.util.spec_from_file_location("flask_legacy_gateway", EXAMPLE / "gateway.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    gateway: Gateway = module.app
    module.flask_app.config["TURN_CHUNK_DELAY"] = 0
    try:
        task_id, answers, _ = legacy_session(gateway, "from the example")
        assert answers[-1]["status"] == "completed"
        assert [e.type for e in module.log.read(run_id=task_id)][-1] == "Finish"
    finally:
        module.log.close()


def test_a_task_is_polled_and_followed_while_an_older_transaction_holds_its_events_back(
    pg_url: str,
) -> None:
    """On PostgreSQL a reader by cursor is not given events while an older transaction runs
    anywhere on the server; the task still exists for its poll and its run stream."""
    log = EventLog(pg_url)

    async def body(client: httpx.AsyncClient) -> None:
        await log_in(client)
        with psycopg.connect(conninfo(PG_URL), autocommit=False) as other:
            other.execute("SELECT pg_current_xact_id()")  # a transaction with an id, open
            task_id = await start_task(client, "hello there")
            poll = await client.get(f"/api/tasks/{task_id}", params={"from": 0})
            assert poll.status_code == 200, poll.text
            assert poll.json() == {
                "task_id": task_id, "status": "running", "events": [], "next_offset": 0
            }  # fmt: skip
            page = await client.get(
                f"/gateway/runs/{task_id}/events", headers={"accept": "application/json"}
            )
            assert page.status_code == 200, page.text
            assert page.json()["events"] == []
            other.rollback()
        answers = await poll_until_done(client, task_id)
        assert transcript(answers) == expected_transcript(
            "hello there", ("Finish", {"reason": "stop"})
        )

    try:
        with_client(gateway_over(log, events_in_log=True), body)
    finally:
        log.close()
