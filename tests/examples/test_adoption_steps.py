"""The README's "Adopting gateway_kit in three steps", followed as written with a legacy app of
the test's own (`adoption_app`), and an unmodified legacy client run after every step.

Step 0 is the bare Flask app; step 1 wraps it in `Gateway`; step 2 moves its event writes to
the log with the conversation's owner declared (by `StreamOwners` and `log.append`, or by an
`owned_run`), and chooses the identity its session cookie needs; step 3 adds SSE clients beside
the old ones. Each step is a new process's app over the
same database and the same app records, as a redeploy would be.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.settings import database_url

from ..serving import serve_in_thread
from ..waiting import wait_until
from .adoption_app import (
    APPEND,
    FINISH_DATA,
    OWNED_RUN,
    REPLY,
    USER_KEY,
    Answer,
    LegacyApp,
    legacy_app,
    legacy_client,
    log_in,
)

CONVERSATION = "alice-notes"
TIMEOUT = 10.0
TASK_EVENTS = len(REPLY) + 2  # the user's message, the reply's chunks, the Finish
Transcript = list[tuple[int, str, dict[str, Any]]]


@contextlib.contextmanager
def served(app: object) -> Iterator[Callable[[], httpx.Client]]:
    """Serve `app` under uvicorn; yields a maker of clients of it, each with its own cookies."""
    with serve_in_thread(app) as url, contextlib.ExitStack() as clients:

        def new_client() -> httpx.Client:
            return clients.enter_context(httpx.Client(base_url=url, timeout=TIMEOUT))

        yield new_client


def expected_transcript(message: str) -> Transcript:
    events = [("Message", {"role": "user", "text": message})]
    events += [("Message", {"role": "assistant", "text": chunk}) for chunk in REPLY]
    return [
        (idx, type, data) for idx, (type, data) in enumerate([*events, ("Finish", FINISH_DATA)])
    ]


def check_legacy_answers(task_id: str, answers: list[Answer], message: str) -> None:
    """The answers are the legacy poll's, in its shape, and hand over the whole task once."""
    offset = 0
    for answer in answers:
        assert set(answer) == {"task_id", "status", "events", "next_offset"}, answer
        assert answer["task_id"] == task_id
        for i, event in enumerate(answer["events"]):
            assert set(event) == {"idx", "type", "data", "ts"}, event
            assert event["idx"] == offset + i and isinstance(event["ts"], float)
        assert answer["next_offset"] == offset + len(answer["events"])
        offset = answer["next_offset"]
    # The turn is held after its first chunk until the first poll is answered: the client
    # polls from `next_offset` at least once.
    assert len(answers) >= 2
    assert [a["status"] for a in answers] == ["running"] * (len(answers) - 1) + ["completed"]
    received = [(e["idx"], e["type"], e["data"]) for a in answers for e in a["events"]]
    assert received == expected_transcript(message)


def run_legacy_client(
    legacy: LegacyApp,
    client: httpx.Client,
    message: str,
    before_release: Callable[[str], None],
    user: str | None = "alice",
) -> str:
    """Alice's old client runs a task to its end in her conversation; the task id."""

    def after_first_poll(task_id: str) -> None:
        before_release(task_id)
        legacy.release(task_id)

    task_id, answers = legacy_client(
        client, user, CONVERSATION, message, after_first_poll=after_first_poll
    )
    check_legacy_answers(task_id, answers, message)
    return task_id


def check_others_kept_out(client: httpx.Client, task_id: str) -> None:
    """Bob neither reads Alice's task nor starts one in her conversation: 404, as ever."""
    log_in(client, "bob")
    assert client.get(f"/api/tasks/{task_id}", params={"from": 0}).status_code == 404
    started = client.post("/api/tasks", json={"conversation_id": CONVERSATION, "message": "hi"})
    assert started.status_code == 404


class SseReader(threading.Thread):
    """A new client: Alice's browser following a path over SSE until `done(event)`."""

    def __init__(self, client: httpx.Client, path: str, done: Callable[[Any], bool]) -> None:
        super().__init__(daemon=True)
        self.client, self.path, self.done = client, path, done
        self.events: list[dict[str, Any]] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            headers = {"accept": "text/event-stream"}
            with self.client.stream("GET", self.path, headers=headers) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        self.events.append(json.loads(line.removeprefix("data:")))
                        if self.done(self.events[-1]):
                            return
        except BaseException as exc:
            self.failure = exc


def sse_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def is_reply(event: dict[str, Any], task_id: str) -> bool:
    return bool(event["run_id"] == task_id and event["data"].get("role") == "assistant")


def no_wait(task_id: str) -> None:
    pass


@pytest.mark.parametrize("writes", [APPEND, OWNED_RUN])
def test_every_adoption_step_keeps_an_unmodified_legacy_client_working(
    log_url: str, writes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KIT_DB", log_url)
    conversations: dict[str, str] = {}  # the legacy app's own records, kept across redeploys

    # Step 0: the bare Flask app, its events in each task's deque.
    legacy = legacy_app(conversations)
    transport = httpx.WSGITransport(app=legacy.flask)
    with httpx.Client(transport=transport, base_url="http://legacy.test") as client:
        task_id = run_legacy_client(legacy, client, "step 0", no_wait)
    with httpx.Client(transport=transport, base_url="http://legacy.test") as client:
        check_others_kept_out(client, task_id)

    # Step 1: mounted, as the README's gateway.py writes it; the app still answers its poll.
    legacy = legacy_app(conversations)
    flask_app = legacy.flask
    log = EventLog(database_url())  # $GATEWAY_KIT_DB, else sqlite:///gateway.db
    try:
        app = Gateway(flask_app, log=log)  # an ASGI app
        with served(app) as new_client:
            task_id = run_legacy_client(legacy, new_client(), "step 1", no_wait)
            check_others_kept_out(new_client(), task_id)
        assert task_id in legacy.poll_hits
        assert log.latest() is None
    finally:
        log.close()

    # Step 2: the writes go to the log, the owner declared first; the app keeps the user under
    # its own session key, which the gateway is told. The gateway answers the poll now.
    log = EventLog(database_url())
    try:
        legacy = legacy_app(conversations, log, writes=writes)
        flask_app = legacy.flask
        app = Gateway(
            flask_app, log=log, plugin_config={"flask_session_identity": {"user_key": USER_KEY}}
        )
        with served(app) as new_client:
            step_2_task = run_legacy_client(legacy, new_client(), "step 2", no_wait)
            check_others_kept_out(new_client(), step_2_task)
        assert legacy.poll_hits == []  # not one poll reached the app's own route
        assert not legacy.tasks[step_2_task].events  # nor did the turn write to the deque
        assert [e.type for e in log.read(run_id=step_2_task, settled=False)][-1] == "Finish"
    finally:
        log.close()

    # Step 3: a redeploy of step 2; old clients poll as before while new ones follow over SSE.
    log = EventLog(database_url())
    try:
        legacy = legacy_app(conversations, log, writes=writes)
        flask_app = legacy.flask
        app = Gateway(
            flask_app, log=log, plugin_config={"flask_session_identity": {"user_key": USER_KEY}}
        )
        with served(app) as new_client:
            browser = new_client()
            log_in(browser, "alice")

            def new_task_ended(event: dict[str, Any]) -> bool:
                return bool(event["type"] == "Finish" and event["run_id"] != step_2_task)

            reader = SseReader(browser, f"/gateway/streams/{CONVERSATION}/events", new_task_ended)
            reader.start()

            def streamed_while_running(task_id: str) -> None:
                # The reply's first chunk reaches the SSE client while the turn is held.
                wait_until(lambda: any(is_reply(e, task_id) for e in reader.events), TIMEOUT)

            task_id = run_legacy_client(legacy, new_client(), "step 3", streamed_while_running)
            reader.join(TIMEOUT)
            assert not reader.is_alive() and reader.failure is None, reader.failure
            assert legacy.poll_hits == []

            # The stream replays the conversation from its start, then the new task live.
            step_3 = [e for e in reader.events if e["run_id"] == task_id]
            runs = [step_2_task] * TASK_EVENTS + [task_id] * TASK_EVENTS
            assert [e["run_id"] for e in reader.events] == runs
            expected = [(t, d) for _, t, d in expected_transcript("step 3")]
            assert [(e["type"], e["data"]) for e in step_3] == expected
            assert all(e["stream"] == CONVERSATION for e in reader.events)

            # A reconnect with Last-Event-ID carries on right after it; the run's stream ends.
            resumed = browser.get(
                f"/gateway/runs/{task_id}/events",
                headers={"accept": "text/event-stream", "last-event-id": str(step_3[1]["seq"])},
            )
            assert resumed.status_code == 200, resumed.text
            assert sse_events(resumed.text) == step_3[2:]

            # Another user's browser is refused the conversation.
            intruder = new_client()
            log_in(intruder, "bob")
            refused = intruder.get(
                f"/gateway/streams/{CONVERSATION}/events", headers={"accept": "text/event-stream"}
            )
            assert refused.status_code == 403, refused.text
    finally:
        log.close()


def step_2_without_identity_choice(sqlite_url: str, user_key: str) -> tuple[LegacyApp, Gateway]:
    """Step 2 with the gateway told nothing about the app's session: `Gateway(app, log=log)`."""
    log = EventLog(sqlite_url)
    legacy = legacy_app({}, log, user_key=user_key)
    return legacy, Gateway(legacy.flask, log=log)


def test_with_the_user_key_left_out_the_gateway_answers_the_poll_401(sqlite_url: str) -> None:
    """The README: from step 2 the gateway must know who polls, 401 otherwise. The cookie
    holds the user under ``user_id``; read as ``username`` it names nobody."""
    legacy, app = step_2_without_identity_choice(sqlite_url, USER_KEY)
    try:
        with served(app) as new_client:
            alice = new_client()
            log_in(alice, "alice")
            started = alice.post(
                "/api/tasks", json={"conversation_id": CONVERSATION, "message": "hi"}
            )
            assert started.status_code == 200, started.text  # the app's routes work as ever
            task_id = started.json()["task_id"]
            legacy.release(task_id)
            polled = alice.get(f"/api/tasks/{task_id}", params={"from": 0})
            assert polled.status_code == 401, polled.text
            assert polled.json()["error"] == "unauthenticated"
            streamed = alice.get(f"/gateway/runs/{task_id}/events")
            assert streamed.status_code == 401, streamed.text
        assert legacy.poll_hits == []
    finally:
        app.log.close()


def test_an_app_keeping_the_user_as_username_needs_no_identity_choice(sqlite_url: str) -> None:
    """The README: nothing to do when the app keeps the user in ``session["username"]``."""
    legacy, app = step_2_without_identity_choice(sqlite_url, "username")
    try:
        with served(app) as new_client:
            run_legacy_client(legacy, new_client(), "as username", no_wait)
            check_others_kept_out(new_client(), next(iter(legacy.tasks)))
        assert legacy.poll_hits == []
    finally:
        app.log.close()


def test_an_app_without_login_keeps_its_clients_with_allow_anonymous(sqlite_url: str) -> None:
    """The README's "No login" choice: at step 2 the strict default answers the poll of an app
    without login 401; with ``allow_anonymous=True`` its old clients poll as before, and read
    the task's SSE too."""
    log = EventLog(sqlite_url)
    try:
        legacy = legacy_app({}, log, user_key=None)
        with served(Gateway(legacy.flask, log=log)) as new_client:
            anyone = new_client()
            started = anyone.post(
                "/api/tasks", json={"conversation_id": CONVERSATION, "message": "hi"}
            )
            assert started.status_code == 200, started.text
            legacy.release(started.json()["task_id"])
            polled = anyone.get(f"/api/tasks/{started.json()['task_id']}", params={"from": 0})
            assert polled.status_code == 401, polled.text

        legacy = legacy_app({}, log, user_key=None)
        with served(Gateway(legacy.flask, log=log, allow_anonymous=True)) as new_client:
            task_id = run_legacy_client(legacy, new_client(), "no login", no_wait, user=None)
            streamed = new_client().get(f"/gateway/runs/{task_id}/events")
            assert streamed.status_code == 200, streamed.text
            expected = [(t, d) for _, t, d in expected_transcript("no login")]
            assert [(e["type"], e["data"]) for e in sse_events(streamed.text)] == expected
        assert legacy.poll_hits == []
    finally:
        log.close()
