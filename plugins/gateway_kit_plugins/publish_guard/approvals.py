"""Whether a write call of a run may be materialized, as its run's events say it went.

goose (in ``approve`` or ``smart_approve`` mode) asks before a tool call runs; a person's "no",
and an approval nobody decided in time, reach goose as ``deny_once``, and goose answers the
call with a *successful* ``toolResponse`` whose text says the user declined it. So a call's
status alone does not say it ran. The gateway's approvals do: each one's ``approval_*`` events
are in the run's events, naming goose's tool request id and what became of it.

A write is materialized only when it is known to have run: its response came and succeeded,
does not say it was declined, and, if goose asked about it, its approval was approved for
exactly its arguments. Rejected, expired or voided, declined, or asked and never decided (a
guard that cannot be sure does not publish): never.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway_kit import Event, ToolCall
from gateway_kit.approvals import EVENT_TYPES, Kind, Status, args_hash
from gateway_kit.approvals.goose_actions import action_requests

# What goose answers a tool call the user declined (or let expire), casefolded.
DECLINED = "the user has declined to run this tool"
TOOL_RESPONSE = "toolResponse"
CLOSED_UNAPPROVED = frozenset({Status.REJECTED, Status.EXPIRED, Status.VOIDED})

NO_RESULT = "its tool call has no successful result: it is not known to have run"
SAID_DECLINED = "its tool call was declined: the user did not let it run"
NOT_DECIDED = "its approval was asked for and has no outcome: it is not known to have run"
NOT_APPROVED = "its approval was {status}: the user did not let it run"
OTHER_ARGUMENTS = "its approval was given for other arguments than the call's"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The last word on one approval of a tool call: its status and the arguments' hash."""

    status: str
    args_hash: str | None


@dataclass
class Approvals:
    """What a run's events say of its tool calls' approvals."""

    asked: set[str] = field(default_factory=set)  # tool request ids goose asked about
    outcomes: dict[str, Outcome] = field(default_factory=dict)  # by tool request id
    declined: set[str] = field(default_factory=set)  # ids whose response says declined

    @classmethod
    def of(cls, events: Sequence[Event]) -> Approvals:
        found = cls()
        for event in events:
            if event.type in EVENT_TYPES:
                found._approval(event.data)
            elif event.type == "Message":
                found._message(event.data)
        return found

    def refusal(self, call: ToolCall) -> str | None:
        """Why `call` may not be materialized; None when it may."""
        if call.status != "success":
            return NO_RESULT
        if call.id in self.declined:
            return SAID_DECLINED
        outcome = self.outcomes.get(call.id)
        if outcome is None:
            return NOT_DECIDED if call.id in self.asked else None
        if outcome.status in CLOSED_UNAPPROVED:
            return NOT_APPROVED.format(status=outcome.status)
        if outcome.status != Status.APPROVED:
            return NOT_DECIDED
        if outcome.args_hash != args_hash(dict(call.arguments)):
            return OTHER_ARGUMENTS
        return None

    def _approval(self, data: Mapping[str, Any]) -> None:
        request_id, status = data.get("request_id"), data.get("status")
        if data.get("kind") != Kind.TOOL_CONFIRMATION or not isinstance(request_id, str):
            return
        hashed = data.get("args_hash")
        self.asked.add(request_id)
        # Events come oldest first, and an approval's status only goes forward: the last wins.
        self.outcomes[request_id] = Outcome(
            status if isinstance(status, str) else "", hashed if isinstance(hashed, str) else None
        )

    def _message(self, data: Mapping[str, Any]) -> None:
        self.asked.update(asked.request_id for asked in action_requests(data))
        message = data.get("message")
        contents = message.get("content") if isinstance(message, Mapping) else None
        for item in contents if isinstance(contents, list) else ():
            if not isinstance(item, Mapping) or item.get("type") != TOOL_RESPONSE:
                continue
            if isinstance(item.get("id"), str) and _says_declined(item.get("toolResult")):
                self.declined.add(item["id"])


def _says_declined(result: object) -> bool:
    value = result.get("value") if isinstance(result, Mapping) else None
    # goose's CallToolResult ({"content": [...]}), or a bare list of contents
    contents = value.get("content") if isinstance(value, Mapping) else value
    return any(DECLINED in text.casefold() for text in _texts(contents))


def _texts(contents: object) -> Iterable[str]:
    for item in contents if isinstance(contents, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("text"), str):
            yield item["text"]
