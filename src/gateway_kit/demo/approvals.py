"""The legacy app's tool approvals, as the legacy server kept them: a dict in process memory.

This is the pattern the gateway's durable approvals replace, kept as the "before" of the
example, its faults included:

- one manager per process (the legacy server's singleton; the example app's, in its
  ``extensions``), its requests bound to a username and a conversation: a restart loses every
  pending one (`forget_all` is what it does to the dict);
- the task's thread waits by polling the dict (`wait`); when its request is gone (the process
  restarted) it gets the refusal ``approval_missing``;
- every client of the user is shown the prompt, and whoever answers first wins (`decide`):
  who answered is recorded nowhere, and a later answer is dropped.

The example app starts such a wait with the message ``/confirm TOOL [ARGUMENTS]`` (see
`gateway_kit.demo.agent`), answers ``POST /api/tool-approvals/<id>`` with ``{"approved"}``,
and lists the user's pending ones at ``GET /api/plan-approvals/pending``. Behind a gateway,
that list is the gateway's, from its durable approvals, in the same shape.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

PENDING = "pending"
APPROVED = "approved"
REJECTED = "rejected"
APPROVAL_MISSING = "approval_missing"  # the request is gone: the process restarted
TIMEOUT = "timeout"
POLL_INTERVAL = 0.05  # seconds between a waiting thread's looks at the dict
DEFAULT_WAIT = 300.0  # seconds a task waits for an answer


class ToolApprovalManager:
    """Tool approvals of this process; thread-safe (task threads wait, requests answer)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def create_request(
        self,
        username: str,
        conversation_id: str,
        tool_name: str,
        arguments: dict[str, Any],
        prompt: str | None = None,
    ) -> str:
        """A new pending request of `username`'s; its id."""
        approval_id = uuid.uuid4().hex
        item = {
            "id": approval_id,
            "approval_id": approval_id,
            "conversation_id": conversation_id,
            "username": username,
            "tool_name": tool_name,
            "arguments": dict(arguments),
            "prompt": prompt,
            "status": PENDING,
            "created_at": time.time(),
        }
        with self._lock:
            self._items[approval_id] = item
        return approval_id

    def get(self, approval_id: str) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get(approval_id)
            return None if item is None else dict(item)

    def decide(self, approval_id: str, username: str, approved: bool) -> bool:
        """Answer the request, if it is `username`'s and still pending: the first answer wins,
        and who gave it is kept nowhere. Whether this answer was taken."""
        with self._lock:
            item = self._items.get(approval_id)
            if item is None or item["username"] != username or item["status"] != PENDING:
                return False
            item["status"] = APPROVED if approved else REJECTED
            return True

    def wait(self, approval_id: str, timeout: float, *, interval: float = POLL_INTERVAL) -> str:
        """What the task thread does: poll until the request is answered (``approved`` or
        ``rejected``), gone (``approval_missing``) or `timeout` seconds have passed
        (``timeout``); the request is then forgotten."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                item = self._items.get(approval_id)
                if item is None:
                    return APPROVAL_MISSING
                if item["status"] != PENDING or time.monotonic() >= deadline:
                    del self._items[approval_id]
                    return str(item["status"]) if item["status"] != PENDING else TIMEOUT
            time.sleep(interval)

    def pending(self, username: str, conversation_id: str | None = None) -> list[dict[str, Any]]:
        """`username`'s pending requests, of one conversation or of all, oldest first."""
        with self._lock:
            items = [
                dict(item)
                for item in self._items.values()
                if item["username"] == username
                and item["status"] == PENDING
                and (conversation_id is None or item["conversation_id"] == conversation_id)
            ]
        return sorted(items, key=lambda item: item["created_at"])

    def forget_all(self) -> None:
        """What a restart does to process memory: every request is gone."""
        with self._lock:
            self._items.clear()
