"""`Approval`: one confirmation goose waits for, as the gateway keeps it.

An approval is bound to one invocation: the goose session, that goosed's lifetime, goose's id
of the request, and the exact arguments shown (`args_hash`, the SHA-256 of their canonical
JSON). A decision names the hash it was shown, so a client that saw other arguments loses.

Its status goes one way: ``pending`` → ``approved`` | ``rejected`` (a person decided) |
``expired`` (nobody did in time: rejected, failing closed) | ``voided`` (goose can no longer
take an answer: it restarted, or the run ended). What goose is told (`action`) is kept with the
row until goose shows it arrived (`delivered_at`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..types import JSONObject


def new_approval_id() -> str:
    return f"apr_{uuid.uuid4().hex}"


class Status(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    VOIDED = "voided"


class Kind(StrEnum):
    TOOL_CONFIRMATION = "tool_confirmation"
    ELICITATION = "elicitation"


APPROVE, REJECT = "approve", "reject"
DECISIONS = (APPROVE, REJECT)
# What goose is told. A tool confirmation is answered once, never "always": a standing
# permission would let later calls through without an approval of their own.
TOOL_ACTIONS = {APPROVE: "allow_once", REJECT: "deny_once"}
# An elicitation is answered as MCP's elicitation result says.
ELICITATION_ACTIONS = {APPROVE: "accept", REJECT: "decline"}
# Statuses after which goose is owed an answer.
ANSWERED = (Status.APPROVED, Status.REJECTED, Status.EXPIRED)


def canonical_json(value: Any) -> str:
    """The JSON a hash is taken of: keys sorted, no spaces, non-ASCII kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def args_hash(arguments: Any) -> str:
    """The SHA-256 (hex) of the canonical JSON of `arguments`."""
    return hashlib.sha256(canonical_json(arguments).encode("utf-8", "surrogatepass")).hexdigest()


def action_for(kind: str, decision: str) -> str:
    table = ELICITATION_ACTIONS if kind == Kind.ELICITATION else TOOL_ACTIONS
    return table[decision]


@dataclass(frozen=True, slots=True)
class Approval:
    approval_id: str
    kind: str
    stream: str
    run_id: str | None
    session_id: str
    lifetime: int
    request_id: str  # goose's id: the tool request's, or the elicitation's
    tool_name: str | None
    arguments: JSONObject
    args_hash: str
    prompt: str | None
    status: str
    requested_at: float
    expires_at: float
    claimed_by: str | None = None
    claimed_at: float | None = None
    decision: str | None = None
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    response: JSONObject | None = None  # an elicitation's answer
    closed_reason: str | None = None  # why it expired or was voided
    action: str | None = None  # what goose is told
    attempts: int = 0
    attempted_at: float | None = None
    delivered_at: float | None = None
    version: int = 0

    @property
    def pending(self) -> bool:
        return self.status == Status.PENDING

    @property
    def owed(self) -> bool:
        """Whether goose still has to get this approval's answer."""
        return self.status in ANSWERED and self.action is not None and self.delivered_at is None

    @classmethod
    def from_row(cls, row: Any) -> Approval:
        values = row._asdict()
        values["arguments"] = json.loads(values["arguments"])
        response = values.get("response")
        values["response"] = None if response is None else json.loads(response)
        return cls(**values)

    def row(self) -> dict[str, Any]:
        """The row's columns, as the table holds them. JSON is stored ASCII-escaped: arguments
        goose sent with a lone surrogate are kept as they came, and still fit a text column."""
        values = {name: getattr(self, name) for name in self.__slots__}
        values["arguments"] = json.dumps(self.arguments, sort_keys=True)
        values["response"] = None if self.response is None else json.dumps(self.response)
        return values

    def as_json(self) -> JSONObject:
        """What clients are shown (the HTTP answers and the events' data)."""
        return {
            "approval_id": self.approval_id,
            "kind": self.kind,
            "stream": self.stream,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "request_id": self.request_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "args_hash": self.args_hash,
            "prompt": self.prompt,
            "status": self.status,
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
            "claimed_by": self.claimed_by,
            "claimed_at": self.claimed_at,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "reason": self.reason,
            "response": self.response,
            "closed_reason": self.closed_reason,
            "delivered_at": self.delivered_at,
        }
