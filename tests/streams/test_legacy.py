"""The legacy task poll, answered from the log in the shape the old in-memory deque served."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

import pytest
from flask import Flask, jsonify, request
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import (
    Event,
    EventLog,
    Gateway,
    LegacySurfaces,
    PolledTask,
    Principal,
    StreamOwners,
    TaskPollShape,
    hookimpl,
)
from tests.support.asgi_driver import Request
from tests.support.waiting import settled

from .conftest import MakeGateway


class OldTaskRecord:
    """What the legacy server kept per task: a deque of events numbered from 0, under a lock."""

    def __init__(self) -> None:
        self.events: deque[dict[str, Any]] = deque(maxlen=20000)
        self.next_event_idx = 0
        self.lock = threading.Lock()

    def append_event(self, type: str, data: dict[str, Any], ts: float) -> None:
        with self.lock:
            self.events.append({"idx": self.next_event_idx, "type": type, "data": data, "ts": ts})
            self.next_event_idx += 1

    def poll(self, offset: int) -> dict[str, Any]:
        with self.lock:
            events = [e for e in self.events if e["idx"] >= offset]
        next_offset = events[-1]["idx"] + 1 if events else offset
        return {"events": events, "next_offset": next_offset}


def legacy_flask_app() -> Flask:
    app = Flask("legacy")

    @app.get("/api/tasks/<task_id>")
    def get_task(task_id: str) -> Any:
        return jsonify(served_by="flask", task_id=task_id, offset=request.args.get("from"))

    @app.post("/api/tasks/<task_id>/cancel")
    def cancel(task_id: str) -> Any:
        return jsonify(cancelled=task_id)

    return app


def poll(
    app: Gateway,
    task_id: str,
    method: str = "GET",
    path: str = "",
    headers: dict[str, str] | None = None,
    **params: str,
) -> Request:
    """The answer once every event written so far is given to readers by cursor."""
    settled(app.log)

    async def main() -> Request:
        target = f"/api/tasks/{task_id}{path}"
        request = Request(app, target, params=params, method=method, headers=headers or {})
        return await request.run()

    return asyncio.run(main())


def record(log: EventLog, old: OldTaskRecord, type: str, data: dict[str, Any]) -> Event:
    event = log.append("conv", type, data, run_id="task-1")
    old.append_event(type, data, event.created_at.timestamp())
    return event


@pytest.mark.parametrize("offset", [0, 1, 3, 4, 5, 9])
def test_the_poll_matches_what_the_old_deque_served(
    log: EventLog, make_gateway: MakeGateway, offset: int
) -> None:
    gateway = make_gateway(legacy_flask_app())
    old = OldTaskRecord()
    record(log, old, "user_message", {"text": "hi"})
    log.append("conv", "Message", {"other": "task"}, run_id="task-2")
    record(log, old, "text_chunk", {"text": "Hel"})
    record(log, old, "text_chunk", {"text": "lo ✓"})
    record(log, old, "task_complete", {"ok": True})
    answer = poll(gateway, "task-1", **{"from": str(offset)}).json()
    expected = old.poll(offset)
    assert answer["events"] == expected["events"]
    assert answer["next_offset"] == expected["next_offset"]
    assert answer["task_id"] == "task-1"


def test_status_is_running_until_the_client_has_the_terminal_event(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(legacy_flask_app())
    log.append("conv", "Message", {}, run_id="task-1")
    assert poll(gateway, "task-1").json()["status"] == "running"
    log.append("conv", "Finish", {}, run_id="task-1")
    assert poll(gateway, "task-1", **{"from": "1"}).json()["status"] == "completed"
    assert poll(gateway, "task-1", **{"from": "2"}).json()["status"] == "completed"
    log.append("conv", "Error", {}, run_id="task-2")
    assert poll(gateway, "task-2").json()["status"] == "failed"


def test_a_task_the_log_does_not_know_goes_to_the_legacy_app(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(legacy_flask_app())
    log.append("conv", "Message", {}, run_id="known")
    answer = poll(gateway, "unknown", **{"from": "2"})
    assert answer.json() == {"served_by": "flask", "task_id": "unknown", "offset": "2"}
    assert poll(gateway, "known", method="POST", path="/cancel").json() == {"cancelled": "known"}


def test_a_bad_offset_is_a_400_json_error(log: EventLog, make_gateway: MakeGateway) -> None:
    gateway = make_gateway(legacy_flask_app())
    log.append("conv", "Message", {}, run_id="task-1")
    answer = poll(gateway, "task-1", **{"from": "-1"})
    assert answer.status == 400
    assert answer.json()["error"] == "invalid_cursor"


def test_the_legacy_path_can_be_left_to_the_app(log: EventLog, make_gateway: MakeGateway) -> None:
    gateway = make_gateway(legacy_flask_app(), legacy=None)
    log.append("conv", "Message", {}, run_id="task-1")
    assert poll(gateway, "task-1").json()["served_by"] == "flask"


def cursor_shape(task: PolledTask) -> dict[str, Any]:
    """An app's own poll shape: ``?cursor=``, its own keys and words."""
    return {
        "job": task.task_id,
        "phase": {"completed": "over", "failed": "broken"}.get(task.status, "busy"),
        "events": [{"i": e.idx, "what": e.type, "body": e.data, "seq": e.seq} for e in task.events],
        "cursor": task.next_offset,
    }


CURSOR_SHAPE = TaskPollShape(
    answer=cursor_shape,
    offset_param="cursor",
    not_found=lambda task_id: (404, {"missing": task_id}),
    unauthenticated=(403, {"login": "please"}),
)


def test_an_apps_own_shape_is_answered_from_the_same_facts(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(
        legacy_flask_app(), legacy=LegacySurfaces(tasks="/api/tasks", task_shape=CURSOR_SHAPE)
    )
    old = OldTaskRecord()
    record(log, old, "user_message", {"text": "hi"})
    finish = record(log, old, "Finish", {"ok": True})
    answer = poll(gateway, "task-1", cursor="1").json()
    assert answer == {
        "job": "task-1",
        "phase": "over",
        "events": [{"i": 1, "what": "Finish", "body": {"ok": True}, "seq": finish.seq}],
        "cursor": 2,
    }
    assert poll(gateway, "task-1", cursor="2").json()["events"] == []
    unknown = poll(gateway, "task-9", cursor="0")  # the log holds none of it: the app's
    assert unknown.json()["served_by"] == "flask"


def test_an_apps_own_refusals_are_answered_in_its_shape(log: EventLog) -> None:
    log.append("conv", "Message", {}, run_id="task-1")
    StreamOwners(log).declare("conv", "alice")
    gateway = Gateway(
        legacy_flask_app(),
        log=log,
        plugins=[HeaderUser()],
        legacy=LegacySurfaces(tasks="/api/tasks", task_shape=CURSOR_SHAPE),
    )
    nobody = poll(gateway, "task-1", cursor="0")
    assert (nobody.status, nobody.json()) == (403, {"login": "please"})
    bob = poll(gateway, "task-1", headers={"x-user": "bob"}, cursor="0")
    assert (bob.status, bob.json()) == (404, {"missing": "task-1"})
    alice = poll(gateway, "task-1", headers={"x-user": "alice"}, cursor="0")
    assert alice.status == 200 and alice.json()["phase"] == "busy"


class HeaderUser:
    __name__ = "header-user"

    @hookimpl
    def resolve_principal(self, scope: dict[str, Any]) -> Principal | None:
        user = dict(scope["headers"]).get(b"x-user")
        return None if user is None else Principal(user.decode(), "header")


def test_any_cursor_of_an_apps_own_shape_is_an_answer_or_a_400_json(log: EventLog) -> None:
    log.append("conv", "Finish", {}, run_id="task-1")
    gateway = Gateway(
        legacy_flask_app(),
        log=log,
        allow_anonymous=True,
        legacy=LegacySurfaces(tasks="/api/tasks", task_shape=CURSOR_SHAPE),
    )

    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(
        cursor=st.one_of(st.text(max_size=12), st.integers(-3, 10**6).map(str), st.just("9" * 400)),
        task=st.sampled_from(["task-1", "task-9", "x" * 300, "%00", "a%2Fb"]),
    )
    def check(cursor: str, task: str) -> None:
        # One event loop for every example, as a server has.
        answer = runner.run(Request(gateway, f"/api/tasks/{task}", params={"cursor": cursor}).run())
        assert answer.status < 500, answer.body
        if task != "task-1":
            return  # a task the log does not hold (or no task at all): the app's own answer
        body = answer.json()
        if answer.status == 400:
            assert body["error"] == "invalid_cursor" and "cursor" in body["message"]
        else:
            assert answer.status == 200 and body["job"] == "task-1"

    settled(log)
    with asyncio.Runner() as runner:
        check()
