"""gateway_kit: one durable event log behind every client of an AI-agent chat server."""

from .exceptions import (
    EventLogError,
    GatewayKitError,
    InvalidCursor,
    InvalidEvent,
    LogClosed,
    PayloadTooLarge,
    RunConflict,
    RunError,
    RunNotFound,
    SessionBusy,
    SessionNotFound,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamError,
    UpstreamHTTPError,
    UpstreamTooFarBehind,
    UpstreamUnavailable,
)
from .gateway import Gateway
from .log import Event, EventLog
from .runs import Run, RunStatus
from .upstream import GooseUpstream

__all__ = [
    "Event",
    "EventLog",
    "EventLogError",
    "Gateway",
    "GatewayKitError",
    "GooseUpstream",
    "InvalidCursor",
    "InvalidEvent",
    "LogClosed",
    "PayloadTooLarge",
    "Run",
    "RunConflict",
    "RunError",
    "RunNotFound",
    "RunStatus",
    "SessionBusy",
    "SessionNotFound",
    "UpstreamAuthError",
    "UpstreamBadRequest",
    "UpstreamError",
    "UpstreamHTTPError",
    "UpstreamTooFarBehind",
    "UpstreamUnavailable",
]
