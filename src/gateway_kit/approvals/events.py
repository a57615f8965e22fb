"""The events that tell every client of a stream what became of its approvals.

The first, ``approval_requested``, holds the approval as the routes show it
(`Approval.as_json`). Every later one (claimed, decided, expired, voided) holds the same but for
what was asked, ``arguments`` and ``prompt``: they never change after the first event, and may
be large, so that a claim repeated fifty times does not write them fifty times. A client keeps
them from the first event, or reads them from the stream's approvals list.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import InvalidEvent
from ..log import EventLog
from .model import Approval

REQUESTED = "approval_requested"
CLAIMED = "approval_claimed"
DECIDED = "approval_decided"
EXPIRED = "approval_expired"
VOIDED = "approval_voided"
EVENT_TYPES = (REQUESTED, CLAIMED, DECIDED, EXPIRED, VOIDED)
OMITTED = "left out of this event ({why}); GET the stream's approvals to see them"
# What only the first event of an approval holds.
ASKED = ("arguments", "prompt")


def printable(value: Any) -> Any:
    """`value` with every string made valid Unicode (a lone surrogate becomes "?")."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [printable(item) for item in value]
    if isinstance(value, dict):
        return {printable(key): printable(item) for key, item in value.items()}
    return value


def event_of(log: EventLog, approval: Approval, event_type: str) -> dict[str, Any]:
    """The event that tells clients of `approval`: what was asked only in the first. Arguments
    the log cannot hold in one event (too large, or not valid Unicode) are left out of it,
    saying so: the approval itself keeps them, and `GET .../approvals` shows them."""
    data = approval.as_json()
    if event_type != REQUESTED:
        for name in ASKED:
            del data[name]
    event: dict[str, Any] = {
        "stream": approval.stream,
        "type": event_type,
        "data": data,
        "run_id": approval.run_id,
    }
    try:
        log.check(**event)
    except InvalidEvent as refused:
        reduced = printable({**data, "arguments": None, "prompt": None})
        reduced["arguments_omitted"] = OMITTED.format(why=refused)
        event["data"] = reduced
    return event
