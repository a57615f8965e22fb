"""goose's `/sessions/{id}/events` frames, parsed into small typed values.

goose tags each frame's JSON with `type` and adds `chat_request_id` (the `reply` request id) to
every event of a request. The SSE `id:` line is goose's per-session counter; it starts at 1, so
`id: 0` is free for goose's one "Client too far behind" signal.
"""

from __future__ import annotations

import json

import orjson

from gateway_kit.exceptions import UpstreamError
from gateway_kit.types import JSONObject

TOO_FAR_BEHIND_ID = 0
# How goose ends one of its requests: not the run's end (`gateway_kit.log.event`), which the
# lifecycle decides; the log keeps these under types of their own (`gateway_kit.runs.events`).
GOOSE_FINISH = "Finish"
GOOSE_ERROR = "Error"
ACTIVE_REQUESTS_TYPE = "ActiveRequests"

BAD_ID_MESSAGE = "goose sent an event id that is not a non-negative integer: {raw!r}"
BAD_DATA_MESSAGE = "goose sent a frame whose data is not a JSON object: {data!r}"
NO_TYPE_MESSAGE = "goose sent a frame without a string `type`: {data!r}"
MAX_QUOTED_CHARS = 200


class UpstreamFrame:
    """One goose event: its goose id (None without an `id:` line), type and whole JSON.

    A frame read from goose keeps the JSON text as goose sent it (`raw`, stored as is) and
    decodes `data` again only when asked: most frames are only written, and a thousand decoded
    objects waiting for their write would only keep the garbage collector busy.
    """

    __slots__ = ("_data", "chat_request_id", "id", "raw", "type")

    def __init__(
        self,
        id: int | None,
        type: str,
        data: JSONObject | None = None,
        chat_request_id: str | None = None,
        raw: str = "",
    ) -> None:
        if data is None and not raw:
            raise ValueError("an UpstreamFrame needs its data or its raw JSON text")
        self.id = id
        self.type = type
        self.chat_request_id = chat_request_id
        self.raw = raw  # the JSON text as goose sent it, stored as is ("" when not known)
        self._data = data

    @property
    def data(self) -> JSONObject:
        if self._data is not None:
            return self._data
        data: JSONObject = json.loads(self.raw)  # checked to be an object when it was read
        return data

    @property
    def run_key(self) -> str | None:
        """The `reply` request id this event belongs to: route it to the run made with it."""
        return self.chat_request_id

    @property
    def too_far_behind(self) -> bool:
        """goose's answer to a `Last-Event-ID` older than its replay buffer."""
        return self.id == TOO_FAR_BEHIND_ID and self.type == GOOSE_ERROR

    def __repr__(self) -> str:
        return f"UpstreamFrame(id={self.id!r}, type={self.type!r}, data={self.data!r})"


def parse_frame(raw_id: str, data: str) -> UpstreamFrame:
    """Build a frame from one SSE event; `raw_id` is "" when the event had no `id:` line."""
    event_id = _parse_id(raw_id)
    payload = _decode(data)
    if not isinstance(payload, dict):
        raise UpstreamError(BAD_DATA_MESSAGE.format(data=data[:MAX_QUOTED_CHARS]))
    frame_type = payload.get("type")
    if not isinstance(frame_type, str):
        raise UpstreamError(NO_TYPE_MESSAGE.format(data=data[:MAX_QUOTED_CHARS]))
    chat_request_id = payload.get("chat_request_id")
    return UpstreamFrame(
        id=event_id,
        type=frame_type,
        chat_request_id=chat_request_id if isinstance(chat_request_id, str) else None,
        raw=data,
    )


def _decode(text: str) -> object:
    """The JSON value of `text`, or None when it is not JSON.

    orjson decodes a goose frame in a third of the standard library's time, and every frame
    goose sends is decoded. What orjson refuses and the standard library takes (a lone surrogate
    escape, NaN) is taken as before: the log decides about it.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(text)
    except ValueError:
        return None


def _parse_id(raw_id: str) -> int | None:
    if raw_id == "":
        return None
    # int() would also take " 7", "+7" and "7_0"; goose writes plain decimal digits only.
    if not (raw_id.isascii() and raw_id.isdigit()):
        raise UpstreamError(BAD_ID_MESSAGE.format(raw=raw_id[:MAX_QUOTED_CHARS]))
    return int(raw_id)
