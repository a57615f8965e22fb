"""The demo's simulated goose: a `FakeGoose` the gateway reaches in-process, typing slowly.

The gateway talks to it exactly as to a real goosed: a `GooseUpstream` sends HTTP requests and
reads ``/sessions/{id}/events`` as SSE, and the session pump copies every goose event into the
log. Only the transport differs: `FakeGoose.client()` hands each request to the fake ASGI app on
the event loop that serves the gateway, instead of a socket. So the demo needs no second port
to choose, print or free, and no second server to stop: the fake's turns are tasks of the one
loop uvicorn runs, and `SimulatedGoose.aclose` ends them when the demo stops.

Every reply is a small scripted turn (`demo_turn`): a few words typed slowly, a tool call with
its result, then the answer. A message starting with ``/fail`` ends with goose's `Error`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from ..testing import FakeGoose, Turn
from ..testing.sessions import DEFAULT_WORKING_DIR, SESSION_NAME, SessionRecord, new_session_id
from ..testing.turns import message_text, new_message_id
from ..types import JSONObject
from ..upstream.goose import GooseUpstream

# Never resolved: the injected client hands every request to the fake in this process.
GOOSE_URL = "http://simulated-goose.invalid"
SECRET_KEY = "gateway-kit-demo-goose"
TYPING_DELAY = 0.3  # seconds between chunks, so that a person watching sees a model typing
TOOL_NAME = "count_words"
FAIL_COMMAND = "/fail"
FAILURE = "the simulated goose was asked to fail"
EMPTY = "(an empty message)"
THINKING = ("Let me ", "count the words ", "of your message.")
ANSWER = (
    "You said: “{text}”. ",
    "That is {words} word{s}. ",
    "This reply comes from a simulated goose, ",
    "through the gateway's session pump, ",
    "into the event log.",
)


def pause(turn: Turn, delay: float) -> Turn:
    return turn.delay(delay) if delay else turn


def typed(turn: Turn, chunks: Iterable[str], delay: float) -> Turn:
    """`turn`, then one assistant message streamed in `chunks`, `delay` seconds apart."""
    message_id = new_message_id()
    for chunk in chunks:
        turn = pause(turn, delay).text(chunk, message_id=message_id)
    return turn


def demo_turn(user_message: JSONObject, *, typing_delay: float = TYPING_DELAY) -> Turn:
    """What the simulated goose does for one reply (its `default_turn`)."""
    text = message_text(user_message).strip() or EMPTY
    words = len(text.split())
    s = "" if words == 1 else "s"
    turn = typed(Turn(), THINKING, typing_delay)
    turn = pause(turn, typing_delay).tool_call(TOOL_NAME, {"text": text}, result=f"{words} word{s}")
    if text.startswith(FAIL_COMMAND):
        return pause(turn, typing_delay).error(FAILURE)
    answer = [chunk.format(text=text, words=words, s=s) for chunk in ANSWER]
    turn = typed(turn, answer, typing_delay)
    return turn.usage(input_tokens=words, output_tokens=sum(len(c.split()) for c in answer))


class SimulatedGoose(FakeGoose):
    """A `FakeGoose` for the demo that keeps the sessions it is given, as goosed keeps its
    sessions on disk across restarts, and never hands out one of their ids again."""

    def __init__(
        self, session_ids: Iterable[str] = (), *, typing_delay: float = TYPING_DELAY
    ) -> None:
        super().__init__(
            secret_key=SECRET_KEY,
            default_turn=functools.partial(demo_turn, typing_delay=typing_delay),
        )
        # The log's streams stay bound to the sessions of an earlier run of the demo: without
        # them every later run of those conversations would fail with "session not found".
        for session_id in session_ids:
            self.sessions[session_id] = SessionRecord(session_id)
        self.upstream = GooseUpstream(
            GOOSE_URL, secret_key=self.secret_key, client=self.client(GOOSE_URL)
        )

    def create_session(
        self,
        *,
        working_dir: str = DEFAULT_WORKING_DIR,
        name: str = SESSION_NAME,
        extensions: Sequence[JSONObject] | None = None,
    ) -> str:
        # The fake numbers sessions from 1 in every process, so a demo started again today
        # would hand out ids that streams of the log are already bound to.
        session_id = new_session_id()
        while session_id in self.sessions:
            session_id = new_session_id()
        session = SessionRecord(session_id, working_dir=working_dir, name=name)
        session.extensions = [
            dict(e) for e in (self.extensions if extensions is None else extensions)
        ]
        self.sessions[session_id] = session
        return session_id

    async def aclose(self) -> None:
        """End the running turns and open event streams, as goosed stopping does; call it on
        the loop that serves the gateway, after the gateway has stopped its pumps."""
        self.restart()
        await self.upstream.client.aclose()
