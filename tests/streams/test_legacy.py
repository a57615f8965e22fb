"""The legacy task poll, answered from the log in the shape the old in-memory deque served."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

import pytest
from flask import Flask, jsonify, request

from gateway_kit import Event, EventLog, Gateway

from ..waiting import settled
from .asgi_driver import Request
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


def poll(app: Gateway, task_id: str, method: str = "GET", path: str = "", **params: str) -> Request:
    """The answer once every event written so far is given to readers by cursor."""
    settled(app.log)

    async def main() -> Request:
        return await Request(app, f"/api/tasks/{task_id}{path}", params=params, method=method).run()

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
    gateway = make_gateway(legacy_flask_app(), legacy_tasks_path=None)
    log.append("conv", "Message", {}, run_id="task-1")
    assert poll(gateway, "task-1").json()["served_by"] == "flask"
