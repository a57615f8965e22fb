"""Reading what a stream request asks for: headers, query parameters, cursors, page limits.

A cursor is the seq of the last event a client has, as a decimal integer. It may also be sent
as ``<epoch>:<seq>``: when the epoch is not this log's, the cursor belongs to another log and the
client gets a reset (see `gateway_kit.streams`), never a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..http.errors import HTTPError
from ..http.request import header
from ..log.event import MAX_SEQ, shown
from ..types import Scope

INVALID_CURSOR = "invalid_cursor"
INVALID_LIMIT = "invalid_limit"

NOT_AN_INTEGER = "{name} must be a non-negative integer seq (or <epoch>:<seq>), got {value}"
NEGATIVE = "{name} must not be negative, got {value}"
BAD_LIMIT = "limit must be a positive integer, got {value}"


class BadRequest(HTTPError):
    """A request parameter that cannot be served; answered with a 400 JSON error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(400, code, message)


def bounded_int(digits: str, bound: int) -> int:
    """The value of ASCII `digits`, or `bound` + 1 when it is larger than `bound`.

    Python refuses to convert more than a few thousand digits (leading zeros count), and no
    cursor, limit or index a client may send needs more than a bound's worth of them.
    """
    significant = digits.lstrip("0")
    if len(significant) > len(str(bound)):
        return bound + 1
    return min(int(significant or "0"), bound + 1)


@dataclass(frozen=True, slots=True)
class Cursor:
    after: int
    """Serve events with a seq above this one."""
    foreign_epoch: str | None = None
    """The epoch the client named when it is not this log's: the client must be reset."""

    @property
    def beyond_any_seq(self) -> bool:
        return self.after > MAX_SEQ


def parse_cursor(value: str, *, name: str, epoch: str) -> Cursor:
    text = value.strip()
    given_epoch, sep, seq_text = text.rpartition(":")
    if not sep:
        seq_text = text
    if seq_text.startswith("-") and seq_text[1:].isdigit():
        raise BadRequest(INVALID_CURSOR, NEGATIVE.format(name=name, value=shown(value)))
    if not (seq_text.isascii() and seq_text.isdigit()):
        raise BadRequest(INVALID_CURSOR, NOT_AN_INTEGER.format(name=name, value=shown(value)))
    # Beyond any seq (a 64-bit database integer) it is MAX_SEQ + 1: beyond the head, so the
    # client gets a reset, and it is never given to the database.
    seq = bounded_int(seq_text, MAX_SEQ)
    if sep and given_epoch != epoch:
        return Cursor(seq, foreign_epoch=given_epoch)
    return Cursor(seq)


def request_cursor(scope: Scope, params: dict[str, str], *, epoch: str) -> Cursor:
    """``Last-Event-ID`` if the client sent one, else ``?after=``, else the start of the log."""
    last_event_id = header(scope, b"last-event-id")
    if last_event_id is not None and last_event_id.strip():
        return parse_cursor(last_event_id, name="Last-Event-ID", epoch=epoch)
    after = params.get("after")
    if after is not None:
        return parse_cursor(after, name="after", epoch=epoch)
    return Cursor(0)


def parse_limit(params: dict[str, str], *, default: int, maximum: int) -> int:
    """``?limit=``: a positive integer, capped at `maximum` (a larger one is served as the cap)."""
    value = params.get("limit")
    if value is None:
        return default
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or not text.strip("0"):
        raise BadRequest(INVALID_LIMIT, BAD_LIMIT.format(value=shown(value)))
    return min(bounded_int(text, maximum), maximum)


def wants_json(scope: Scope) -> bool:
    """JSON when the client asks for it and not for SSE; anything else gets the event stream."""
    accept = header(scope, b"accept") or ""
    return "application/json" in accept and "text/event-stream" not in accept
