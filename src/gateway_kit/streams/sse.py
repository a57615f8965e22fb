"""Server-sent events framing: one frame per event, built once and shared by every subscriber.

Frame: ``id: <seq>``, then one ``data:`` line holding the envelope JSON, then a blank line. There
is deliberately no ``event:`` line: `EventSource.onmessage` only sees unnamed events, and every
client must see every event. The envelope JSON holds no raw line break (JSON escapes them), so
one ``data:`` line always carries the whole envelope.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from ..log.event import Event

PING = b": ping\n\n"
RESET_TYPE = "reset"

# Proxies must neither buffer (nginx honours X-Accel-Buffering) nor cache nor transform
# (compress) the stream: a compressing proxy holds frames back until its buffer fills.
SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-store, no-transform"),
    (b"x-accel-buffering", b"no"),
]


def frame(event: Event) -> bytes:
    return f"id: {event.seq}\ndata: {event.envelope_json()}\n\n".encode()


def frames(events: Iterable[Event]) -> bytes:
    """Many frames as one body chunk: one write for a whole page of replay."""
    return "".join([f"id: {e.seq}\ndata: {e.envelope_json()}\n\n" for e in events]).encode()


def frame_chunks(events: Iterable[Event], chunk_bytes: int) -> Iterator[bytes]:
    """The frames of `events` as body chunks of about `chunk_bytes` (a larger frame alone),
    encoded one chunk at a time: a page of small events is one write, and a page of large ones
    never exists as one more copy of itself."""
    chunk: list[str] = []
    size = 0
    for event in events:
        text = f"id: {event.seq}\ndata: {event.envelope_json()}\n\n"
        if size and size + len(text) > chunk_bytes:
            yield "".join(chunk).encode()
            chunk, size = [], 0
        chunk.append(text)
        size += len(text)
    if chunk:
        yield "".join(chunk).encode()


def reset_envelope(
    *, stream: str | None, run_id: str | None, epoch: str, head: int, reason: str
) -> str:
    """The envelope of a reset: the client's state is from another log; replay starts again."""
    return json.dumps(
        {
            "seq": 0,
            "stream": stream,
            "pos": 0,
            "run_id": run_id,
            "type": RESET_TYPE,
            "data": {"epoch": epoch, "head": head, "reason": reason},
            "upstream_event_id": None,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def reset_frame(envelope_json: str) -> bytes:
    # id 0: a reconnect after the reset resumes from the start of this log, not the bad cursor.
    return f"id: 0\ndata: {envelope_json}\n\n".encode()
