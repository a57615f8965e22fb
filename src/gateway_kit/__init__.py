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
from .gateway import Gateway
from .log import Event, EventLog

__all__ = [
    "Event",
    "EventLog",
    "EventLogError",
    "Gateway",
    "GatewayKitError",
    "InvalidCursor",
    "InvalidEvent",
    "LogClosed",
    "PayloadTooLarge",
    "UpstreamError",
]
