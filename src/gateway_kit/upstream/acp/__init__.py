"""The ACP adapter: an agent that speaks the Agent Client Protocol as the gateway's upstream.

`AcpUpstream` reaches the agent (a child process over stdio, or a WebSocket) and keeps it up;
`AcpTurn` runs one prompt and writes it as the events goose runs write (`translate`).
"""

from __future__ import annotations

from .errors import (
    AcpConnectionLost,
    AcpError,
    AcpProtocolError,
    AcpRequestError,
    AcpSessionBusy,
    AcpSessionLost,
    AcpSessionNotFound,
)
from .permissions import PermissionHandler, PermissionRequest, choose_option, deny
from .translate import TranslatedEvent, TurnState, error_event, finish_event, translate
from .turn import AcpTurn, TurnEnd
from .updates import AcpUpdate
from .upstream import AcpSession, AcpUpstream, PromptResult

__all__ = [
    "AcpConnectionLost",
    "AcpError",
    "AcpProtocolError",
    "AcpRequestError",
    "AcpSession",
    "AcpSessionBusy",
    "AcpSessionLost",
    "AcpSessionNotFound",
    "AcpTurn",
    "AcpUpdate",
    "AcpUpstream",
    "PermissionHandler",
    "PermissionRequest",
    "PromptResult",
    "TranslatedEvent",
    "TurnEnd",
    "TurnState",
    "choose_option",
    "deny",
    "error_event",
    "finish_event",
    "translate",
]
