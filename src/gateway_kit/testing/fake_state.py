"""What the fake goose holds and what a test scripts on it: sessions, their scripted turns and
refused replies, the calls it was asked, its extensions and tools (`FakeGoose` serves them)."""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from gateway_kit.types import JSONObject

from .bus import REPLAY_BUFFER_SIZE, SUBSCRIBER_QUEUE_SIZE, SessionBus
from .confirmations import ELICITATION_OTHER_SESSION, ElicitationAnswer, SessionWaits
from .extensions import DEFAULT_EXTENSIONS, DEFAULT_TOOLS
from .records import CancelCall, ConfirmationCall, EventsCall, RecordedRequest, ReplyCall
from .sessions import DEFAULT_WORKING_DIR, SESSION_NAME, SessionRecord, new_session_id
from .turns import Turn, echo_turn
from .wire import Reject

DEFAULT_SECRET_KEY = "fake-goose-secret"
PING_INTERVAL = 0.5


class FakeGooseState:
    """The fake goose's sessions and records, and the methods a test scripts them with."""

    def __init__(
        self,
        *,
        secret_key: str = DEFAULT_SECRET_KEY,
        ping_interval: float = PING_INTERVAL,
        replay_buffer_size: int = REPLAY_BUFFER_SIZE,
        subscriber_queue_size: int = SUBSCRIBER_QUEUE_SIZE,
        default_turn: Callable[[JSONObject], Turn] = echo_turn,
        extensions: Sequence[JSONObject] = DEFAULT_EXTENSIONS,
        tools: Mapping[str, Sequence[str]] = DEFAULT_TOOLS,
    ) -> None:
        self.secret_key = secret_key
        self.ping_interval = ping_interval
        self.default_turn = default_turn
        self.extensions = [dict(e) for e in extensions]  # of a session started without overrides
        self.tools = {name: list(names) for name, names in tools.items()}  # extension → tools
        self._replay_buffer_size = replay_buffer_size
        self._subscriber_queue_size = subscriber_queue_size
        self.sessions: dict[str, SessionRecord] = {}
        self._buses: dict[str, SessionBus] = {}
        self._waits: dict[str, SessionWaits] = {}  # approve mode's, per session
        self._scripts: dict[str, deque[Turn]] = {}
        self._next_sessions: deque[tuple[Turn, ...]] = deque()  # for sessions not made yet
        self._refusals: dict[str, deque[Reject]] = {}
        self._turn_tasks: set[asyncio.Task[None]] = set()
        self._turn_failures: list[BaseException] = []
        self.requests: list[RecordedRequest] = []
        self.reply_calls: list[ReplyCall] = []
        self.cancel_calls: list[CancelCall] = []
        self.events_calls: list[EventsCall] = []
        self.confirmation_calls: list[ConfirmationCall] = []

    # --- for tests

    def create_session(
        self,
        *,
        working_dir: str = DEFAULT_WORKING_DIR,
        name: str = SESSION_NAME,
        extensions: Sequence[JSONObject] | None = None,
    ) -> str:
        """Create a session as `POST /agent/start` does, without a request; its extensions are
        `extensions`, else the fake's."""
        chosen = copy.deepcopy(list(self.extensions if extensions is None else extensions))
        session = SessionRecord(new_session_id(), working_dir=working_dir, name=name)
        session.extensions = chosen
        self.sessions[session.id] = session
        if self._next_sessions:
            self.script(session.id, *self._next_sessions.popleft())
        return session.id

    def refuse_replies(
        self, session_id: str, status: int, message: str, *, retry_after: str | None = None
    ) -> None:
        """Answer the session's next `reply` with this error (each call queues one), as goose
        or a proxy before it does when it is overloaded; `retry_after` is sent as `Retry-After`."""
        headers = {} if retry_after is None else {"retry-after": retry_after}
        self._refusals.setdefault(session_id, deque()).append(Reject(status, message, headers))

    def script(self, session_id: str, *turns: Turn) -> None:
        """Queue what the next replies of the session do; unscripted replies echo."""
        self._scripts.setdefault(session_id, deque()).extend(turns)

    def script_next_session(self, *turns: Turn) -> None:
        """Queue what the replies of a session not made yet do: the session a gateway's run
        starts with `POST /agent/start` (or `create_session`), whose id a test cannot know
        beforehand. Each call scripts one session, in the order they are made: a second call
        scripts the session made after that one (a recovery's clean session, say)."""
        self._next_sessions.append(turns)

    def conversation(self, session_id: str) -> list[JSONObject]:
        """The session's stored history (a copy): streamed chunks merged, as goose keeps it."""
        return copy.deepcopy(self.sessions[session_id].conversation)

    def active_request_ids(self, session_id: str) -> list[str]:
        bus = self._buses.get(session_id)
        return bus.active_request_ids() if bus else []

    def buffered_events(self, session_id: str) -> list[tuple[int, JSONObject]]:
        """The replay buffer as `(id, json)` pairs, each JSON as it goes on the wire."""
        bus = self._buses.get(session_id)
        return [(event.id, event.wire_json()) for event in bus.buffered()] if bus else []

    def pending_confirmations(self, session_id: str) -> list[str]:
        """The ids the session's turns wait for an answer to: tool requests waiting for their
        confirmation, then elicitations."""
        waits = self._waits.get(session_id)
        return waits.pending() if waits else []

    async def wait_idle(self) -> None:
        """Wait until every background turn has ended; re-raise the first that failed."""
        while self._turn_tasks:
            await asyncio.wait(set(self._turn_tasks))
        if self._turn_failures:
            raise self._turn_failures[0]

    def restart(self) -> None:
        """Simulate a goosed restart; call it on the event loop that serves the fake.

        ids start again at 1, replay buffers are empty, running turns die without another
        event (those waiting for a confirmation or an elicitation's answer too; confirmations
        nobody took are lost), open event streams end. Sessions and their conversations stay
        (goose keeps them on disk).
        """
        for bus in self._buses.values():
            bus.close()
        self._buses.clear()
        self._waits.clear()
        for task in self._turn_tasks:
            task.cancel()

    def clear_calls(self) -> None:
        for calls in (
            self.requests,
            self.reply_calls,
            self.cancel_calls,
            self.events_calls,
            self.confirmation_calls,
        ):
            calls.clear()

    # --- approve mode

    def _session_waits(self, session_id: str) -> SessionWaits:
        if session_id not in self._waits:
            self._waits[session_id] = SessionWaits()
        return self._waits[session_id]

    def _answer_elicitation(
        self, session_id: str, elicitation_id: str, answer: ElicitationAnswer
    ) -> str | None:
        """Hand an elicitation's answer to the session's turn waiting for it; goose's error if
        none does."""
        error = self._session_waits(session_id).answer(elicitation_id, answer)
        if error is None:
            return None
        for owner, waits in self._waits.items():
            if owner != session_id and waits.awaits_elicitation(elicitation_id):
                return ELICITATION_OTHER_SESSION.format(elicitation_id, owner, session_id)
        return error
