"""A small Flask app in the legacy style: the "before" that adopts gateway_kit.

- ``POST /login`` (form or JSON ``{"username", "password"}``) keeps the user in the Flask
  session cookie; ``GET /login`` is the form, ``POST /logout`` forgets the user.
- ``POST /api/tasks`` with ``{"conversation_id", "message"}`` starts a fake agent turn in a
  background thread and answers ``{"task_id", "conversation_id", "status": "running"}``.
- ``GET /api/tasks/<task_id>?from=<idx>`` is the poll: see `gateway_kit.demo.tasks`.
- ``GET /conversations/<conversation_id>`` is a page showing the conversation's live events,
  read with `EventSource` from the gateway (``/gateway/streams/<conversation_id>/events``). It
  starts legacy tasks, and goose runs through the gateway
  (``POST /gateway/streams/<conversation_id>/runs``, ``POST /gateway/runs/<run_id>/cancel``).

The switch: ``app.config["EVENT_LOG"]``. None (the default) keeps each task's events in its own
deque, as the legacy server did. An `EventLog` sends every event to the log instead, each task
a run this process owns (`gateway_kit.owned_run`), ended with an ``Error`` by the gateway if the
process dies mid-task; the gateway wrapping the app then answers the poll from the log, in the
same shape.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, jsonify, redirect, request, session, url_for
from flask.typing import ResponseReturnValue

from ..exceptions import InvalidEvent, LogClosed, RunError
from ..runs.owned import DEFAULT_LEASE_TTL
from .agent import new_message_id, run_turn
from .tasks import EventWriter, TaskStore, task_events

logger = logging.getLogger("gateway_kit.demo")

DEFAULT_USERS = {"demo": "demo"}
DEFAULT_CONVERSATION = "demo"
CHUNK_DELAY = 0.15  # seconds between reply chunks, so the page shows the reply arriving
SECRET_KEY_VAR = "GATEWAY_KIT_DEMO_SECRET_KEY"
# Every worker process must sign cookies with the same key, so the fallback is a constant.
DEMO_SECRET_KEY = "gateway-kit-demo-only-this-key-is-not-secret"
TASKS_EXTENSION = "gateway_kit_demo_tasks"

LOGIN_REQUIRED = "log in first: POST /login with a username and password"
BAD_CREDENTIALS = "wrong username or password"
NO_SUCH_TASK = "no task {task_id} of yours"
BAD_TASK = 'send JSON {"conversation_id": "...", "message": "..."} with a non-empty message'
BAD_OFFSET = "from must be a non-negative integer index, got {value!r}"


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app; `config` goes into ``app.config`` (``EVENT_LOG``, ``DEMO_USERS``, ...)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=os.environ.get(SECRET_KEY_VAR) or DEMO_SECRET_KEY,
        EVENT_LOG=None,  # an EventLog moves every task event from the deques to the log
        DEMO_USERS=dict(DEFAULT_USERS),
        TURN_CHUNK_DELAY=CHUNK_DELAY,
        # With EVENT_LOG, how long a task outlives its process before the gateway ends it.
        TASK_LEASE_TTL=DEFAULT_LEASE_TTL,
    )
    app.config.update(config or {})
    app.extensions[TASKS_EXTENSION] = TaskStore()
    register_pages(app)
    register_auth(app)
    register_tasks(app)
    return app


def error(status: int, code: str, message: str) -> ResponseReturnValue:
    return jsonify(error=code, message=message), status


def current_user() -> str | None:
    user = session.get("username")
    return user if isinstance(user, str) else None


def register_pages(app: Flask) -> None:
    @app.get("/")
    def index() -> ResponseReturnValue:
        return redirect(url_for("conversation_page", conversation_id=DEFAULT_CONVERSATION))

    @app.get("/conversations/<conversation_id>")
    def conversation_page(conversation_id: str) -> Response:
        return app.send_static_file("conversation.html")


def register_auth(app: Flask) -> None:
    @app.get("/login")
    def login_form() -> Response:
        return app.send_static_file("login.html")

    @app.post("/login")
    def login() -> ResponseReturnValue:
        body = request.get_json(silent=True) if request.is_json else request.form
        body = body if isinstance(body, Mapping) else {}
        username, password = body.get("username"), body.get("password")
        users = app.config["DEMO_USERS"]
        ok = isinstance(username, str) and users.get(username) == password
        if request.is_json:
            if not ok:
                return error(401, "bad_credentials", BAD_CREDENTIALS)
            session["username"] = username
            return jsonify(username=username)
        target = local_path(body.get("next"))
        if not ok:
            return redirect(url_for("login_form", error=1, next=target))
        session["username"] = username
        return redirect(target)

    @app.post("/logout")
    def logout() -> ResponseReturnValue:
        session.pop("username", None)
        return jsonify(ok=True)


def local_path(value: object) -> str:
    """`value` when it is a path on this site, else "/": never redirect elsewhere."""
    if isinstance(value, str) and value.startswith("/") and not value.startswith("//"):
        return value
    return "/"


def register_tasks(app: Flask) -> None:
    store: TaskStore = app.extensions[TASKS_EXTENSION]

    @app.post("/api/tasks")
    def start_task() -> ResponseReturnValue:
        user = current_user()
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        body = request.get_json(silent=True)
        body = body if isinstance(body, dict) else {}
        message = body.get("message")
        conversation_id = body.get("conversation_id") or DEFAULT_CONVERSATION
        if (
            not isinstance(message, str)
            or not message.strip()
            or not isinstance(conversation_id, str)
        ):
            return error(400, "bad_request", BAD_TASK)
        task = store.create(conversation_id, owner=user)
        try:
            with contextlib.ExitStack() as stack:
                events = task_events(
                    task, store, app.config["EVENT_LOG"], lease_ttl=app.config["TASK_LEASE_TTL"]
                )
                stack.enter_context(events.held)
                # Written before answering, so the task has its first event by the time
                # anyone polls.
                events.write(
                    "Message", {"role": "user", "message_id": new_message_id(), "text": message}
                )
                held = stack.pop_all()  # from here on, the turn's thread ends the task
        except InvalidEvent as exc:  # a conversation id or message the log cannot hold
            return error(400, "bad_request", str(exc))
        threading.Thread(
            target=run_task,
            args=(events.write, held, message),
            kwargs={"chunk_delay": app.config["TURN_CHUNK_DELAY"]},
            name=f"task-{task.task_id}",
            daemon=True,
        ).start()
        return jsonify(task_id=task.task_id, conversation_id=conversation_id, status="running")

    @app.get("/api/tasks/<task_id>")
    def poll_task(task_id: str) -> ResponseReturnValue:
        # Behind the gateway with EVENT_LOG set, the gateway answers this from the log; a
        # request still reaching here is for a task the log does not hold.
        user = current_user()
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        task = store.get(task_id)
        if task is None or task.owner != user or app.config["EVENT_LOG"] is not None:
            return error(404, "not_found", NO_SUCH_TASK.format(task_id=task_id))
        value = request.args.get("from", "0").strip() or "0"
        if not (value.isascii() and value.isdigit()):
            return error(400, "invalid_cursor", BAD_OFFSET.format(value=value))
        return jsonify(store.poll(task, int(value)))


def run_task(
    write: EventWriter, held: contextlib.ExitStack, message: str, *, chunk_delay: float
) -> None:
    """A task's turn, in its own thread; `held` ends the task when the turn returns."""
    try:
        with held:
            run_turn(write, message, chunk_delay=chunk_delay)
    except LogClosed:
        # The server is stopping: the task's lease runs out, and the gateway ends the task
        # with an Error once it runs again.
        logger.info("a task was cut short: the event log was closed")
    except RunError as exc:
        logger.warning("a task could not end: %s", exc)
