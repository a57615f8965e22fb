"""Ownership under random histories: nobody ever reads an event of a stream it may not read.

Each example is a random sequence, over fresh streams, of:

- the app writing a run to a stream (`owned_run`), with an owner (alice, bob or carol) or none,
  or appending an event of no run (`EventLog.append`);
- a user starting a run in a stream (``POST /gateway/streams/{stream}/runs``);
- a user reading a stream or one of its runs: SSE, JSON page, run SSE, legacy poll.

A model says who may read each stream: the owner the app declared (the first declaration
stands), or, for a stream that held no event, the user whose run started first in it; nobody
for a stream written with no owner. Every answer must agree with the model (a start is a 200
or a 403, a read a 200 or its 403/404), and no answer to a user the model refuses carries any
text written to that stream.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit import owned_run
from gateway_kit.exceptions import RunError
from tests.support.raw_requests import Answer, assert_json_error, wait_run_ended

from .claims import USERS, Site, site

T = TypeVar("T")
EXAMPLES = 40  # per backend; about 15 s on SQLite
STREAMS = 3  # per example, fresh each time
READS = ("sse", "page", "run_sse", "legacy")
REFUSED = {"sse": 403, "page": 403, "run_sse": 404, "legacy": 404}

owners = st.sampled_from([None, *USERS])
users = st.sampled_from(USERS)
streams = st.integers(0, STREAMS - 1)
actions = st.one_of(
    st.tuples(st.just("write"), streams, owners),
    st.tuples(st.just("append"), streams),
    st.tuples(st.just("start"), streams, users),
    st.tuples(st.just("read"), streams, users, st.sampled_from(READS), st.integers(0, 9)),
)


@dataclass
class Model:
    names: list[str]
    owner: dict[str, str | None] = field(default_factory=dict)
    written: dict[str, list[str]] = field(default_factory=dict)  # texts, in the stream
    runs: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.names:
            self.owner[name], self.written[name], self.runs[name] = None, [], []

    def may_read(self, user: str, stream: str) -> bool:
        return self.owner[stream] == user


def secret() -> str:
    return f"leak-{uuid.uuid4().hex[:12]}"


@pytest.mark.parametrize("backend", ["sqlite_url", "pg_url"])
def test_nobody_reads_a_stream_it_may_not_read(
    request: pytest.FixtureRequest, backend: str
) -> None:
    log_url = request.getfixturevalue(backend)

    async def main() -> None:
        async with site(log_url) as s:
            loop = asyncio.get_running_loop()

            def call(coroutine: Coroutine[Any, Any, T]) -> T:
                return asyncio.run_coroutine_threadsafe(coroutine, loop).result(30)

            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
            @given(steps=st.lists(actions, min_size=1, max_size=10))
            def check(steps: list[tuple[Any, ...]]) -> None:
                model = Model([f"p-{uuid.uuid4().hex[:10]}" for _ in range(STREAMS)])
                for step in steps:
                    stream = model.names[step[1]]
                    if step[0] == "write":
                        app_writes(s, model, stream, step[2])
                    elif step[0] == "append":  # an event of no run, no owner named
                        text = secret()
                        s.log.append(stream, "TitleChanged", {"title": text})
                        model.written[stream].append(text)
                    elif step[0] == "start":
                        starts(s, model, stream, step[2], call)
                    else:
                        reads(s, model, stream, step[2], step[3], step[4], call)

            await asyncio.to_thread(check)

    asyncio.run(main())


def app_writes(s: Site, model: Model, stream: str, owner: str | None) -> None:
    text = secret()
    try:
        with owned_run(s.log, stream=stream, owner=owner) as run:
            run.append("Message", {"text": text})
    except RunError:
        # The stream is another user's: the app's run for `owner` is refused, nothing written.
        assert owner is not None and model.owner[stream] not in (None, owner)
        return
    if owner is not None and model.owner[stream] is None:
        model.owner[stream] = owner  # the app's declaration: the first one stands
    model.written[stream].append(text)
    model.runs[stream].append(run.run_id)


def starts(s: Site, model: Model, stream: str, user: str, call: Any) -> None:
    text = secret()
    answer: Answer = call(s.start(user, stream, text))
    fresh = model.owner[stream] is None and not model.written[stream]
    if fresh or model.owner[stream] == user:
        assert answer.status == 200, (stream, user, answer.body[:200])
        run_id = answer.json()["run_id"]
        call(wait_run_ended(s.gateway, run_id))
        if fresh:
            model.owner[stream] = user
        model.written[stream].append(text)
        model.runs[stream].append(run_id)
    else:
        assert_json_error(answer, 403, "forbidden")


def reads(s: Site, model: Model, stream: str, user: str, kind: str, pick: int, call: Any) -> None:
    runs = model.runs[stream]
    run_id = runs[pick % len(runs)] if runs else f"no-run-{pick}"
    allowed = model.may_read(user, stream)
    if allowed:  # once what was written is readable (PostgreSQL serves settled rows)
        answer: Answer = call(s.settled(user, stream, run_id, model.written[stream]))[kind]
    else:
        answer = call(s.reads(user, stream, run_id))[kind]
    body = answer.body.decode("utf-8", "replace")
    no_run = kind in ("run_sse", "legacy") and not runs  # an id nobody wrote: a 404 for all
    if allowed:
        assert answer.status == (404 if no_run else 200), (kind, answer.status, body[:200])
        if kind == "page":  # finite: everything written is there for its reader
            assert all(text in body for text in model.written[stream]), body[:300]
        return
    expected = 404 if no_run else REFUSED[kind]
    assert answer.status == expected, (kind, user, stream, answer.status, body[:200])
    assert_json_error(answer, expected)
    leaked = [text for text in model.written[stream] if text in body]
    assert not leaked, (kind, user, stream, leaked)
