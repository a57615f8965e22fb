"""The legacy task poll answered from the log asks who is polling, as the Flask app did."""

from __future__ import annotations

import httpx

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from tests.support.flask_site import assert_error, log_in, strict_gateway, with_clients
from tests.support.waiting import until


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


def test_a_task_into_another_users_conversation_is_a_404_and_writes_nothing(
    sqlite_url: str,
) -> None:
    log = EventLog(sqlite_url)
    gateway = strict_gateway(log)
    # Written by an older app that declared no owner: nobody takes it by writing to it.
    log.append("legacy-conv", "Message", {"text": "someone's history"})

    async def body(alice: httpx.AsyncClient, bob: httpx.AsyncClient) -> None:
        await log_in(alice, "alice")
        await log_in(bob, "bob")
        started = await alice.post("/api/tasks", json={"conversation_id": "a-1", "message": "hi"})
        assert started.status_code == 200, started.text
        head = log.last_seq()
        for conversation in ("a-1", "legacy-conv"):
            answer = await bob.post(
                "/api/tasks", json={"conversation_id": conversation, "message": "mine now"}
            )
            assert_error(answer, 404, "not_found")
        assert_error(
            await alice.post("/api/tasks", json={"conversation_id": "legacy-conv", "message": "x"}),
            404,
            "not_found",
        )
        await until(lambda: log.run_end(started.json()["task_id"]) is not None)
        assert all(e.data.get("text") != "mine now" for e in log.read(head))
        assert [e.seq for e in log.read(stream="legacy-conv")] == [1]
        assert StreamOwners(log).owner("legacy-conv") is None

    with_clients(gateway, body, count=2)
    log.close()
