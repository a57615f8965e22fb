"""The legacy task store: each task's events in a deque in process memory, numbered from 0.

This is the pattern gateway_kit replaces, kept as the "before" of the example: events live as
long as the process, a client reads them by polling ``GET /api/tasks/<id>?from=<idx>``, and the
answer is ``{"task_id", "status", "events": [{"idx", "type", "data", "ts"}], "next_offset"}``.
`status` turns from ``"running"`` to ``"completed"`` (``Finish``) or ``"failed"`` (``Error``)
in the answer that hands over the terminal event, so a client that stops polling on it has
seen every event. The gateway answers the same poll from the log with the same shape.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..app_runs.guards import RunGuards
from ..app_runs.owned import owned_run
from ..coordination.leases import DEFAULT_LEASE_TTL
from ..log import EventLog
from ..log.event import ERROR, FINISH

MAX_EVENTS = 20_000  # the legacy deque's capacity
RUNNING = "running"
STATUS_BY_TERMINAL = {FINISH: "completed", ERROR: "failed"}

# write(type, data): how a task's turn records one event, wherever events are kept.
EventWriter = Callable[[str, dict[str, Any]], None]
# follow_up(write, prompt): the task's next turn, when a finish guard says what is missing.
TaskFollowUp = Callable[[EventWriter, str], None]


@dataclass
class Task:
    task_id: str
    conversation_id: str
    owner: str
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_EVENTS))
    next_idx: int = 0
    terminal_idx: int | None = None
    terminal_type: str | None = None


class TaskStore:
    """Tasks of this process; thread-safe (turns write from their own threads)."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        # Iterating a deque while another thread appends raises RuntimeError: one lock for both.
        self._lock = threading.Lock()

    def create(self, conversation_id: str, owner: str) -> Task:
        task = Task(task_id=uuid.uuid4().hex, conversation_id=conversation_id, owner=owner)
        with self._lock:
            self._tasks[task.task_id] = task
        return task

    def get(self, task_id: str) -> Task | None:
        with self._lock:
            return self._tasks.get(task_id)

    def append(self, task: Task, type: str, data: dict[str, Any]) -> None:
        with self._lock:
            idx = task.next_idx
            task.events.append({"idx": idx, "type": type, "data": data, "ts": time.time()})
            task.next_idx = idx + 1
            if task.terminal_idx is None and type in STATUS_BY_TERMINAL:
                task.terminal_idx, task.terminal_type = idx, type

    def poll(self, task: Task, offset: int) -> dict[str, Any]:
        """The legacy answer: every event with idx >= `offset`."""
        with self._lock:
            events = [dict(e) for e in task.events if e["idx"] >= offset]
            terminal_idx, terminal_type = task.terminal_idx, task.terminal_type
        next_offset = events[-1]["idx"] + 1 if events else offset
        status = RUNNING
        if terminal_type is not None and terminal_idx is not None and terminal_idx < next_offset:
            status = STATUS_BY_TERMINAL[terminal_type]
        return {
            "task_id": task.task_id,
            "status": status,
            "events": events,
            "next_offset": next_offset,
        }


@dataclass(frozen=True)
class TaskEvents:
    """Where a task's turn writes its events, and what holds the task open until it ends."""

    write: EventWriter
    held: AbstractContextManager[object]


def task_events(
    task: Task,
    store: TaskStore,
    log: EventLog | None,
    *,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    guards: RunGuards | None = None,
    follow_up: TaskFollowUp | None = None,
) -> TaskEvents:
    """The task's own deque, or the log when the app has one (`InvalidEvent` when the log
    cannot hold the task's conversation id). In the log, the task's run is held to `guards`
    (a gateway's finish guards), whose vetoes `follow_up` answers with another turn."""
    if log is None:
        return TaskEvents(lambda type, data: store.append(task, type, data), nullcontext())
    # The task is a run of the conversation's stream, owned by this process: it ends when the
    # turn does, or with an Error when the process dies mid-turn. The gateway's legacy poll
    # numbers a run's events from 0, as the deque did.
    run = owned_run(
        log,
        stream=task.conversation_id,
        run_id=task.task_id,
        lease_ttl=lease_ttl,
        owner=task.owner,  # the user's own conversation: the gateway lets only them read it
        guards=guards,
        follow_up=None if follow_up is None else lambda prompt: follow_up(write_to_run, prompt),
    )

    def write_to_run(type: str, data: dict[str, Any]) -> None:
        run.append(type, data)

    return TaskEvents(write_to_run, run)
