"""A small legacy Flask app of the adoption test's own, and the unmodified client of it.

The app is the README's starting point, written from scratch: a cookie login that keeps the user
in ``session[USER_KEY]`` (not Flask's usual ``username``), ``POST /api/tasks`` running an agent
turn in a thread that appends to the task's deque in process memory, and the poll
``GET /api/tasks/<task_id>?from=<idx>``. Given a log, it does what the README's step 2 says
instead: the conversation's owner is declared before its first event, and the turn appends to
the log, either with `log.append` (the README's snippet) or through an `owned_run` opened in
the request and handed to the turn's thread (its "Runs your app writes itself"). Its own poll
route stays, counting the requests that still reach it.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from flask import Flask, abort, request, session

from gateway_kit import EventLog, RunError, StreamOwners, owned_run

USER_KEY = "user_id"
USERS = {"alice": "wonderland", "bob": "the-builder"}
REPLY = ["Hel", "lo, ", "world"]
FINISH_DATA = {"reason": "stop"}
STATUS_BY_TERMINAL = {"Finish": "completed", "Error": "failed"}
GATE_TIMEOUT = 10.0
MAX_POLLS = 1000
POLL_INTERVAL = 0.01  # the old clients poll every 250 ms; a faster loop keeps the test short

Answer = dict[str, Any]
Send = Callable[[str, dict[str, Any]], object]
APPEND = "append"
OWNED_RUN = "owned_run"


@dataclass
class Task:
    task_id: str
    conversation_id: str
    owner: str | None
    events: deque[dict[str, Any]] = field(default_factory=deque)
    terminal: tuple[int, str] | None = None
    # The turn holds its reply after the first chunk until the test opens this.
    gate: threading.Event = field(default_factory=threading.Event)


@dataclass
class LegacyApp:
    """The Flask app and what the test looks at in its memory."""

    flask: Flask
    tasks: dict[str, Task]
    poll_hits: list[str]  # task ids whose poll reached the app's own route

    def release(self, task_id: str) -> None:
        self.tasks[task_id].gate.set()


def legacy_app(
    conversations: dict[str, str],
    log: EventLog | None = None,
    *,
    user_key: str | None = USER_KEY,
    writes: str = APPEND,
) -> LegacyApp:
    """The app; `conversations` (conversation id: owner) are its own records, which outlive
    the process as a database of its own would, and `log` moves its event writes to the log
    (`writes`: `APPEND` or `OWNED_RUN`). Without a `user_key` the app has no login at all."""
    flask_app = Flask("adoption_legacy_app")
    if user_key is not None:
        flask_app.config["SECRET_KEY"] = "the legacy app's own secret"
    tasks: dict[str, Task] = {}
    poll_hits: list[str] = []
    lock = threading.Lock()
    owners = StreamOwners(log) if log is not None else None

    # Step 2 of the README, as written there.
    def start_task(task: Task, user: str) -> None:
        assert owners is not None
        if owners.declare(task.conversation_id, user) != user:  # the first declaration stands
            abort(404)  # another user's conversation

    # "Runs your app writes itself", as the README writes it.
    def start_owned_task(task: Task, user: str | None, message: str) -> None:
        assert log is not None
        with contextlib.ExitStack() as stack:
            try:
                run = stack.enter_context(
                    owned_run(log, stream=task.conversation_id, run_id=task.task_id, owner=user)
                )
            except RunError:
                abort(404)  # another user's conversation
            run.append("Message", {"role": "user", "text": message})
            held = stack.pop_all()  # from here on, the thread's to close
        threading.Thread(target=turn, args=(task, run.append, held), daemon=True).start()

    def sender(task: Task) -> Send:
        def send(event_type: str, data: dict[str, Any]) -> None:
            if log is not None:
                log.append(
                    stream=task.conversation_id, type=event_type, data=data, run_id=task.task_id
                )
                return
            with lock:
                idx = len(task.events)
                task.events.append(
                    {"idx": idx, "type": event_type, "data": data, "ts": time.time()}
                )
                if task.terminal is None and event_type in STATUS_BY_TERMINAL:
                    task.terminal = (idx, event_type)

        return send

    def turn(task: Task, send: Send, held: contextlib.AbstractContextManager[Any]) -> None:
        with held:
            reply(task, send)

    def reply(task: Task, send: Send) -> None:
        send("Message", {"role": "assistant", "text": REPLY[0]})
        task.gate.wait(GATE_TIMEOUT)
        for chunk in REPLY[1:]:
            send("Message", {"role": "assistant", "text": chunk})
        send("Finish", FINISH_DATA)

    @flask_app.post("/login")
    def login() -> Answer:
        user = request.form.get("username", "")
        if USERS.get(user) != request.form.get("password"):
            abort(401)
        if user_key is None:
            abort(404)
        session[user_key] = user
        return {"user": user}

    @flask_app.post("/api/tasks")
    def create_task() -> Answer:
        user = session.get(user_key) if user_key is not None else None
        if user_key is not None and not user:
            abort(401)
        body = request.get_json()
        conversation_id, message = body["conversation_id"], body["message"]
        with lock:
            if user and conversations.setdefault(conversation_id, user) != user:
                abort(404)  # the app's own records: another user's conversation
        task = Task(uuid.uuid4().hex, conversation_id, user)
        if log is not None and writes == OWNED_RUN:
            start_owned_task(task, user, message)
        else:
            if owners is not None and user:
                start_task(task, user)
            send = sender(task)
            send("Message", {"role": "user", "text": message})  # before the id is handed out
            held = contextlib.nullcontext()
            threading.Thread(target=turn, args=(task, send, held), daemon=True).start()
        tasks[task.task_id] = task
        return {"task_id": task.task_id, "conversation_id": conversation_id, "status": "running"}

    @flask_app.get("/api/tasks/<task_id>")
    def poll(task_id: str) -> Answer:
        poll_hits.append(task_id)
        task = tasks.get(task_id)
        if task is None or (user_key is not None and task.owner != session.get(user_key)):
            abort(404)
        offset = int(request.args.get("from", "0"))
        with lock:
            events = [dict(e) for e in task.events if e["idx"] >= offset]
            terminal = task.terminal
        next_offset = events[-1]["idx"] + 1 if events else offset
        status = "running"
        if terminal is not None and terminal[0] < next_offset:
            status = STATUS_BY_TERMINAL[terminal[1]]
        return {"task_id": task_id, "status": status, "events": events, "next_offset": next_offset}

    return LegacyApp(flask_app, tasks, poll_hits)


def log_in(client: httpx.Client, user: str) -> None:
    answer = client.post("/login", data={"username": user, "password": USERS[user]})
    assert answer.status_code == 200, answer.text


def legacy_client(
    client: httpx.Client,
    user: str | None,
    conversation_id: str,
    message: str,
    *,
    after_first_poll: Callable[[str], None],
) -> tuple[str, list[Answer]]:
    """What an old client does: log in (unless `user` is None), start a task, poll from
    `next_offset` until the task is no longer running; the task id and every answer.
    `after_first_poll(task_id)` lets the test act between the first poll and the next (it
    sends nothing)."""
    if user is not None:
        log_in(client, user)
    started = client.post(
        "/api/tasks", json={"conversation_id": conversation_id, "message": message}
    )
    assert started.status_code == 200, started.text
    task_id: str = started.json()["task_id"]
    answers: list[Answer] = []
    offset = 0
    for _ in range(MAX_POLLS):
        answer = client.get(f"/api/tasks/{task_id}", params={"from": offset})
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        if len(answers) == 1:
            after_first_poll(task_id)
        offset = answers[-1]["next_offset"]
        if answers[-1]["status"] != "running":
            return task_id, answers
        time.sleep(POLL_INTERVAL)
    raise AssertionError(f"task {task_id} still running after {MAX_POLLS} polls")
