"""A legacy Flask app of the adoption test's own, unlike the example app in every way the gateway
could trip on, and the unmodified client of it.

- Its login keeps the user in ``session["uid"]`` (``POST /auth/sign-in``, JSON), and its API
  clients send the app's own credentials: ``Authorization: Bearer app.<user>`` or
  ``X-Api-Key: key-<user>``; a bad token is the app's 403.
- It has routes of its own at the paths the example app's legacy surfaces use:
  ``/api/usage``, ``/api/socket-token``, ``/api/plan-approvals/pending``, each in its own shape.
- Its jobs: ``POST /api/jobs`` runs an agent turn in a thread that appends to the job's deque,
  polled at ``GET /api/jobs/<job>?cursor=N`` as ``{"job", "phase", "events": [{"i", "what",
  "body"}], "cursor"}``; ``phase`` is ``busy`` until the client has the last event, then
  ``over`` (or ``broken``). Another user's job, and a poll without credentials, are the app's
  ``404 {"error": "no such job"}``.

Given a log, it does what the README's step 2 says: the conversation's owner is declared before
its first event and the turn appends to the log (`log.append`, or an `owned_run` opened in the
request and handed to the turn's thread). Its own poll route stays, counting the requests that
still reach it.
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
from flask import Flask, abort, jsonify, request, session

from gateway_kit import (
    EventLog,
    PolledTask,
    Principal,
    RunError,
    StreamOwners,
    TaskPollShape,
    hookimpl,
    owned_run,
)

USER_KEY = "uid"
USERS = {"alice": "wonderland", "bob": "the-builder"}
TOKENS = {f"app.{user}": user for user in USERS}
API_KEYS = {f"key-{user}": user for user in USERS}
REPLY = ["Hel", "lo, ", "world"]
FINISH_DATA = {"reason": "stop"}
PHASE_BY_TERMINAL = {"Finish": "over", "Error": "broken"}
NO_SUCH_JOB = {"error": "no such job"}
GATE_TIMEOUT = 10.0
MAX_POLLS = 1000
POLL_INTERVAL = 0.01  # the old clients poll every 250 ms; a faster loop keeps the test short

Answer = dict[str, Any]
Send = Callable[[str, dict[str, Any]], object]
APPEND = "append"
OWNED_RUN = "owned_run"


# The README's step 2: the app says how its poll looks, and the gateway answers it so.
def job_answer(task: PolledTask) -> Answer:
    phase = {"completed": "over", "failed": "broken"}.get(task.status, "busy")
    events = [{"i": e.idx, "what": e.type, "body": e.data} for e in task.events]
    return {"job": task.task_id, "phase": phase, "events": events, "cursor": task.next_offset}


JOB_SHAPE = TaskPollShape(
    answer=job_answer,
    offset_param="cursor",
    not_found=(404, NO_SUCH_JOB),
    unauthenticated=(404, NO_SUCH_JOB),
)


@dataclass
class Job:
    job_id: str
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
    jobs: dict[str, Job]
    poll_hits: list[str]  # job ids whose poll reached the app's own route

    def release(self, job_id: str) -> None:
        self.jobs[job_id].gate.set()


def legacy_app(
    conversations: dict[str, str],
    log: EventLog | None = None,
    *,
    writes: str = APPEND,
) -> LegacyApp:
    """The app; `conversations` (conversation id: owner) are its own records, which outlive
    the process as a database of its own would, and `log` moves its event writes to the log
    (`writes`: `APPEND` or `OWNED_RUN`)."""
    flask_app = Flask("adoption_legacy_app")
    flask_app.config["SECRET_KEY"] = "the legacy app's own secret"
    jobs: dict[str, Job] = {}
    poll_hits: list[str] = []
    lock = threading.Lock()
    owners = StreamOwners(log) if log is not None else None

    def caller() -> str | None:
        """Who asks, by the app's own credentials; the app's 403 for a bad one."""
        authorization = request.headers.get("Authorization")
        if authorization is not None:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or token not in TOKENS:
                abort(403)
            return TOKENS[token]
        key = request.headers.get("X-Api-Key")
        if key is not None:
            if key not in API_KEYS:
                abort(403)
            return API_KEYS[key]
        user = session.get(USER_KEY)
        return user if isinstance(user, str) else None

    # Step 2 of the README, as written there.
    def start_task(job: Job, user: str) -> None:
        assert owners is not None
        if owners.declare(job.conversation_id, user) != user:  # the first declaration stands
            abort(404)  # another user's conversation

    # "Runs your app writes itself", as the README writes it.
    def start_owned_task(job: Job, user: str, message: str) -> None:
        assert log is not None
        with contextlib.ExitStack() as stack:
            try:
                run = stack.enter_context(
                    owned_run(log, stream=job.conversation_id, run_id=job.job_id, owner=user)
                )
            except RunError:
                abort(404)  # another user's conversation
            run.append("Message", {"role": "user", "text": message})
            held = stack.pop_all()  # from here on, the thread's to close
        threading.Thread(target=turn, args=(job, run.append, held), daemon=True).start()

    def sender(job: Job) -> Send:
        def send(event_type: str, data: dict[str, Any]) -> None:
            if log is not None:
                log.append(
                    stream=job.conversation_id, type=event_type, data=data, run_id=job.job_id
                )
                return
            with lock:
                i = len(job.events)
                job.events.append({"i": i, "what": event_type, "body": data})
                if job.terminal is None and event_type in PHASE_BY_TERMINAL:
                    job.terminal = (i, event_type)

        return send

    def turn(job: Job, send: Send, held: contextlib.AbstractContextManager[Any]) -> None:
        with held:
            send("Message", {"role": "assistant", "text": REPLY[0]})
            job.gate.wait(GATE_TIMEOUT)
            for chunk in REPLY[1:]:
                send("Message", {"role": "assistant", "text": chunk})
            send("Finish", FINISH_DATA)

    @flask_app.post("/auth/sign-in")
    def sign_in() -> Any:
        body = request.get_json(silent=True) or {}
        user = body.get("user", "")
        if USERS.get(user) != body.get("secret"):
            return jsonify(ok=False, reason="bad credentials"), 401
        session[USER_KEY] = user
        return jsonify(ok=True, user=user)

    @flask_app.get("/api/me")
    def me() -> Any:
        return jsonify(user=caller())

    @flask_app.get("/api/usage")
    def usage() -> Any:
        user = caller()
        if user is None:
            return jsonify(error="sign in first"), 403
        return jsonify(credits_left=100, user=user)

    @flask_app.get("/api/socket-token")
    def socket_token() -> Any:
        user = caller()
        if user is None:
            abort(403)
        return jsonify(socket="ws://chat.internal/socket", token=f"sock-{user}")

    @flask_app.get("/api/plan-approvals/pending")
    def plans() -> Any:
        return jsonify(plans=[], owner=caller())

    @flask_app.post("/api/jobs")
    def create_job() -> Any:
        user = caller()
        if user is None:
            return jsonify(NO_SUCH_JOB), 404
        body = request.get_json()
        conversation_id, message = body["thread"], body["prompt"]
        with lock:
            if conversations.setdefault(conversation_id, user) != user:
                return jsonify(NO_SUCH_JOB), 404  # the app's own records: another's thread
        job = Job(uuid.uuid4().hex, conversation_id, user)
        if log is not None and writes == OWNED_RUN:
            start_owned_task(job, user, message)
        else:
            if owners is not None:
                start_task(job, user)
            send = sender(job)
            send("Message", {"role": "user", "text": message})  # before the id is handed out
            threading.Thread(
                target=turn, args=(job, send, contextlib.nullcontext()), daemon=True
            ).start()
        jobs[job.job_id] = job
        return jsonify(job=job.job_id, thread=conversation_id)

    @flask_app.get("/api/jobs/<job_id>")
    def poll(job_id: str) -> Any:
        poll_hits.append(job_id)
        job = jobs.get(job_id)
        if job is None or job.owner != caller():
            return jsonify(NO_SUCH_JOB), 404
        cursor = int(request.args.get("cursor", "0"))
        with lock:
            events = [dict(e) for e in job.events if e["i"] >= cursor]
            terminal = job.terminal
        next_cursor = events[-1]["i"] + 1 if events else cursor
        phase = "busy"
        if terminal is not None and terminal[0] < next_cursor:
            phase = PHASE_BY_TERMINAL[terminal[1]]
        return jsonify(job=job_id, phase=phase, events=events, cursor=next_cursor)

    return LegacyApp(flask_app, jobs, poll_hits)


def sign_in(client: httpx.Client, user: str) -> None:
    answer = client.post("/auth/sign-in", json={"user": user, "secret": USERS[user]})
    assert answer.status_code == 200, answer.text


def legacy_client(
    client: httpx.Client,
    conversation_id: str,
    message: str,
    *,
    after_first_poll: Callable[[str], None],
    headers: dict[str, str] | None = None,
) -> tuple[str, list[Answer]]:
    """What an old client does: start a job, poll from `cursor` until its phase is no longer
    ``busy``; the job id and every answer. `after_first_poll(job_id)` lets the test act between
    the first poll and the next (it sends nothing)."""
    started = client.post(
        "/api/jobs", json={"thread": conversation_id, "prompt": message}, headers=headers
    )
    assert started.status_code == 200, started.text
    job_id: str = started.json()["job"]
    answers: list[Answer] = []
    cursor = 0
    for _ in range(MAX_POLLS):
        answer = client.get(f"/api/jobs/{job_id}", params={"cursor": cursor}, headers=headers)
        assert answer.status_code == 200, answer.text
        answers.append(answer.json())
        if len(answers) == 1:
            after_first_poll(job_id)
        cursor = answers[-1]["cursor"]
        if answers[-1]["phase"] != "busy":
            return job_id, answers
        time.sleep(POLL_INTERVAL)
    raise AssertionError(f"job {job_id} still busy after {MAX_POLLS} polls")


class AppCredentials:
    """The README's identity choice "anything else": the app's own API credentials, read for
    the gateway by a plugin of the app's (the cookie is read by the built-in resolver)."""

    __name__ = "app-credentials"

    @hookimpl
    def resolve_principal(self, scope: dict[str, Any]) -> Principal | None:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token in TOKENS:
            return Principal(user_id=TOKENS[token], method="app-token")
        key = headers.get("x-api-key")
        if key in API_KEYS:
            return Principal(user_id=API_KEYS[key], method="app-key")
        return None
