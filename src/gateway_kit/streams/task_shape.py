"""`TaskPollShape`: how an app's own task poll looks, so that the gateway can answer it from the
log without its clients noticing.

Every legacy app polls its tasks its own way. The gateway reads the same facts from the log for
all of them (a `PolledTask`: the task's events from the client's offset, its status, the next
offset) and the app says how its answer looks:

    def my_answer(task: PolledTask) -> dict:
        return {
            "job": task.task_id,
            "phase": {"running": "busy"}.get(task.status, "over"),
            "events": [{"i": e.idx, "what": e.type, "body": e.data} for e in task.events],
            "cursor": task.next_offset,
        }

    TaskPollShape(
        answer=my_answer,
        offset_param="cursor",
        not_found=(404, {"error": "no such job"}),
        unauthenticated=(404, {"error": "no such job"}),
    )

The default shape is the example app's (``{"task_id", "status", "events": [{"idx", "type",
"data", "ts"}], "next_offset"}``, its errors the gateway's JSON errors), streamed as it is
encoded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import SettingsError
from ..http.errors import NOT_FOUND, UNAUTHENTICATED

RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
DEFAULT_OFFSET_PARAM = "from"
NO_SUCH_TASK = "no task {task_id} of yours"
NO_PRINCIPAL = "this request needs credentials"
BAD_ANSWER = "TaskPollShape(answer=...) must be a function of a PolledTask, got {value!r}"
BAD_ERROR = "TaskPollShape({name}=...) must be (an HTTP status, a JSON document), got {value!r}"
BAD_PARAM = "TaskPollShape(offset_param=...) must be a non-empty string, got {value!r}"

Answer = tuple[int, Any]


@dataclass(frozen=True, slots=True)
class TaskEvent:
    """One event of a task: its index within the task (from 0), type, data, commit time (epoch
    seconds) and seq in the log."""

    idx: int
    type: str
    data: dict[str, Any]
    ts: float
    seq: int


@dataclass(frozen=True, slots=True)
class PolledTask:
    """What one poll of a task gives its client: the events from its offset, the task's status
    as the client may know it (``running`` until it has been given the terminal event, then
    ``completed`` or ``failed``), and the offset to poll from next."""

    task_id: str
    status: str
    events: list[TaskEvent]
    next_offset: int


def _default_not_found(task_id: str) -> Answer:
    return 404, {"error": NOT_FOUND, "message": NO_SUCH_TASK.format(task_id=task_id)}


def _check_error(name: str, value: object) -> None:
    if callable(value):
        return
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], int)
        and 100 <= value[0] <= 599
    ):
        raise SettingsError(BAD_ERROR.format(name=name, value=value))


@dataclass(frozen=True, slots=True)
class TaskPollShape:
    """:param answer: the app's answer to a poll, as a JSON document, from a `PolledTask`; None
        for the example app's shape.
    :param offset_param: the query parameter the app's clients send their offset in.
    :param not_found: the app's answer for a task of another user (it says nothing of whether
        the task exists): ``(status, document)``, or a function of the task id giving one.
    :param unauthenticated: the app's answer to a poll without credentials, likewise.
    """

    answer: Callable[[PolledTask], Any] | None = None
    offset_param: str = DEFAULT_OFFSET_PARAM
    not_found: Answer | Callable[[str], Answer] = field(default=_default_not_found)
    unauthenticated: Answer | Callable[[str], Answer] = field(
        default=(401, {"error": UNAUTHENTICATED, "message": NO_PRINCIPAL})
    )

    def __post_init__(self) -> None:
        if self.answer is not None and not callable(self.answer):
            raise SettingsError(BAD_ANSWER.format(value=self.answer))
        if not isinstance(self.offset_param, str) or not self.offset_param:
            raise SettingsError(BAD_PARAM.format(value=self.offset_param))
        _check_error("not_found", self.not_found)
        _check_error("unauthenticated", self.unauthenticated)

    def refusal(self, which: str, task_id: str) -> Answer:
        """The app's ``not_found`` or ``unauthenticated`` answer about `task_id`."""
        chosen = self.not_found if which == "not_found" else self.unauthenticated
        return chosen(task_id) if callable(chosen) else chosen


EXAMPLE_SHAPE = TaskPollShape()
