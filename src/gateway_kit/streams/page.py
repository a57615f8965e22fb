"""One JSON page of a stream or run, for clients that poll instead of holding a stream open.

``{"epoch", "events": [envelope, ...], "next_after", "terminal"}``: `next_after` is the cursor
for the next request (the last seq in `events`, or the given cursor when there is nothing new);
`terminal` is true when the last event the client now has (the one at `next_after`) is a
``Finish`` or ``Error``: nothing is running there, so a poller may slow down until it acts.
After a reset (see `gateway_kit.streams`) `events` starts with the reset envelope.
"""

from __future__ import annotations

import json

from ..http.errors import send_json_text
from ..log import Event, EventLog
from ..types import Send
from .cursor import Resume, resume_point
from .request import Cursor, parse_limit

DEFAULT_PAGE_LIMIT = 1000
MAX_PAGE_LIMIT = 1000


async def serve_page(
    send: Send,
    log: EventLog,
    cursor: Cursor,
    params: dict[str, str],
    *,
    stream: str | None = None,
    run_id: str | None = None,
) -> None:
    limit = parse_limit(params, default=DEFAULT_PAGE_LIMIT, maximum=MAX_PAGE_LIMIT)
    events: list[Event] = []
    if cursor.foreign_epoch is None and not cursor.beyond_any_seq:
        events = await log.aread(cursor.after, stream, limit, run_id=run_id)
    # Events after the cursor prove it is a seq of this log; otherwise it must be checked.
    resume = (
        Resume(cursor.after)
        if events
        else await resume_point(log, cursor, stream=stream, run_id=run_id)
    )
    if resume.reset is not None:
        events = await log.aread(0, stream, limit, run_id=run_id)
    if events:
        next_after, terminal = events[-1].seq, events[-1].is_terminal
    else:
        next_after = resume.after
        terminal = await _is_terminal_at(log, next_after, stream, run_id)
    envelopes = [e.envelope_json() for e in events]
    if resume.reset is not None:
        envelopes.insert(0, resume.reset)
    text = (
        f'{{"epoch":{json.dumps(log.epoch)},"events":[{",".join(envelopes)}],'
        f'"next_after":{next_after},"terminal":{"true" if terminal else "false"}}}'
    )
    await send_json_text(send, 200, text)


async def _is_terminal_at(log: EventLog, seq: int, stream: str | None, run_id: str | None) -> bool:
    if seq < 1:
        return False
    # The client has the event at `seq` already: settled or not, it is what it is.
    found = await log.aread(seq - 1, stream, 1, run_id=run_id, settled=False)
    return bool(found) and found[0].seq == seq and found[0].is_terminal
