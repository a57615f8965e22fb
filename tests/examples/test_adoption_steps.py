"""The README's "Adopting gateway_kit", followed as written with a legacy app of the test's own,
unlike the example (`adoption_app`: its own login key, Bearer tokens and API keys, its own
``/api/usage``, ``/api/socket-token`` and ``/api/plan-approvals/pending``, its own job poll),
and its unmodified clients compared, answer by answer, with the app served alone.

Step 0 is the bare Flask app; step 1 wraps it in `Gateway` and nothing else; step 2 moves its
event writes to the log, tells the gateway who its users are, and lets the gateway answer the job
poll in the app's shape; step 3 adds SSE clients beside the old ones. Each step is a new
process's app over the same database and the same app records, as a redeploy would be.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from gateway_kit import EventLog, Gateway, LegacySurfaces
from gateway_kit.settings import database_url
from tests.support.serving import serve_in_thread
from tests.support.waiting import wait_until

from .adoption_app import (
    APPEND,
    FINISH_DATA,
    JOB_SHAPE,
    OWNED_RUN,
    REPLY,
    USER_KEY,
    AppCredentials,
    LegacyApp,
    legacy_app,
    legacy_client,
    sign_in,
)

CONVERSATION = "alice-notes"
TIMEOUT = 10.0
JOB_EVENTS = len(REPLY) + 2  # the user's message, the reply's chunks, the Finish
UNKNOWN_JOB = "0123"  # a job the log does not hold goes on to the app, which says it has none
HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")
Clients = Callable[[], httpx.Client]


@contextlib.contextmanager
def served(app: object) -> Iterator[Clients]:
    """Serve `app` under uvicorn; yields a maker of clients of it, each with its own cookies."""
    with serve_in_thread(app) as url, contextlib.ExitStack() as clients:

        def new_client() -> httpx.Client:
            return clients.enter_context(httpx.Client(base_url=url, timeout=TIMEOUT))

        yield new_client


@contextlib.contextmanager
def served_alone(app: LegacyApp) -> Iterator[Clients]:
    """The Flask app alone, in process, as it was before the gateway."""
    transport = httpx.WSGITransport(app=app.flask)
    with contextlib.ExitStack() as clients:

        def new_client() -> httpx.Client:
            client = httpx.Client(transport=transport, base_url="http://legacy.test")
            return clients.enter_context(client)

        yield new_client


def masked(answer: httpx.Response) -> tuple[int, str, Any]:
    """What a client sees of an answer (status, type, JSON body), job ids masked."""
    kind = answer.headers.get("content-type", "").split(";")[0]
    try:
        body: Any = answer.json()
    except ValueError:
        body = answer.text
    return answer.status_code, kind, json.loads(HEX_ID.sub("<id>", json.dumps(body)))


def every_answer(app: LegacyApp, new_client: Clients) -> dict[str, Any]:
    """An unmodified session of every kind of client: alice's browser runs a job to its end,
    then everyone asks the app what they always asked. Each answer, by what was asked."""
    alice, bob, anyone = new_client(), new_client(), new_client()
    sign_in(alice, "alice")
    sign_in(bob, "bob")
    job_id, polls = legacy_client(alice, CONVERSATION, "hi", after_first_poll=app.release)
    job = f"/api/jobs/{job_id}"
    token = {"authorization": "Bearer app.alice"}
    asked: dict[str, Callable[[], httpx.Response]] = {
        "bad sign-in": lambda: anyone.post("/auth/sign-in", json={"user": "alice"}),
        "me, nobody": lambda: anyone.get("/api/me"),
        "me, cookie": lambda: alice.get("/api/me"),
        "me, app token": lambda: anyone.get("/api/me", headers=token),
        "me, api key": lambda: anyone.get("/api/me", headers={"x-api-key": "key-bob"}),
        "me, bad token": lambda: anyone.get("/api/me", headers={"authorization": "Bearer x"}),
        # The app's token decides, not the cookie beside it.
        "me, bad token and cookie": lambda: alice.get(
            "/api/me", headers={"authorization": "Bearer app.nobody"}
        ),
        "me, basic": lambda: anyone.get("/api/me", headers={"authorization": "Basic YTpi"}),
        "usage, nobody": lambda: anyone.get("/api/usage"),
        "usage, app token": lambda: anyone.get("/api/usage", headers=token),
        "usage, bad token": lambda: anyone.get("/api/usage", headers={"authorization": "Bearer"}),
        "socket token, cookie": lambda: alice.get("/api/socket-token"),
        "socket token, nobody": lambda: anyone.get("/api/socket-token"),
        "plans, cookie": lambda: alice.get("/api/plan-approvals/pending"),
        "job, whole": lambda: alice.get(job, params={"cursor": 0}),
        "job, the rest": lambda: alice.get(job, params={"cursor": 2}),
        "job, past its end": lambda: alice.get(job, params={"cursor": 99}),
        "job, by app token": lambda: anyone.get(job, headers=token),
        "job, by api key": lambda: anyone.get(job, headers={"x-api-key": "key-alice"}),
        "job, another user's": lambda: bob.get(job),
        "job, nobody's": lambda: anyone.get(job),
        "job, unknown": lambda: alice.get(f"/api/jobs/{UNKNOWN_JOB}"),
        "job, in another's thread": lambda: bob.post(
            "/api/jobs", json={"thread": CONVERSATION, "prompt": "mine now"}
        ),
    }
    answers = {name: masked(ask()) for name, ask in asked.items()}
    answers["the browser's transcript"] = transcript(polls)
    return answers


def transcript(polls: list[dict[str, Any]]) -> dict[str, Any]:
    """What alice's browser made of its polls: the events in order, the phases it saw."""
    events = [event for poll in polls for event in poll["events"]]
    assert [e["i"] for e in events] == list(range(JOB_EVENTS)), events
    assert all(set(poll) == {"job", "phase", "events", "cursor"} for poll in polls)
    phases = [poll["phase"] for poll in polls]
    assert phases == ["busy"] * (len(polls) - 1) + ["over"]
    return {"events": [(e["what"], e["body"]) for e in events], "last phase": phases[-1]}


def assert_same(step: dict[str, Any], before: dict[str, Any]) -> None:
    differ = {name: (before[name], step[name]) for name in before if step[name] != before[name]}
    assert not differ, f"answers that changed: {json.dumps(differ, indent=1, default=str)}"


def step_2_gateway(flask_app: Any, log: EventLog) -> Gateway:
    """The README's step 2, as written there."""
    return Gateway(
        flask_app,
        log=log,
        # Who the app's users are: its cookie keeps them under "uid", its API clients send
        # its own tokens (a plugin of the app's reads them).
        plugin_config={"flask_session_identity": {"user_key": USER_KEY}},
        plugins=[AppCredentials()],
        # The gateway answers the job poll from the log, in the app's own shape.
        legacy=LegacySurfaces(tasks="/api/jobs", task_shape=JOB_SHAPE),
    )


@pytest.mark.parametrize("writes", [APPEND, OWNED_RUN])
def test_every_adoption_step_keeps_every_answer_of_an_app_unlike_the_example(
    log_url: str, writes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_KIT_DB", log_url)
    conversations: dict[str, str] = {}  # the legacy app's own records, kept across redeploys

    # Step 0: the bare Flask app, its events in each job's deque.
    legacy = legacy_app(conversations)
    with served_alone(legacy) as new_client:
        before = every_answer(legacy, new_client)
    assert before["the browser's transcript"]["events"][-1] == ("Finish", FINISH_DATA)

    # Step 1: mounted, as the README's gateway.py writes it, and nothing else: every answer
    # the same, the app's own tokens and routes included.
    legacy = legacy_app(conversations)
    flask_app = legacy.flask
    log = EventLog(database_url())  # $GATEWAY_KIT_DB, else sqlite:///gateway.db
    try:
        app = Gateway(flask_app, log=log)  # an ASGI app
        with served(app) as new_client:
            assert_same(every_answer(legacy, new_client), before)
        assert legacy.poll_hits  # the app answered its own polls
        assert log.latest() is None
    finally:
        log.close()

    # Step 2: the writes go to the log, the owner declared first, and the gateway answers the
    # poll in the app's shape: every answer still the same, not one poll reaching the app.
    log = EventLog(database_url())
    try:
        legacy = legacy_app(conversations, log, writes=writes)
        with served(step_2_gateway(legacy.flask, log)) as new_client:
            assert_same(every_answer(legacy, new_client), before)
        assert legacy.poll_hits == [UNKNOWN_JOB]  # not one poll of a job the log holds
        [step_2_job] = legacy.jobs
        assert not legacy.jobs[step_2_job].events  # nor did the turn write to the deque
        assert [e.type for e in log.read(run_id=step_2_job, settled=False)][-1] == "Finish"
    finally:
        log.close()

    # Step 3: a redeploy of step 2; old clients poll as before while new ones follow over SSE.
    log = EventLog(database_url())
    try:
        legacy = legacy_app(conversations, log, writes=writes)
        with served(step_2_gateway(legacy.flask, log)) as new_client:
            browser = new_client()
            sign_in(browser, "alice")

            def new_job_ended(event: dict[str, Any]) -> bool:
                return bool(event["type"] == "Finish" and event["run_id"] != step_2_job)

            reader = SseReader(browser, f"/gateway/streams/{CONVERSATION}/events", new_job_ended)
            reader.start()

            def streamed_while_running(job_id: str) -> None:
                # The reply's first chunk reaches the SSE client while the turn is held.
                wait_until(lambda: any(is_reply(e, job_id) for e in reader.events), TIMEOUT)
                legacy.release(job_id)

            old = new_client()
            sign_in(old, "alice")
            job_id, polls = legacy_client(
                old, CONVERSATION, "step 3", after_first_poll=streamed_while_running
            )
            assert transcript(polls)["last phase"] == "over"
            reader.join(TIMEOUT)
            assert not reader.is_alive() and reader.failure is None, reader.failure
            assert legacy.poll_hits == []

            # The stream replays the conversation from its start, then the new job live.
            runs = [e["run_id"] for e in reader.events]
            assert runs[-JOB_EVENTS:] == [job_id] * JOB_EVENTS and step_2_job in runs
            step_3 = [e for e in reader.events if e["run_id"] == job_id]
            assert [e["type"] for e in step_3] == ["Message"] * (JOB_EVENTS - 1) + ["Finish"]

            # A reconnect with Last-Event-ID carries on right after it; the run's stream ends.
            resumed = browser.get(
                f"/gateway/runs/{job_id}/events",
                headers={"accept": "text/event-stream", "last-event-id": str(step_3[1]["seq"])},
            )
            assert resumed.status_code == 200, resumed.text
            assert sse_events(resumed.text) == step_3[2:]

            # Another user's browser is refused the conversation.
            intruder = new_client()
            sign_in(intruder, "bob")
            refused = intruder.get(
                f"/gateway/streams/{CONVERSATION}/events", headers={"accept": "text/event-stream"}
            )
            assert refused.status_code == 403, refused.text
    finally:
        log.close()


def test_with_the_identity_left_out_the_gateways_poll_answers_as_the_app_does_to_nobody(
    sqlite_url: str,
) -> None:
    """Step 2 without telling the gateway who the users are: it cannot place a poll, and
    answers it with the app's own answer to a poll without credentials, never someone's
    events."""
    log = EventLog(sqlite_url)
    try:
        legacy = legacy_app({}, log)
        gateway = Gateway(
            legacy.flask, log=log, legacy=LegacySurfaces(tasks="/api/jobs", task_shape=JOB_SHAPE)
        )
        with served(gateway) as new_client:
            alice = new_client()
            sign_in(alice, "alice")
            started = alice.post("/api/jobs", json={"thread": CONVERSATION, "prompt": "hi"})
            assert started.status_code == 200, started.text  # the app's routes work as ever
            job_id = started.json()["job"]
            legacy.release(job_id)
            polled = alice.get(f"/api/jobs/{job_id}", params={"cursor": 0})
            assert (polled.status_code, polled.json()) == (404, {"error": "no such job"})
            streamed = alice.get(f"/gateway/runs/{job_id}/events")
            assert streamed.status_code == 401, streamed.text
        assert legacy.poll_hits == []
    finally:
        log.close()


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


def is_reply(event: dict[str, Any], job_id: str) -> bool:
    return bool(event["run_id"] == job_id and event["data"].get("role") == "assistant")
