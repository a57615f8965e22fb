"""The upstream adapters, and what they share.

Each adapter is a folder: `goose/` (goosed's HTTP/SSE API) and `acp/` (an agent speaking the
Agent Client Protocol). What both use is here: the frame an upstream event is written from
(`frames.py`), its appends (`appends.py`), backoff (`backoff.py`) and what a pump tells the
approvals (`watchers.py`). Runs reach an adapter only through `gateway_kit.runs.ports`.
"""

from __future__ import annotations

from gateway_kit.upstream.frames import UpstreamFrame
from gateway_kit.upstream.goose import GooseEventStream, GooseSession, GooseUpstream, user_message

__all__ = [
    "GooseEventStream",
    "GooseSession",
    "GooseUpstream",
    "UpstreamFrame",
    "user_message",
]
