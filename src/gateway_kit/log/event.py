"""The `Event` record and the validation every append goes through."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from json.encoder import encode_basestring
from typing import Any

from ..exceptions import InvalidCursor, InvalidEvent, PayloadTooLarge

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_NAME_LENGTH = 200
# A seq is a 64-bit database integer: a larger cursor cannot be a seq of any log.
MAX_SEQ = 2**63 - 1
MAX_SEQ_DIGITS = len(str(MAX_SEQ))
# How a run ends: its first event of one of these types is its end, and the log holds nothing of
# the run after it. (goose's own ending frames are kept under other types: `gateway_kit.runs`.)
FINISH = "Finish"
ERROR = "Error"
TERMINAL_TYPES = frozenset({FINISH, ERROR})

# ensure_ascii=False keeps the stored text close to what was sent; U+2028/U+2029 are legal
# in JSON strings, and every reader decodes with json.loads, so they round-trip unchanged.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _text(value: str | None) -> str:
    # The string encoder behind json.dumps(ensure_ascii=False), called directly: this runs for
    # every frame of every replay, and JSONEncoder.encode builds an encoder on each call.
    return "null" if value is None else encode_basestring(value)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """A validated event not yet written: what the backends insert."""

    stream: str
    type: str
    data_json: str
    run_id: str | None
    upstream_event_id: str | None


class Event:
    """One committed event of the log. `data` is decoded lazily from the stored JSON text."""

    __slots__ = (
        "_created_at",
        "_data",
        "data_json",
        "pos",
        "run_id",
        "seq",
        "stream",
        "type",
        "upstream_event_id",
    )

    def __init__(
        self,
        seq: int,
        stream: str,
        pos: int,
        run_id: str | None,
        type: str,
        data_json: str,
        upstream_event_id: str | None,
        created_at: float,
    ) -> None:
        self.seq = seq
        self.stream = stream
        self.pos = pos
        self.run_id = run_id
        self.type = type
        self.data_json = data_json
        self.upstream_event_id = upstream_event_id
        self._created_at = created_at
        self._data: dict[str, Any] | None = None

    # created_at is stored as epoch seconds: cheap to compare in retention queries.
    @property
    def created_at(self) -> datetime:
        return datetime.fromtimestamp(self._created_at, UTC)

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = json.loads(self.data_json)
        return self._data

    @property
    def is_terminal(self) -> bool:
        return self.type in TERMINAL_TYPES

    def envelope(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "stream": self.stream,
            "pos": self.pos,
            "run_id": self.run_id,
            "type": self.type,
            "data": self.data,
            "upstream_event_id": self.upstream_event_id,
        }

    def envelope_json(self) -> str:
        """The envelope as JSON text, built around the stored data text without re-encoding it."""
        return (
            f'{{"seq":{self.seq},"stream":{_text(self.stream)},"pos":{self.pos},'
            f'"run_id":{_text(self.run_id)},"type":{_text(self.type)},'
            f'"data":{self.data_json},"upstream_event_id":{_text(self.upstream_event_id)}}}'
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.seq, self.stream, self.pos, self.data_json) == (
            other.seq,
            other.stream,
            other.pos,
            other.data_json,
        )

    def __hash__(self) -> int:
        return hash((self.seq, self.stream))

    def __repr__(self) -> str:
        return (
            f"Event(seq={self.seq}, stream={self.stream!r}, pos={self.pos}, "
            f"run_id={self.run_id!r}, type={self.type!r})"
        )


def check_name(field: str, value: object, *, optional: bool = False) -> str | None:
    """`value` if it can be a stream, type or id of the log; `InvalidEvent` otherwise."""
    if value is None and optional:
        return None
    # The common case, decided in C: short ASCII text without NUL (appends check four names).
    if (
        type(value) is str
        and 0 < len(value) <= MAX_NAME_LENGTH
        and value.isascii()
        and "\x00" not in value
    ):
        return value
    if not isinstance(value, str) or not value:
        raise InvalidEvent(f"{field} must be a non-empty string, got {value!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidEvent(f"{field} is longer than {MAX_NAME_LENGTH} characters")
    if "\x00" in value:  # PostgreSQL text cannot hold NUL
        raise InvalidEvent(f"{field} holds a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEvent(f"{field} is not valid Unicode: {exc}") from exc
    return value


def prepare(
    *,
    stream: object,
    type: object,
    data: object = None,
    run_id: object = None,
    upstream_event_id: object = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> NewEvent:
    """Validate one event and encode its data; raises `InvalidEvent` before anything is written."""
    checked_stream = check_name("stream", stream, optional=False)
    checked_type = check_name("type", type, optional=False)
    if data is None:
        data = {}
    elif isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)
    if not isinstance(data, dict):
        raise InvalidEvent(f"data must be a JSON object (dict), got {type_name(data)}")
    try:
        data_json = _encode(data)
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(f"data is not JSON-serializable: {exc}") from exc
    try:
        size = len(data_json.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidEvent(f"data holds text that is not valid Unicode: {exc}") from exc
    _check_size(size, max_payload_bytes)
    return _new_event(checked_stream, checked_type, data_json, run_id, upstream_event_id)


def prepare_json(
    *,
    stream: object,
    type: object,
    data_json: str,
    run_id: object = None,
    upstream_event_id: object = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> NewEvent:
    """`prepare` for data that arrived as the JSON text of an object (decoded by the caller,
    who found an object): the text is stored as it is, without encoding it again. Text with
    ``\\u`` escapes is decoded and checked as `prepare` checks data: an escape may stand for
    text that is not valid Unicode."""
    if not isinstance(data_json, str) or not data_json.startswith("{"):
        raise InvalidEvent(f"data_json must be the JSON text of an object, got {data_json!r:.80}")
    if "\\u" in data_json:
        try:
            data = json.loads(data_json)
        except ValueError as exc:
            raise InvalidEvent(f"data_json is not JSON: {exc}") from exc
        return prepare(
            stream=stream,
            type=type,
            data=data,
            run_id=run_id,
            upstream_event_id=upstream_event_id,
            max_payload_bytes=max_payload_bytes,
        )
    checked_stream = check_name("stream", stream, optional=False)
    checked_type = check_name("type", type, optional=False)
    # Every character takes at most 4 bytes: most texts need no encoding to be measured.
    if len(data_json) * 4 > max_payload_bytes:
        _check_size(len(data_json.encode("utf-8")), max_payload_bytes)
    return _new_event(checked_stream, checked_type, data_json, run_id, upstream_event_id)


def _check_size(size: int, max_payload_bytes: int) -> None:
    if size > max_payload_bytes:
        raise PayloadTooLarge(
            f"data is {size} bytes encoded, above the limit of {max_payload_bytes} bytes"
        )


def _new_event(
    stream: str | None, type: str | None, data_json: str, run_id: object, upstream_event_id: object
) -> NewEvent:
    if isinstance(upstream_event_id, int) and not isinstance(upstream_event_id, bool):
        upstream_event_id = str(upstream_event_id)
    assert stream is not None and type is not None
    return NewEvent(
        stream=stream,
        type=type,
        data_json=data_json,
        run_id=check_name("run_id", run_id, optional=True),
        upstream_event_id=check_name("upstream_event_id", upstream_event_id, optional=True),
    )


def type_name(value: object) -> str:
    return type(value).__name__


def check_cursor(after: object, *, name: str = "after") -> int:
    """A cursor is a non-negative integer seq (bool and float are refused, digit strings taken)
    no larger than a seq can be (a 64-bit database integer)."""
    if isinstance(after, str):
        digits = after.strip().lstrip("0") or "0"
        # Python refuses to convert more than a few thousand digits; a seq has at most 19.
        if digits.isascii() and digits.isdigit() and len(digits) <= MAX_SEQ_DIGITS:
            after = int(digits)
    if isinstance(after, bool) or not isinstance(after, int):
        raise InvalidCursor(f"{name} must be a non-negative integer, got {shown(after)}")
    if after < 0:
        raise InvalidCursor(f"{name} must be a non-negative integer, got {shown(after)}")
    if after > MAX_SEQ:
        raise InvalidCursor(f"{name} must be at most {MAX_SEQ}, got {shown(after)}")
    return after


def shown(value: object, width: int = 80) -> str:
    """`value` for an error message: its repr, cut to `width`; Python cannot print an integer
    of more than a few thousand digits, so a large one is told by its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
