"""The legacy task poll answered from the log asks who is polling, as the Flask app did."""

from __future__ import annotations

import httpx

from gateway_kit import EventLog

from ..waiting import until
from .helpers import assert_error, log_in, strict_gateway, with_clients


def test_the_poll_needs_a_login_and_serves_only_the_owners_task(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    gateway = strict_gateway(log)

    async def body(alice: httpx.AsyncClient, bob: httpx.AsyncClient, nobody: httpx.AsyncClient):
        await log_in(alice, "alice")
        await log_in(bob, "bob")
        started = await alice.post("/api/tasks", json={"conversation_id": "a-1", "message": "hi"})
        task = started.json()["task_id"]
        poll = f"/api/tasks/{task}?from=0"

        async def finished() -> bool:
            answer = await alice.get(poll)
            return answer.status_code == 200 and answer.json()["status"] == "completed"

        await until(finished)
        assert_error(await nobody.get(poll), 401, "unauthenticated")
        theirs = await bob.get(poll)
        assert_error(theirs, 404, "not_found")
        # The same answer as for a task that does not exist: nothing about alice's task leaks.
        assert_error(await bob.get("/api/tasks/no-such-task?from=0"), 404, "not_found")
        assert task not in theirs.text or "no task" in theirs.json()["message"]
        events = (await alice.get(poll)).json()["events"]
        assert events[0]["data"]["text"] == "hi"

    with_clients(gateway, body, count=3)
    log.close()
