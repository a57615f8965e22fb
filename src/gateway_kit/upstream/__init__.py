"""The upstream adapter: the goose client and what is built on it."""

from __future__ import annotations

from gateway_kit.upstream.goose import GooseSession, GooseUpstream, user_message
from gateway_kit.upstream.goose_events import GooseEventStream
from gateway_kit.upstream.goose_frames import UpstreamFrame

__all__ = [
    "GooseEventStream",
    "GooseSession",
    "GooseUpstream",
    "UpstreamFrame",
    "user_message",
]
