"""One goose session's event bus: ids, the replay buffer, live subscribers, active requests.

Mirrors goosed's per-session bus, which lives in memory only: a restart of goosed loses it, so
ids start again at 1 and the replay buffer is empty.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from dataclasses import dataclass, field

from gateway_kit.types import JSONObject

REPLAY_BUFFER_SIZE = 512
SUBSCRIBER_QUEUE_SIZE = 256
TOO_FAR_BEHIND_ERROR = "Client too far behind — reload conversation"

# goose parses the header as a Rust u64: optional "+", decimal digits, below 2**64.
_U64 = re.compile(r"\+?[0-9]+")
_U64_LIMIT = 2**64


def parse_last_event_id(header: str | None) -> int | None:
    """Read `Last-Event-ID` as goose does: anything that is not a u64 counts as absent."""
    if header is None or not _U64.fullmatch(header):
        return None
    value = int(header)
    return value if value < _U64_LIMIT else None


@dataclass(frozen=True)
class BusEvent:
    """An event as goose keeps it: its id, the reply request it belongs to, its JSON."""

    id: int
    request_id: str | None
    event: JSONObject
    frame: bytes = field(init=False, repr=False, compare=False)  # the SSE frame goose sends

    def wire_json(self) -> JSONObject:
        """The JSON goose sends: `chat_request_id` added, `request_id` added where absent."""
        payload = dict(self.event)
        if self.request_id is not None:
            payload["chat_request_id"] = self.request_id
            payload.setdefault("request_id", self.request_id)
        return payload

    def __post_init__(self) -> None:
        # Serialized once, as it is published: sending it, live or replayed, costs no encoding.
        text = json.dumps(self.wire_json(), ensure_ascii=False, separators=(",", ":"))
        object.__setattr__(self, "frame", f"id: {self.id}\ndata: {text}\n\n".encode())


class Subscription:
    """A live listener with a bounded queue; one that falls behind is dropped, as goose does."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: deque[BusEvent] = deque()
        self._ready = asyncio.Event()
        self.closed = False
        self.lagged = False

    def push(self, event: BusEvent) -> None:
        if self.closed:
            return
        if len(self._items) >= self._limit:
            # goose closes a lagging stream so the client reconnects with Last-Event-ID.
            self.lagged = True
            self._items.clear()
            self.close()
            return
        self._items.append(event)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def next(self) -> BusEvent | None:
        """The next event, or None once the subscription is closed."""
        while not self._items:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class TooFarBehind(Exception):
    """The client's cursor is below the oldest buffered id: goose cannot resume it."""


class SessionBus:
    def __init__(
        self,
        *,
        buffer_size: int = REPLAY_BUFFER_SIZE,
        queue_size: int = SUBSCRIBER_QUEUE_SIZE,
    ) -> None:
        self._next_id = 1
        self._buffer: deque[BusEvent] = deque(maxlen=buffer_size)
        self._queue_size = queue_size
        self._subscriptions: set[Subscription] = set()
        self._active: dict[str, asyncio.Event] = {}
        # With `hold_cancelled`: cancelled requests that keep the session busy until released.
        self._release: asyncio.Event | None = None
        self._held: set[str] = set()
        self.closed = False

    # --- events

    def publish(self, request_id: str | None, event: JSONObject) -> BusEvent | None:
        if self.closed:
            return None  # a task of a goosed that has been restarted: its events are lost
        stored = BusEvent(self._next_id, request_id, event)
        self._next_id += 1
        self._buffer.append(stored)
        for subscription in list(self._subscriptions):
            subscription.push(stored)
            if subscription.closed:
                self._subscriptions.discard(subscription)
        return stored

    def buffered(self) -> list[BusEvent]:
        return list(self._buffer)

    def subscribe(self, last_event_id: int | None) -> tuple[list[BusEvent], Subscription]:
        """Replay after `last_event_id` plus a live subscription, with no gap between them.

        Raises TooFarBehind when the cursor is below the oldest buffered id.
        """
        after = last_event_id or 0
        if after and self._buffer and after < self._buffer[0].id:
            raise TooFarBehind
        subscription = Subscription(self._queue_size)
        if self.closed:
            subscription.close()
        else:
            self._subscriptions.add(subscription)
        # An id above the newest replays nothing, silently; live events still follow.
        return [event for event in self._buffer if event.id > after], subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    # --- requests

    def try_register(self, request_id: str) -> asyncio.Event | None:
        """Register a reply; None while another request of the session is active (or, with
        `hold_cancelled`, a cancelled one is not released yet)."""
        if self._release is not None and self._release.is_set():
            self._held.clear()
        if self._active or self._held:
            return None
        cancelled = asyncio.Event()
        self._active[request_id] = cancelled
        return cancelled

    def cancel(self, request_id: str) -> None:
        """Cancel a request and free the session at once (with `hold_cancelled`, once
        released); unknown ids are ignored."""
        cancelled = self._active.pop(request_id, None)
        if cancelled is not None:
            cancelled.set()
            if self._release is not None and not self._release.is_set():
                self._held.add(request_id)

    def hold_cancelled(self, release: asyncio.Event) -> None:
        """From now on a cancelled request keeps the session busy until `release` is set."""
        self._release = release

    def finish(self, request_id: str) -> None:
        self._active.pop(request_id, None)

    def active_request_ids(self) -> list[str]:
        return list(self._active)

    def close(self) -> None:
        """End every open stream and forget the active requests (goosed went away)."""
        self.closed = True
        for subscription in self._subscriptions:
            subscription.close()
        self._subscriptions.clear()
        for cancelled in self._active.values():
            cancelled.set()
        self._active.clear()
        self._held.clear()
