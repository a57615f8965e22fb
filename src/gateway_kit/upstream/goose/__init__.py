"""The goosed adapter: goose's HTTP/SSE API (goosed ≤ 1.41) as the gateway's upstream.

`GooseUpstream` (`client.py`) sends replies, cancels and confirmations; the session pumps
(`pumps.py`, `pump.py`, `connection.py`) copy each session's events into the log and report
goose's ends of requests to the run lifecycle. Nothing outside this folder imports it but the
composition (`gateway_kit.gateway`), the demo and the package's front door.
"""

from __future__ import annotations

from .client import GooseSession, GooseUpstream, user_message
from .events import GooseEventStream

__all__ = ["GooseEventStream", "GooseSession", "GooseUpstream", "user_message"]
