"""What the fake goose was asked, kept so tests can assert on it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gateway_kit.types import JSONObject


@dataclass(frozen=True)
class RecordedRequest:
    """Any request that reached the fake, authorised or not."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class ReplyCall:
    """An authorised `POST /sessions/{id}/reply`, with the status the fake answered."""

    session_id: str
    request_id: str
    user_message: JSONObject
    status: int
    body: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class CancelCall:
    session_id: str
    request_id: str


@dataclass(frozen=True)
class ConfirmationCall:
    """An authorised `POST /action-required/tool-confirmation`, with the status the fake answered;
    a field the body lacked, or sent as no string, is ""."""

    session_id: str
    id: str
    action: str
    status: int


@dataclass(frozen=True)
class EventsCall:
    """An authorised `GET /sessions/{id}/events`; `last_event_id` is the raw header or None."""

    session_id: str
    last_event_id: str | None
