"""A small Flask app in the legacy style: the "before" that adopts gateway_kit.

- ``POST /login`` (form or JSON ``{"username", "password"}``) keeps the user in the Flask
  session cookie, with a random id of this login and the session's CSRF token (the JSON answer
  carries it, ``GET /api/csrf-token`` too): unsafe requests to the gateway send it back in
  ``X-CSRF-Token``. ``GET /login`` is the form, ``POST /logout`` forgets the user.
- ``POST /api/tasks`` with ``{"conversation_id", "message"}`` starts a fake agent turn in a
  background thread and answers ``{"task_id", "conversation_id", "status": "running"}``. With
  ``RUN_GUARDS`` (a gateway's `run_guards`), the task is held to its finish guards, and a veto
  gets a follow-up turn (``/publish NAME``: see `gateway_kit.demo.agent`).
- ``GET /api/tasks/<task_id>?from=<idx>`` is the poll: see `gateway_kit.demo.tasks`.
- Tool approvals, the legacy way (`gateway_kit.demo.approvals`): a task of ``/confirm TOOL``
  waits for ``POST /api/tool-approvals/<id>`` with ``{"approved": true|false}``;
  ``GET /api/plan-approvals/pending[?conversation_id=C]`` lists the user's pending ones, as
  ``{"success": true, "approvals": [...]}``. All in process memory: a restart loses them
  (behind the gateway, the list is the gateway's durable approvals, in the same shape).
- ``POST /api/conversations/<conversation_id>/title`` with ``{"title"}`` renames a
  conversation: an event of no run (``TitleChanged``), which every client of the conversation
  gets, REST-only ones too.
- ``GET /api/socket-token`` and ``/socket.io``: the legacy Socket.IO channel, see
  `gateway_kit.demo.legacy_sockets` (issuing a token clears the user's other pending ones;
  behind the gateway, the gateway serves both).
- ``GET /conversations/<conversation_id>`` is a page showing the conversation's live events
  (opening a new one makes the logged-in user its owner, who alone may read it; a
  conversation written with no owner is never taken that way),
  read with `EventSource` from the gateway (``/gateway/streams/<conversation_id>/events``). It
  starts legacy tasks, and goose runs through the gateway
  (``POST /gateway/streams/<conversation_id>/runs``, ``POST /gateway/runs/<run_id>/cancel``).

The switch: ``app.config["EVENT_LOG"]``. None (the default) keeps each task's events in its own
deque, as the legacy server did. An `EventLog` sends every event to the log instead, each task
a run this process owns (`gateway_kit.owned_run`), ended with an ``Error`` by the gateway if the
process dies mid-task; the gateway wrapping the app then answers the poll from the log, in the
same shape.

One module, over 300 lines: a legacy Flask app is one file of routes, and the demo shows that
"before" as its users have it.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections.abc import Mapping
from typing import Any

import socketio
from flask import Flask, Response, jsonify, redirect, request, session, url_for
from flask.typing import ResponseReturnValue

from ..coordination.leases import DEFAULT_LEASE_TTL
from ..exceptions import DatabaseUnavailable, InvalidCredential, InvalidEvent, LogClosed, RunError
from ..http.errors import DATABASE_UNAVAILABLE
from ..http.unavailable import DATABASE_UNAVAILABLE_MESSAGE, RETRY_AFTER_SECONDS
from ..principal import PRINCIPAL_KEY, Principal
from .agent import TaskTurn, new_message_id, task_follow_up, task_turn
from .approvals import DEFAULT_WAIT, ToolApprovalManager
from .conversations import may_write
from .legacy_sockets import LEGACY_SOCKETIO_PATH, LegacySocketTokens, legacy_socketio
from .secret import configured_key, process_key
from .tasks import EventWriter, TaskStore, task_events

logger = logging.getLogger(__name__)

DEFAULT_USERS = {"demo": "demo"}
DEFAULT_CONVERSATION = "demo"
CHUNK_DELAY = 0.15  # seconds between reply chunks, so the page shows the reply arriving
TASKS_EXTENSION = "gateway_kit_demo_tasks"
APPROVALS_EXTENSION = "gateway_kit_demo_tool_approvals"

LOGIN_REQUIRED = "log in first: POST /login with a username and password"
BAD_CREDENTIALS = "wrong username or password"
NO_SUCH_TASK = "no task {task_id} of yours"
BAD_TASK = 'send JSON {"conversation_id": "...", "message": "..."} with a non-empty message'
BAD_TITLE = 'send JSON {"title": "..."}: a non-empty title of at most 200 characters'
NO_LOG = "titles are kept in the event log; this app has none (EVENT_LOG)"
NO_SUCH_CONVERSATION = "no conversation of yours has that id"
MAX_TITLE = 200
BAD_OFFSET = "from must be a non-negative integer index, got {value!r}"
BAD_ANSWER = 'send JSON {"approved": true} or {"approved": false}'
NO_SUCH_APPROVAL = "no pending approval {approval_id} of yours"
ANSWERED_ALREADY = "approval {approval_id} was answered already"


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """The app; `config` goes into ``app.config`` (``EVENT_LOG``, ``DEMO_USERS``, ...)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=configured_key(),  # without one, a random key (see `gateway_kit.demo.secret`)
        EVENT_LOG=None,  # an EventLog moves every task event from the deques to the log
        DEMO_USERS=dict(DEFAULT_USERS),
        TURN_CHUNK_DELAY=CHUNK_DELAY,
        # With EVENT_LOG, how long a task outlives its process before the gateway ends it.
        TASK_LEASE_TTL=DEFAULT_LEASE_TTL,
        RUN_GUARDS=None,  # with EVENT_LOG, the finish guards each task is held to
        # Where the fake agent writes the pages it publishes: a path with {user_id}, as the
        # gateway's publish_guard `public_root` (see `gateway_kit.demo.agent`).
        PUBLIC_ROOT=None,
        TOOL_APPROVAL_TIMEOUT=DEFAULT_WAIT,  # seconds a /confirm task waits for its answer
    )
    app.config.update(config or {})
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = process_key()
    app.extensions[TASKS_EXTENSION] = TaskStore()
    # The legacy server's process-memory singleton: a new process starts with none.
    app.extensions[APPROVALS_EXTENSION] = ToolApprovalManager()
    register_pages(app)
    register_auth(app)
    register_tasks(app)
    register_tool_approvals(app)
    register_conversations(app)
    register_legacy_sockets(app)
    app.register_error_handler(DatabaseUnavailable, database_unavailable)
    return app


def database_unavailable(exc: DatabaseUnavailable) -> ResponseReturnValue:
    # Flask answers what its routes raise itself, so the gateway's 503 for a database that is
    # away never sees the app's own writes to the log: they answer alike here.
    logger.warning("%s %s: %s", request.method, request.path, exc)
    response = jsonify(error=DATABASE_UNAVAILABLE, message=DATABASE_UNAVAILABLE_MESSAGE)
    return response, 503, {"Retry-After": str(RETRY_AFTER_SECONDS)}


def error(status: int, code: str, message: str) -> ResponseReturnValue:
    return jsonify(error=code, message=message), status


def current_user() -> str | None:
    """The logged-in user: the session's, else the principal the gateway resolved for this
    request (an API token's user, say), which a wrapped app finds in its environ."""
    user = session.get("username")
    if isinstance(user, str):
        return user
    principal = request.environ.get(PRINCIPAL_KEY)
    if isinstance(principal, Principal) and not principal.anonymous:
        return principal.user_id
    return None


def csrf_token() -> str:
    """The session's CSRF token, made on first use."""
    token = session.get("csrf_token")
    if not isinstance(token, str) or not token:
        token = session["csrf_token"] = secrets.token_urlsafe(32)
    return token


def log_in(username: str) -> None:
    session.clear()
    session["username"] = username
    session["login_id"] = secrets.token_hex(16)  # names this login: logging out ends it alone
    csrf_token()


def register_pages(app: Flask) -> None:
    @app.get("/")
    def index() -> ResponseReturnValue:
        return redirect(url_for("conversation_page", conversation_id=DEFAULT_CONVERSATION))

    @app.get("/conversations/<conversation_id>")
    def conversation_page(conversation_id: str) -> Response:
        user, log = current_user(), app.config["EVENT_LOG"]
        if user is not None and log is not None:
            # The user who opens a new conversation first owns it: the gateway lets them read it.
            with contextlib.suppress(InvalidEvent, InvalidCredential):
                may_write(log, conversation_id, user)
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
        user = username if isinstance(username, str) and users.get(username) == password else None
        if request.is_json:
            if user is None:
                return error(401, "bad_credentials", BAD_CREDENTIALS)
            log_in(user)
            return jsonify(username=user, csrf_token=csrf_token())
        target = local_path(body.get("next"))
        if user is None:
            return redirect(url_for("login_form", error=1, next=target))
        log_in(user)
        return redirect(target)

    @app.post("/logout")
    def logout() -> ResponseReturnValue:
        session.clear()
        return jsonify(ok=True)

    @app.get("/api/csrf-token")
    def get_csrf_token() -> ResponseReturnValue:
        return jsonify(csrf_token=csrf_token(), username=current_user())


def register_conversations(app: Flask) -> None:
    @app.post("/api/conversations/<conversation_id>/title")
    def rename(conversation_id: str) -> ResponseReturnValue:
        user, log = current_user(), app.config["EVENT_LOG"]
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        body = request.get_json(silent=True)
        title = body.get("title") if isinstance(body, dict) else None
        if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
            return error(400, "bad_request", BAD_TITLE)
        if log is None:
            return error(409, "no_log", NO_LOG)
        try:
            if not may_write(log, conversation_id, user):
                return error(404, "not_found", NO_SUCH_CONVERSATION)
            # No run: the conversation's own event, for whoever follows it.
            event = log.append(conversation_id, "TitleChanged", {"title": title}, run_id=None)
        except (InvalidEvent, InvalidCredential) as exc:
            return error(400, "bad_request", str(exc))
        return jsonify(seq=event.seq, title=title)


def register_legacy_sockets(app: Flask) -> None:
    tokens = LegacySocketTokens()
    server = legacy_socketio(tokens)
    app.wsgi_app = socketio.WSGIApp(  # type: ignore[method-assign]
        server, app.wsgi_app, socketio_path=LEGACY_SOCKETIO_PATH
    )

    @app.get("/api/socket-token")
    def socket_token() -> ResponseReturnValue:
        user = current_user()
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        return jsonify(success=True, token=tokens.issue(user), expires_in=int(tokens.ttl))


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
        log = app.config["EVENT_LOG"]
        try:
            if log is not None and not may_write(log, conversation_id, user):
                # As for a task of another user's: the answer says nothing of what exists.
                return error(404, "not_found", NO_SUCH_CONVERSATION)
        except (InvalidEvent, InvalidCredential) as exc:
            return error(400, "bad_request", str(exc))
        task = store.create(conversation_id, owner=user)
        try:
            with contextlib.ExitStack() as stack:
                events = task_events(
                    task,
                    store,
                    log,
                    lease_ttl=app.config["TASK_LEASE_TTL"],
                    guards=app.config["RUN_GUARDS"],
                    follow_up=task_follow_up(app.config, message, user),
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
        except RunError:  # taken by another user since `may_write` looked
            return error(404, "not_found", NO_SUCH_CONVERSATION)
        turn = task_turn(
            app.config,
            app.extensions[APPROVALS_EXTENSION],
            message,
            user=user,
            conversation_id=conversation_id,
        )
        threading.Thread(
            target=run_task,
            args=(events.write, held, turn),
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


def register_tool_approvals(app: Flask) -> None:
    approvals: ToolApprovalManager = app.extensions[APPROVALS_EXTENSION]

    @app.post("/api/tool-approvals/<approval_id>")
    def answer_approval(approval_id: str) -> ResponseReturnValue:
        user = current_user()
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        body = request.get_json(silent=True)
        approved = body.get("approved") if isinstance(body, dict) else None
        if not isinstance(approved, bool):
            return error(400, "bad_request", BAD_ANSWER)
        item = approvals.get(approval_id)
        if item is None or item["username"] != user:
            # Gone with a restart, or another user's: the task waiting for it is told so.
            message = NO_SUCH_APPROVAL.format(approval_id=approval_id)
            return error(404, "approval_missing", message)
        if not approvals.decide(approval_id, user, approved):
            return error(409, "already_decided", ANSWERED_ALREADY.format(approval_id=approval_id))
        return jsonify(success=True, approval_id=approval_id, approved=approved)

    @app.get("/api/plan-approvals/pending")
    def pending_approvals() -> ResponseReturnValue:
        # Behind the gateway (its legacy_approvals_path), the gateway answers this instead.
        user = current_user()
        if user is None:
            return error(401, "login_required", LOGIN_REQUIRED)
        conversation_id = request.args.get("conversation_id") or None
        return jsonify(success=True, approvals=approvals.pending(user, conversation_id))


def run_task(write: EventWriter, held: contextlib.ExitStack, turn: TaskTurn) -> None:
    """A task's turn, in its own thread; `held` ends the task when the turn returns."""
    try:
        with held:
            turn(write)
    except LogClosed:
        # The server is stopping: the task's lease runs out, and the gateway ends the task
        # with an Error once it runs again.
        logger.info("a task was cut short: the event log was closed")
    except RunError as exc:
        logger.warning("a task could not end: %s", exc)
