"""Reading what a stream request asks for: headers, query parameters, cursors, page limits.

A cursor is the seq of the last event a client has, as a decimal integer. It may also be sent
as ``<epoch>:<seq>``: when the epoch is not this log's, the cursor belongs to another log and the
client gets a reset (see `gateway_kit.streams`), never a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..http.errors import HTTPError
from ..http.request import header
from ..types import Scope

INVALID_CURSOR = "invalid_cursor"
INVALID_LIMIT = "invalid_limit"
INVALID_STREAM = "invalid_stream"

# A seq is a 64-bit database integer: a larger cursor cannot be a seq of this log.
MAX_SEQ = 2**63 - 1
MAX_SEQ_DIGITS = len(str(MAX_SEQ))
NOT_AN_INTEGER = "{name} must be a non-negative integer seq (or <epoch>:<seq>), got {value!r}"
NEGATIVE = "{name} must not be negative, got {value!r}"
BAD_LIMIT = "limit must be a positive integer, got {value!r}"


class BadRequest(HTTPError):
    """A request parameter that cannot be served; answered with a 400 JSON error."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(400, code, message)


def bounded_int(digits: str, bound: int) -> int:
    """The value of ASCII `digits`, or `bound` + 1 when it is larger than `bound`.

    Python refuses to convert more than a few thousand digits, and no cursor, limit or index a
    client may send needs more than a bound's worth of them.
    """
    significant = digits.lstrip("0")
    if len(significant) > len(str(bound)):
        return bound + 1
    return min(int(digits), bound + 1)


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
        raise BadRequest(INVALID_CURSOR, NEGATIVE.format(name=name, value=value))
    if not (seq_text.isascii() and seq_text.isdigit()):
        raise BadRequest(INVALID_CURSOR, NOT_AN_INTEGER.format(name=name, value=value))
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
        raise BadRequest(INVALID_LIMIT, BAD_LIMIT.format(value=value))
    return min(bounded_int(text, maximum), maximum)


def wants_json(scope: Scope) -> bool:
    """JSON when the client asks for it and not for SSE; anything else gets the event stream."""
    accept = header(scope, b"accept") or ""
    return "application/json" in accept and "text/event-stream" not in accept
