"""gateway_kit: one durable event log behind every client of an AI-agent chat server."""

from .exceptions import (
    EventLogError,
    GatewayKitError,
    InvalidCursor,
    InvalidEvent,
    LogClosed,
    PayloadTooLarge,
    UpstreamError,
)
from .log import Event, EventLog

__all__ = [
    "Event",
    "EventLog",
    "EventLogError",
    "GatewayKitError",
    "InvalidCursor",
    "InvalidEvent",
    "LogClosed",
    "PayloadTooLarge",
    "UpstreamError",
]
