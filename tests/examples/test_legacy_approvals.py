"""Tool approvals of the legacy app, before and after the gateway owns them.

Before: the example app keeps them in process memory (`gateway_kit.demo.approvals`). A restart
loses the pending one and the task waiting for it gets ``approval_missing``; of two answers
the first wins and neither is recorded.

After: goose asks through the gateway, which keeps the approval in its database. A new gateway
on the same database (a restart) still has it pending, listed at the legacy path in the legacy
shape as well as by the gateway's own route; and a legacy Socket.IO client gets
``tool_approval_required`` and then ``tool_approval_resolved`` as it always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import socketio

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream, LegacySurfaces
from gateway_kit.demo import create_app
from gateway_kit.demo.app import APPROVALS_EXTENSION
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.testing import FakeGoose, Turn, asgi_client
from tests.support.legacy_paths import EXAMPLE_LEGACY
from tests.support.serving import serve_in_thread
from tests.support.upstream import FAST
from tests.support.waiting import until, wait_until

from .legacy_clients import CONVERSATION, log_in, poll_until_done, start_task

SECRET = "the-key-every-process-of-the-app-shares"
STREAM = "conv"
ARGUMENTS = {"command": "ls"}
# What goose 1.41 sends in approve mode, and then waits: one `Message` with one item.
CONFIRMATION = {
    "role": "assistant",
    "content": [
        {
            "type": "actionRequired",
            "data": {
                "actionType": "toolConfirmation",
                "id": "call_1",
                "toolName": "shell",
                "arguments": ARGUMENTS,
                "prompt": None,
            },
        }
    ],
    "metadata": {"userVisible": True, "agentVisible": True},
}
WAIT = 15.0
Events = list[dict[str, Any]]


def asks_for_approval(_message: Any) -> Turn:
    """Every turn: goose asks to run the tool, then waits."""
    return Turn().message(CONFIRMATION).hang()


def legacy_app(log: EventLog) -> Any:
    """The example app writing its tasks to `log`; every process signs cookies alike."""
    app = create_app({"TURN_CHUNK_DELAY": 0, "SECRET_KEY": SECRET})
    app.config["EVENT_LOG"] = log
    return app


def task_events(answers: list[dict[str, Any]], type: str) -> Events:
    return [e["data"] for answer in answers for e in answer["events"] if e["type"] == type]


async def until_polled(client: httpx.AsyncClient, task_id: str, type: str) -> dict[str, Any]:
    """The data of the task's first event of `type`, polling as a legacy client does."""
    found: Events = []

    async def seen() -> bool:
        answer = await client.get(f"/api/tasks/{task_id}", params={"from": 0})
        found[:] = task_events([answer.json()], type)
        return bool(found)

    await until(seen, WAIT)
    return found[0]


# --- before: in the app's memory


def test_before_a_restart_loses_the_pending_approval_and_the_task_gets_approval_missing(
    sqlite_url: str,
) -> None:
    """The app's events are in the log already (step 2 of adopting gateway_kit); its approvals
    are still in its memory, and the gateway leaves their path to the app."""

    async def main() -> None:
        first_log, second_log = EventLog(sqlite_url), EventLog(sqlite_url)
        first_app = legacy_app(first_log)
        first = Gateway(first_app, log=first_log, legacy=LegacySurfaces(tasks="/api/tasks"))
        try:
            transport = httpx.ASGITransport(app=first)
            async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as c:
                await log_in(c)
                task_id = await start_task(c, "/confirm shell ls")
                asked = await until_polled(c, task_id, "tool_approval_required")
                listed = (await c.get("/api/plan-approvals/pending")).json()
                cookies = c.cookies
            assert asked["tool_name"] == "shell" and asked["arguments"] == ARGUMENTS
            assert [item["id"] for item in listed["approvals"]] == [asked["approval_id"]]
            assert listed["approvals"][0]["username"] == "demo"

            # A restart: the old process's memory goes, a new process's app starts empty.
            first_app.extensions[APPROVALS_EXTENSION].forget_all()
            second = Gateway(
                legacy_app(second_log), log=second_log, legacy=LegacySurfaces(tasks="/api/tasks")
            )
            transport = httpx.ASGITransport(app=second)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://app.test", cookies=cookies
            ) as c:
                listed = (await c.get("/api/plan-approvals/pending")).json()
                answer = await c.post(
                    f"/api/tool-approvals/{asked['approval_id']}", json={"approved": True}
                )
                answers = await poll_until_done(c, task_id)
        finally:
            first_log.close()
            second_log.close()

        assert listed == {"success": True, "approvals": []}
        assert answer.status_code == 404 and answer.json()["error"] == "approval_missing"
        (resolved,) = task_events(answers, "tool_approval_resolved")
        assert resolved == {
            "approval_id": asked["approval_id"],
            "id": asked["approval_id"],
            "conversation_id": CONVERSATION,
            "approved": False,
            "status": "approval_missing",
            "decided_by": None,
            "reason": None,
        }
        said = "".join(m["text"] for m in task_events(answers, "Message")[1:])
        assert said == "I did not run shell: approval_missing."
        assert answers[-1]["status"] == "completed"

    asyncio.run(main())


def test_before_the_first_answer_wins_and_nobody_is_recorded() -> None:
    app = create_app({"TURN_CHUNK_DELAY": 0})  # the legacy app alone, its tasks in deques
    with app.test_client() as tab:
        tab.post("/login", json={"username": "demo", "password": "demo"})
        started = tab.post(
            "/api/tasks", json={"conversation_id": CONVERSATION, "message": "/confirm shell ls"}
        ).get_json()
        task_id = started["task_id"]

        def asked() -> list[dict[str, Any]]:
            events = tab.get(f"/api/tasks/{task_id}?from=0").get_json()["events"]
            return [e["data"] for e in events if e["type"] == "tool_approval_required"]

        wait_until(asked, 5)
        approval_id = asked()[0]["approval_id"]
        # Two tabs of the user answer: the first wins, the second is dropped.
        first = tab.post(f"/api/tool-approvals/{approval_id}", json={"approved": False})
        second = tab.post(f"/api/tool-approvals/{approval_id}", json={"approved": True})
        # Dropped either way: 409 while the request is in the dict, 404 once the task took it.
        assert first.status_code == 200 and second.status_code in (404, 409)

        def polled() -> Any:
            return tab.get(f"/api/tasks/{task_id}?from=0").get_json()

        wait_until(lambda: polled()["status"] != "running", 5)
        answer = polled()
    (resolved,) = [e["data"] for e in answer["events"] if e["type"] == "tool_approval_resolved"]
    assert (resolved["approved"], resolved["status"]) == (False, "rejected")
    assert resolved["decided_by"] is None  # who answered is recorded nowhere


# --- after: the gateway's durable approvals


@asynccontextmanager
async def gateway_over(
    log_url: str, fake: FakeGoose, **options: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Gateway]]:
    """A gateway process on `log_url` (its own log object, as a new process has), its goose
    `fake`, served with its lifespan."""
    with EventLog(log_url) as log:
        upstream = GooseUpstream(secret_key=fake.secret_key, client=fake.client())
        gateway = Gateway(
            log=log,
            upstream=upstream,
            settings=GatewaySettings(pumps=FAST),
            load_entry_points=False,
            **{**EXAMPLE_LEGACY, **options},
        )
        async with asgi_client(gateway) as client:
            yield client, gateway


async def gateway_approvals(client: httpx.AsyncClient, headers: dict[str, str]) -> Events:
    answer = await client.get(f"/gateway/streams/{STREAM}/approvals", headers=headers)
    assert answer.status_code == 200, answer.text
    approvals: Events = answer.json()["approvals"]
    return approvals


def legacy_item(approval: dict[str, Any], username: str) -> dict[str, Any]:
    """What the legacy list shows of a pending approval the gateway shows as `approval`."""
    return {
        "id": approval["approval_id"],
        "approval_id": approval["approval_id"],
        "conversation_id": STREAM,
        "username": username,
        "tool_name": "shell",
        "arguments": ARGUMENTS,
        "prompt": None,
        "status": "pending",
        "created_at": approval["requested_at"],
        "expires_at": approval["expires_at"],
        "claimed_by": approval["claimed_by"],
    }


def alice_token(log_url: str) -> dict[str, str]:
    with EventLog(log_url) as log:
        _, token = ApiTokens(log).create("alice")
    return {"authorization": f"Bearer {token}"}


def test_after_a_restart_the_approval_goose_asked_for_is_still_pending_in_the_legacy_list(
    log_url: str,
) -> None:
    async def main() -> None:
        alice = alice_token(log_url)
        fake = FakeGoose(ping_interval=0.05, default_turn=asks_for_approval)
        async with gateway_over(log_url, fake) as (client, _):
            started = await client.post(
                f"/gateway/streams/{STREAM}/runs", json={"message": "list files"}, headers=alice
            )
            assert started.status_code == 200, started.text
            found: Events = []

            async def asked() -> bool:
                found[:] = await gateway_approvals(client, alice)
                return bool(found)

            await until(asked, WAIT)
        (before,) = found

        # A restart: the gateway process ends, a new one starts on the same database.
        async with gateway_over(log_url, fake) as (client, _):
            legacy = await client.get("/api/plan-approvals/pending", headers=alice)
            of_stream = await client.get(
                "/api/plan-approvals/pending", params={"conversation_id": STREAM}, headers=alice
            )
            of_other = await client.get(
                "/api/plan-approvals/pending", params={"conversation_id": "other"}, headers=alice
            )
            (after,) = await gateway_approvals(client, alice)
            decided = await client.post(
                f"/gateway/approvals/{after['approval_id']}/decision",
                json={"decision": "approve", "args_hash": after["args_hash"]},
                headers=alice,
            )
            emptied = await client.get("/api/plan-approvals/pending", headers=alice)

        assert after == before and after["status"] == "pending"
        assert legacy.status_code == 200, legacy.text
        # alice owns the conversation: her first run there took it.
        expected = {"success": True, "approvals": [legacy_item(after, "alice")]}
        assert legacy.json() == expected
        assert of_stream.json() == expected
        assert of_other.json() == {"success": True, "approvals": []}
        assert decided.status_code == 200, decided.text
        assert decided.json()["approval"]["decided_by"] == "alice"
        assert emptied.json() == {"success": True, "approvals": []}

    asyncio.run(main())


class LegacySocketClient:
    """A legacy client on the legacy Socket.IO path: every message it gets, in order."""

    def __init__(self) -> None:
        self.sio = socketio.AsyncClient(reconnection=False)
        self.received: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()
        for name in ("event", "tool_approval_required", "tool_approval_resolved"):
            self.sio.on(name, self._keeper(name))

    def _keeper(self, name: str) -> Callable[[Any], Any]:
        async def keep(payload: Any) -> None:
            self.received.append((name, payload))
            self.changed.set()

        return keep

    def named(self, name: str) -> list[Any]:
        return [payload for got, payload in self.received if got == name]

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        try:
            async with asyncio.timeout(WAIT):
                while not condition():
                    self.changed.clear()
                    if not condition():
                        await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"not in {WAIT:g} s: {what}; got {self.received}") from None


def test_a_legacy_socketio_client_gets_tool_approval_required_then_resolved(
    sqlite_url: str,
) -> None:
    fake = FakeGoose(ping_interval=0.05, default_turn=asks_for_approval)
    log = EventLog(sqlite_url)
    StreamOwners(log).declare(STREAM, "alice")
    alice = alice_token(sqlite_url)
    upstream = GooseUpstream(secret_key=fake.secret_key, client=fake.client())
    gateway = Gateway(
        log=log,
        upstream=upstream,
        settings=GatewaySettings(pumps=FAST),
        legacy=LegacySurfaces(socketio="/socket.io", socket_token="/api/socket-token"),
        load_entry_points=False,
    )

    async def main(base: str) -> None:
        client = LegacySocketClient()
        async with httpx.AsyncClient(base_url=base, headers=alice) as http:
            # The legacy way in: the old token endpoint, the old path.
            token = (await http.get("/api/socket-token")).json()["token"]
            await client.sio.connect(
                base,
                socketio_path="socket.io",
                auth={"token": token},
                transports=["websocket"],
                wait_timeout=WAIT,
            )
            try:
                ack = await client.sio.call(
                    "subscribe", {"stream": STREAM, "after": 0}, timeout=WAIT
                )
                assert ack == {"ok": True}
                started = await http.post(
                    f"/gateway/streams/{STREAM}/runs", json={"message": "list files"}
                )
                assert started.status_code == 200, started.text
                await client.until(
                    lambda: client.named("tool_approval_required"), "tool_approval_required"
                )
                (required,) = client.named("tool_approval_required")
                decided = await http.post(
                    f"/gateway/approvals/{required['approval_id']}/decision",
                    json={"decision": "approve", "args_hash": required["args_hash"]},
                )
                assert decided.status_code == 200, decided.text
                await client.until(
                    lambda: client.named("tool_approval_resolved"), "tool_approval_resolved"
                )
            finally:
                await client.sio.disconnect()
        approval = decided.json()["approval"]
        assert required == {
            "approval_id": approval["approval_id"],
            "id": approval["approval_id"],
            "conversation_id": STREAM,
            "tool_name": "shell",
            "arguments": ARGUMENTS,
            "prompt": None,
            "args_hash": approval["args_hash"],
            "expires_at": approval["expires_at"],
        }
        assert client.named("tool_approval_resolved") == [
            {
                "approval_id": approval["approval_id"],
                "id": approval["approval_id"],
                "conversation_id": STREAM,
                "approved": True,
                "status": "approved",
                "decided_by": "alice",
                "reason": None,
            }
        ]
        # Each right after the gateway's own event of it.
        names = [
            payload["type"] if name == "event" else name
            for name, payload in client.received
            if name != "event" or payload["type"].startswith("approval_")
        ]
        assert names == [
            "approval_requested",
            "tool_approval_required",
            "approval_decided",
            "tool_approval_resolved",
        ]

    try:
        with serve_in_thread(gateway) as base:
            asyncio.run(main(base))
    finally:
        log.close()
