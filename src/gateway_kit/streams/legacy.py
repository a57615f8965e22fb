"""The legacy task poll, ``GET /api/tasks/<task_id>?from=<idx>``, answered from the log.

The legacy server kept each task's events in a process-memory deque, numbered per task from 0,
and answered ``{"events": [{"idx", "type", "data", "ts"}, ...], "next_offset"}`` with every
event whose idx is at least ``from``; `next_offset` is the last idx plus one, or ``from``
unchanged when there is nothing new. Here the task id is the run id of the log: idx is the
event's position within its run, `ts` its commit time (epoch seconds). The answer also carries
``task_id`` and ``status``: ``"running"`` until the client has been given the run's terminal
event, then ``"completed"`` (``Finish``) or ``"failed"`` (``Error``).

A task the log does not know is not answered here: the request goes on to the wrapped app, so
a legacy app that still keeps its own deque keeps working while its writes move to the log.
One answer holds at most `MAX_EVENTS` events, the old deque's capacity; a client that polls
with `next_offset` gets the rest on its next poll.
"""

from __future__ import annotations

import json

from ..log import EventLog
from ..types import Send
from .errors import INVALID_CURSOR, send_json_text
from .request import BadRequest
from .runindex import RunIndex

MAX_EVENTS = 20_000
BAD_OFFSET = "from must be a non-negative integer index, got {value!r}"
STATUS_BY_TERMINAL = {"Finish": "completed", "Error": "failed"}
RUNNING = "running"


def parse_offset(params: dict[str, str]) -> int:
    value = params.get("from", "0").strip() or "0"
    if not (value.isascii() and value.isdigit()):
        raise BadRequest(INVALID_CURSOR, BAD_OFFSET.format(value=params.get("from")))
    return int(value)


async def serve_legacy_poll(
    send: Send, log: EventLog, runs: RunIndex, task_id: str, params: dict[str, str]
) -> bool:
    """Answer the poll; False (nothing sent) when the log holds no event of `task_id`."""
    entry = await runs.refresh(task_id)
    if entry is None:
        return False
    offset = parse_offset(params)
    known = len(entry.seqs)
    events = []
    if offset < known:
        after = entry.seqs[offset - 1] if offset else 0
        events = await log.aread(after, None, min(known - offset, MAX_EVENTS), run_id=task_id)
    next_offset = offset + len(events) if events else offset
    delivered = min(next_offset, known)
    client_seq = entry.seqs[delivered - 1] if delivered else 0
    status = RUNNING
    if entry.terminal_type is not None and entry.ended_by(client_seq):
        status = STATUS_BY_TERMINAL.get(entry.terminal_type, RUNNING)
    items = ",".join(
        f'{{"idx":{offset + i},"type":{json.dumps(e.type)},"data":{e.data_json},'
        f'"ts":{e.created_at.timestamp()!r}}}'
        for i, e in enumerate(events)
    )
    text = (
        f'{{"task_id":{json.dumps(task_id)},"status":"{status}","events":[{items}],'
        f'"next_offset":{next_offset}}}'
    )
    await send_json_text(send, 200, text)
    return True
