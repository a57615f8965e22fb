"""One JSON page of a stream or run, for clients that poll instead of holding a stream open.

``{"epoch", "events": [envelope, ...], "next_after", "terminal"}``: `next_after` is the cursor
for the next request (the last seq in `events`, or the given cursor when there is nothing new);
`terminal` is true when the last event the client now has (the one at `next_after`) is a
``Finish`` or ``Error``: nothing is running there, so a poller may slow down until it acts.
After a reset (see `gateway_kit.streams`) `events` starts with the reset envelope.

A page holds at most ``?limit=`` events, and stops after the event whose data brings the page to
`max_bytes` (`gateway_kit.log.pages`): it holds one event however large, so `next_after` always
moves on while there is more. The body is written a piece at a time as it is encoded, never
built whole, so a page costs its events' memory and a piece.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..http.errors import JSON_TYPE, NO_STORE
from ..log import Event, EventLog
from ..types import Send
from .cursor import Resume, resume_point
from .request import Cursor, parse_limit

DEFAULT_PAGE_LIMIT = 1000
MAX_PAGE_LIMIT = 1000
PIECE_BYTES = 64 * 1024  # pieces of a streamed JSON body are gathered up to this size


async def serve_page(
    send: Send,
    log: EventLog,
    cursor: Cursor,
    params: dict[str, str],
    *,
    stream: str | None = None,
    run_id: str | None = None,
    max_bytes: int | None = None,
) -> None:
    limit = parse_limit(params, default=DEFAULT_PAGE_LIMIT, maximum=MAX_PAGE_LIMIT)
    events: list[Event] = []
    if cursor.foreign_epoch is None and not cursor.beyond_any_seq:
        events = await log.aread(cursor.after, stream, limit, run_id=run_id, max_bytes=max_bytes)
    # Events after the cursor prove it is a seq of this log; otherwise it must be checked.
    resume = (
        Resume(cursor.after)
        if events
        else await resume_point(log, cursor, stream=stream, run_id=run_id)
    )
    if resume.reset is not None:
        events = await log.aread(0, stream, limit, run_id=run_id, max_bytes=max_bytes)
    if events:
        next_after, terminal = events[-1].seq, events[-1].is_terminal
    else:
        next_after = resume.after
        terminal = await _is_terminal_at(log, next_after, stream, run_id)
    head = f'{{"epoch":{json.dumps(log.epoch)},"events":['
    if resume.reset is not None:
        head += resume.reset + ("," if events else "")
    tail = f'],"next_after":{next_after},"terminal":{"true" if terminal else "false"}}}'
    await send_json_pieces(send, 200, [head, _joined(events), tail])


def _joined(events: list[Event]) -> Iterable[str]:
    """The envelopes of `events`, comma-separated, one by one as they are needed."""
    for i, event in enumerate(events):
        yield event.envelope_json() if not i else "," + event.envelope_json()


async def send_json_pieces(send: Send, status: int, parts: Iterable[str | Iterable[str]]) -> None:
    """Send a JSON document given as its pieces (strings, or iterables of strings) in order,
    gathered into body chunks of about `PIECE_BYTES`: the whole text never exists at once."""
    await send({"type": "http.response.start", "status": status, "headers": [JSON_TYPE, NO_STORE]})
    chunk: list[bytes] = []
    size = 0
    for part in parts:
        for piece in [part] if isinstance(part, str) else part:
            data = piece.encode("utf-8")
            if size and size + len(data) > PIECE_BYTES:
                await send(
                    {"type": "http.response.body", "body": b"".join(chunk), "more_body": True}
                )
                chunk, size = [], 0
            chunk.append(data)
            size += len(data)
    await send({"type": "http.response.body", "body": b"".join(chunk), "more_body": False})


async def _is_terminal_at(log: EventLog, seq: int, stream: str | None, run_id: str | None) -> bool:
    if seq < 1:
        return False
    # The client has the event at `seq` already: settled or not, it is what it is.
    found = await log.aread(seq - 1, stream, 1, run_id=run_id, settled=False)
    return bool(found) and found[0].seq == seq and found[0].is_terminal
