"""From goose frames to appends: what the pump writes for each event goose sends.

Each goose event is appended with goose's id as `upstream_event_id`, under the run whose
attempt made the request (`chat_request_id`). goose's `Finish` and `Error` are kept under types
of their own (`gateway_kit.runs.events`): they end one goose request, not the run.

An event the log refuses (one larger than its `max_payload_bytes`, since a big tool output is
ordinary, or text that is not valid Unicode) is replaced by a `PayloadDropped` event that says
what was dropped, why and how big it was, with the same goose id and a digest of the dropped
data, so that a replay of the same event is still recognised; the run goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from ..exceptions import InvalidEvent
from ..log import Event, EventLog
from ..runs.events import PAYLOAD_DROPPED, UPSTREAM_ERROR, UPSTREAM_FINISH
from ..runs.model import Run
from ..runs.store import RunStore
from .frames import GOOSE_ERROR, GOOSE_FINISH, UpstreamFrame

MESSAGE_FIELDS = ("chat_request_id", "request_id", "message_id")
DIGEST = "sha256"
# goose's frame type → the type it is kept under, when it is not goose's own.
STORED_TYPES = {GOOSE_FINISH: UPSTREAM_FINISH, GOOSE_ERROR: UPSTREAM_ERROR}


def stored_type(frame_type: str) -> str:
    return STORED_TYPES.get(frame_type, frame_type)


def encoded(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")  # lone surrogates are why some are refused


def digest(data: dict[str, Any]) -> str:
    return hashlib.sha256(encoded(data)).hexdigest()


def dropped(frame: UpstreamFrame, limit: int, reason: str) -> dict[str, Any]:
    """What stands in the log for a frame the log refused."""
    data = frame.data
    body: dict[str, Any] = {
        "type": PAYLOAD_DROPPED,
        "dropped_type": frame.type,
        "reason": reason,
        "bytes": len(encoded(data)),
        "limit": limit,
        DIGEST: digest(data),
    }
    for name in MESSAGE_FIELDS:
        if isinstance(data.get(name), str):
            body[name] = data[name]
    message = data.get("message")
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        body["message_id"] = message["id"]
    return body


def same_event(stored: Event, data: dict[str, Any]) -> bool:
    """Whether `stored` is what the pump wrote for a goose event of this data."""
    if stored.type == PAYLOAD_DROPPED and DIGEST in stored.data:
        return bool(stored.data[DIGEST] == digest(data))
    return stored.data == data


class FrameAppender:
    """Appends the frames of one goose session to the log, each under its run."""

    def __init__(self, log: EventLog, store: RunStore) -> None:
        self.log = log
        self.store = store
        self._runs: dict[str, Run | None] = {}

    async def append_all(self, stream: str, frames: list[UpstreamFrame]) -> list[Event]:
        """Append frames read one after another in one transaction (one commit for all)."""
        items = []
        for frame in frames:
            key = frame.run_key
            run = self._runs[key] if key in self._runs else await self.run_for(key)
            items.append(self._item(stream, frame, run))
        return await asyncio.to_thread(self._write, items, frames)

    def _item(self, stream: str, frame: UpstreamFrame, run: Run | None) -> dict[str, Any]:
        item: dict[str, Any] = {
            "stream": stream,
            "type": stored_type(frame.type),
            "run_id": None if run is None else run.run_id,
            "upstream_event_id": None if frame.id is None else str(frame.id),
        }
        if frame.raw:
            item["data_json"] = frame.raw  # as goose sent it: not encoded a second time
        else:
            item["data"] = frame.data
        return item

    def _write(self, items: list[dict[str, Any]], frames: list[UpstreamFrame]) -> list[Event]:
        try:
            return self.log.append_many(items)
        except InvalidEvent as exc:
            if len(items) == 1:
                return [self._replace(items[0], frames[0], str(exc))]
        # One of them the log refuses: each on its own, that one replaced.
        return [self._write([item], [frame])[0] for item, frame in zip(items, frames, strict=True)]

    def _replace(self, item: dict[str, Any], frame: UpstreamFrame, reason: str) -> Event:
        """What stands in for a frame the log refused: why, and how big it was."""
        body = dropped(frame, self.log.max_payload_bytes, reason)
        fields = {k: v for k, v in item.items() if k not in ("data", "data_json", "type")}
        return self.log.append(type=PAYLOAD_DROPPED, data=body, **fields)

    def know(self, runs: list[Run]) -> None:
        """Route the events of these runs' current requests to them without a lookup."""
        for run in runs:
            self._runs[run.upstream_request_id] = run

    async def run_for(self, request_id: str | None) -> Run | None:
        if request_id is None:
            return None
        if request_id not in self._runs:
            run = await asyncio.to_thread(self.store.by_upstream_request, request_id)
            if run is None:
                return None  # not (yet) known: look again at the next event
            self._runs[request_id] = run
        return self._runs[request_id]
