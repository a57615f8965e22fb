"""The legacy task poll, ``GET /api/tasks/<task_id>?from=<idx>``, answered from the log.

The legacy server kept each task's events in a process-memory deque, numbered per task from 0,
and answered ``{"events": [{"idx", "type", "data", "ts"}, ...], "next_offset"}`` with every
event whose idx is at least ``from``; `next_offset` is the last idx plus one, or ``from``
unchanged when there is nothing new. Here the task id is the run id of the log: idx is the
event's position within its run, `ts` its commit time (epoch seconds). The answer also carries
``task_id`` and ``status``: ``"running"`` until the client has been given the run's terminal
event, then ``"completed"`` (``Finish``) or ``"failed"`` (``Error``).

That is the example app's shape. Every app polls its own way: a `TaskPollShape` says how the
app's answer looks (a function of the task's events, status and next offset), which query
parameter carries the offset, and the app's own answers for another user's task and for a
poll without credentials, so that its unmodified clients keep working.

A task the log does not know is not answered here: the request goes on to the wrapped app, so
a legacy app that still keeps its own deque keeps working while its writes move to the log. A
task the log knows needs a principal (the shape's ``unauthenticated`` answer) and is read only
by whom `authorize_subscription` allows to read its stream; the others get the shape's
``not_found`` answer, which says nothing of whether the task exists.
One answer holds at most `MAX_EVENTS` events, the old deque's capacity, and stops after the
event whose data brings it to the gateway's `max_page_bytes` (it always holds one); a client
that polls with `next_offset` gets the rest on its next poll.
"""

from __future__ import annotations

import json
import logging

from ..exceptions import DatabaseUnavailable, InvalidEvent
from ..hooks import Plugins
from ..http.errors import HTTPError, send_json
from ..http.request import BadPath, Request, decode_segment, relative_path
from ..log import EventLog
from ..log.event import ERROR, FINISH, MAX_SEQ, Event, check_name, shown
from ..principal import principal_of
from ..settings import DEFAULT_LEGACY_TASKS_PATH
from ..types import ASGIApp, Receive, Scope, Send
from .page import send_json_pieces
from .request import INVALID_CURSOR, BadRequest, bounded_int
from .runindex import RunEntry
from .service import StreamService, log_unavailable, service_of
from .task_shape import EXAMPLE_SHAPE, RUNNING, PolledTask, TaskEvent, TaskPollShape

logger = logging.getLogger(__name__)

MAX_EVENTS = 20_000
BAD_OFFSET = "{name} must be a non-negative integer index, got {value}"
OFFSET_TOO_LARGE = "{name} is larger than any index a task can have, got {value}"
STATUS_BY_TERMINAL = {FINISH: "completed", ERROR: "failed"}


class LegacyTaskPoll:
    """Answers ``GET {path}/<task_id>?from=<idx>`` from the log when the log knows the task;
    every other request passes on to the app below.

    :param plugins: whose `authorize_subscription` decides who reads a task.
    :param service: the stream machinery shared with the other parts that read the log.
    :param log: instead of `service`, the log the tasks' events are read from (a service of
        the part's own is made from it).
    :param path: where the legacy poll lives.
    :param shape: how the app's poll looks (`TaskPollShape`); the example app's by default.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        plugins: Plugins,
        service: StreamService | None = None,
        log: EventLog | None = None,
        path: str = DEFAULT_LEGACY_TASKS_PATH,
        shape: TaskPollShape = EXAMPLE_SHAPE,
    ) -> None:
        self.app = app
        self.shape = shape
        self.service = service_of(type(self).__name__, service, log)
        self.plugins = plugins
        self._under = path.rstrip("/") + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path = relative_path(scope)
            raw = path[len(self._under) :] if path.startswith(self._under) else ""
            if raw and "/" not in raw:
                try:
                    task_id = decode_segment(raw)
                except BadPath:
                    task_id = ""  # not a task of the log: the app may know it
                if task_id:
                    request = Request(scope, receive, send, {"task_id": task_id})
                    try:
                        if await self.poll(request, task_id):
                            return
                    except HTTPError as error:
                        await error.send(send)
                        return
        await self.app(scope, receive, send)

    async def poll(self, request: Request, task_id: str) -> bool:
        """Answer the poll; False (nothing sent) when the log holds no event of the task."""
        try:
            check_name("run_id", task_id)
        except InvalidEvent:
            return False  # not a task of the log: the app may know it
        entry = await self.service.run_entry(task_id)
        if entry is None:
            return False
        shape = self.shape
        principal = principal_of(request.scope)
        if principal is None:
            await send_json(request.send, *shape.refusal("unauthenticated", task_id))
            return True
        offset = parse_offset(request.query, shape.offset_param)
        if not await self.plugins.authorize_subscription(principal, entry.stream):
            # As the legacy app answered another user's task: whether it exists stays unsaid.
            await send_json(request.send, *shape.refusal("not_found", task_id))
            return True
        try:
            if shape.answer is None:
                await serve_legacy_poll(
                    request.send,
                    self.service.log,
                    entry,
                    task_id,
                    offset,
                    self.service.options.max_page_bytes,
                )
            else:
                polled = await poll_task(
                    self.service.log, entry, task_id, offset, self.service.options.max_page_bytes
                )
                await send_json(request.send, 200, shape.answer(polled))
        except DatabaseUnavailable:
            raise
        except Exception:
            logger.exception("serving a legacy task poll failed")
            raise log_unavailable() from None
        return True


def parse_offset(params: dict[str, str], name: str = "from") -> int:
    value = params.get(name, "0").strip() or "0"
    if not (value.isascii() and value.isdigit()):
        given = shown(params.get(name))
        raise BadRequest(INVALID_CURSOR, BAD_OFFSET.format(name=name, value=given))
    offset = bounded_int(value, MAX_SEQ)
    if offset > MAX_SEQ:
        message = OFFSET_TOO_LARGE.format(name=name, value=shown(params.get(name)))
        raise BadRequest(INVALID_CURSOR, message)
    return offset


async def read_from(
    log: EventLog, entry: RunEntry, task_id: str, offset: int, max_bytes: int | None
) -> tuple[list[Event], int, str]:
    """The task's events from index `offset` (capped by `max_bytes` of data, one at least),
    the next offset, and the status a client given them may know."""
    known = len(entry.seqs)
    events: list[Event] = []
    if offset < known:
        after = entry.seqs[offset - 1] if offset else 0
        limit = min(known - offset, MAX_EVENTS)
        events = await log.aread(after, None, limit, run_id=task_id, max_bytes=max_bytes)
    next_offset = offset + len(events) if events else offset
    delivered = min(next_offset, known)
    client_seq = entry.seqs[delivered - 1] if delivered else 0
    status = RUNNING
    if entry.terminal_type is not None and entry.ended_by(client_seq):
        status = STATUS_BY_TERMINAL.get(entry.terminal_type, RUNNING)
    return events, next_offset, status


async def poll_task(
    log: EventLog, entry: RunEntry, task_id: str, offset: int, max_bytes: int | None = None
) -> PolledTask:
    """What a poll of `task_id` from `offset` gives, for an app's own shape."""
    events, next_offset, status = await read_from(log, entry, task_id, offset, max_bytes)
    items = [
        TaskEvent(offset + i, e.type, e.data, e.created_at.timestamp(), e.seq)
        for i, e in enumerate(events)
    ]
    return PolledTask(task_id, status, items, next_offset)


async def serve_legacy_poll(
    send: Send,
    log: EventLog,
    entry: RunEntry,
    task_id: str,
    offset: int,
    max_bytes: int | None = None,
) -> None:
    """Answer the poll of `task_id`, whose entry the run index holds, from index `offset`, in
    the example app's shape, encoded as it is sent; `max_bytes` caps the answer by its events'
    data (it holds one event at least)."""
    events, next_offset, status = await read_from(log, entry, task_id, offset, max_bytes)
    items = (
        f'{"," if i else ""}{{"idx":{offset + i},"type":{json.dumps(e.type)},'
        f'"data":{e.data_json},"ts":{e.created_at.timestamp()!r}}}'
        for i, e in enumerate(events)
    )
    head = f'{{"task_id":{json.dumps(task_id)},"status":"{status}","events":['
    await send_json_pieces(send, 200, [head, items, f'],"next_offset":{next_offset}}}'])
