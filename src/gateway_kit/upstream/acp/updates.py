"""`session/update` notifications, handed to whoever listens to their session, in wire order.

Listeners are called synchronously, in the order the agent sent the updates, from the task
reading the connection: a listener must not block (append to a list, put in a queue). A turn
listens until the agent answers its prompt; an update that comes while nobody listens to its
session (outside any turn, or after the answer) goes to `unrouted`.

The router also remembers what the agent said of each tool call (title, kind, arguments,
`_meta`), since a permission request names the call by id and often says less of it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...types import JSONObject

logger = logging.getLogger(__name__)

MAX_REMEMBERED_TOOL_CALLS = 1000
TOOL_CALL_KINDS = ("tool_call", "tool_call_update")


@dataclass(frozen=True, slots=True)
class AcpUpdate:
    """One ``session/update``: the ``update`` object as the agent sent it, the notification's
    ``_meta``, and whether it replays history (sent while ``session/load`` was answered)."""

    session_id: str
    update: JSONObject
    meta: JSONObject | None = None
    replay: bool = False

    @property
    def kind(self) -> str | None:
        kind = self.update.get("sessionUpdate")
        return kind if isinstance(kind, str) else None


Listener = Callable[[AcpUpdate], None]


@dataclass(eq=False, slots=True)
class _Subscription:
    listener: Listener
    until_answered: bool
    prompt_id: object = None  # the request id of the prompt whose answer ends it


class UpdateRouter:
    def __init__(self, unrouted: Listener | None = None) -> None:
        self._unrouted = unrouted
        self._listeners: dict[str, list[_Subscription]] = {}
        self._tool_calls: OrderedDict[tuple[str, str], JSONObject] = OrderedDict()

    def listen(
        self, session_id: str, listener: Listener, *, until_answered: bool = False
    ) -> Callable[[], None]:
        """Call `listener` with each update of the session; with `until_answered` only until the
        agent answers the session's prompt. Returns the function that stops it."""
        subscription = _Subscription(listener, until_answered)
        self._listeners.setdefault(session_id, []).append(subscription)

        def stop() -> None:
            subscriptions = self._listeners.get(session_id, [])
            if subscription in subscriptions:
                subscriptions.remove(subscription)
            if not subscriptions:
                self._listeners.pop(session_id, None)

        return stop

    def deliver(self, update: AcpUpdate) -> None:
        if update.kind in TOOL_CALL_KINDS:
            self._remember(update)
        subscriptions = self._listeners.get(update.session_id)
        targets = [s.listener for s in subscriptions] if subscriptions else [self._unrouted]
        for listener in targets:
            if listener is None:
                logger.debug("an update of session %s nobody listens to", update.session_id)
                continue
            try:
                listener(update)
            except Exception:
                logger.exception("a listener of session %s failed", update.session_id)

    def prompt_sent(self, session_id: str, request_id: object) -> None:
        """A prompt of the session was sent: the turn listeners waiting for one end with its
        answer (and not with the late answer to a prompt given up before)."""
        for subscription in self._listeners.get(session_id, ()):
            if subscription.until_answered and subscription.prompt_id is None:
                subscription.prompt_id = request_id

    def prompt_answered(self, session_id: str, request_id: object) -> None:
        """The agent answered a prompt of the session: its turn listeners stop here."""
        subscriptions = self._listeners.get(session_id)
        if subscriptions:
            kept = [
                s for s in subscriptions if not (s.until_answered and s.prompt_id == request_id)
            ]
            if kept:
                self._listeners[session_id] = kept
            else:
                del self._listeners[session_id]

    def tool_call(self, session_id: str, tool_call_id: str) -> JSONObject | None:
        """What the agent said of a tool call so far, merged; None for one it never announced."""
        return self._tool_calls.get((session_id, tool_call_id))

    def _remember(self, update: AcpUpdate) -> None:
        call_id = update.update.get("toolCallId")
        if not isinstance(call_id, str):
            return
        key = (update.session_id, call_id)
        said = {k: v for k, v in update.update.items() if v is not None and k != "sessionUpdate"}
        known = self._tool_calls.pop(key, None)
        self._tool_calls[key] = said if known is None else {**known, **said}
        while len(self._tool_calls) > MAX_REMEMBERED_TOOL_CALLS:
            self._tool_calls.popitem(last=False)


def update_from(params: object, *, replay: bool = False) -> AcpUpdate | None:
    """The update a ``session/update`` notification's params carry; None for params of another
    shape."""
    if not isinstance(params, Mapping):
        return None
    session_id = params.get("sessionId")
    update = params.get("update")
    if not isinstance(session_id, str) or not isinstance(update, dict):
        return None
    meta = params.get("_meta")
    return AcpUpdate(session_id, update, meta if isinstance(meta, dict) else None, replay)
