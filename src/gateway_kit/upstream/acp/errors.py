"""What can go wrong talking to an ACP agent, as `UpstreamError`s.

The tree (below `gateway_kit.exceptions.UpstreamError`)::

    AcpError                  the agent, or the connection to it, failed
    ├── AcpRequestError       the agent answered a request with a JSON-RPC error
    │   │                     (``method``, ``code``, ``rpc_message``, ``data``)
    │   ├── AcpSessionBusy    the session already has a prompt running (the gateway's 409)
    │   └── AcpSessionNotFound  the agent does not know the session
    ├── AcpSessionLost        the agent restarted and cannot load the session again
    └── AcpConnectionLost     no connection: the process exited or could not start, the
        │                     socket closed or was refused (also an `UpstreamUnavailable`)
        └── AcpProtocolError  the agent broke the protocol: not JSON-RPC or a line too long
                              (the connection is dropped), an answer of the wrong shape

The text of every error names what happened in words a log reader can act on; the error
policies (`classify_error`) read it as they read goose's errors.
"""

from __future__ import annotations

import json
from typing import Any

from ...exceptions import UpstreamError, UpstreamUnavailable

# JSON-RPC error codes an ACP agent answers with.
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
# How agents word "this session already has a prompt running" (goose: "session already has
# active run `<id>`; use _goose/unstable/session/steer"), casefolded.
BUSY_MARKERS = ("active run", "already has an active", "already running")
MAX_DETAIL_CHARS = 500

REQUEST_FAILED = "the agent answered {method} with error {code} {message}{detail}"


class AcpError(UpstreamError):
    """The agent, or the connection to it, failed."""


class AcpRequestError(AcpError):
    """The agent answered `method` with a JSON-RPC error."""

    def __init__(self, method: str, code: int, rpc_message: str, data: Any = None) -> None:
        detail = error_detail(data)
        said = f": {detail}" if detail else ""
        super().__init__(
            REQUEST_FAILED.format(method=method, code=code, message=rpc_message, detail=said)
        )
        self.method = method
        self.code = code
        self.rpc_message = rpc_message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The JSON-RPC error object, as the agent sent it."""
        error: dict[str, Any] = {"code": self.code, "message": self.rpc_message}
        if self.data is not None:
            error["data"] = self.data
        return error


class AcpSessionBusy(AcpRequestError):
    """The session already has a prompt running."""


class AcpSessionNotFound(AcpRequestError):
    """The agent does not know the session."""


class AcpSessionLost(AcpError):
    """The agent restarted and does not offer `session/load`: the session cannot continue."""


class AcpConnectionLost(AcpError, UpstreamUnavailable):
    """No connection to the agent; the text says why (exit code, signal, stderr tail)."""


class AcpProtocolError(AcpConnectionLost):
    """The agent broke the protocol."""


def error_detail(data: Any) -> str:
    """The readable part of a JSON-RPC error's `data`: goose sends a string, the Python SDK
    ``{"details": ...}``; anything else is shown as JSON, shortened."""
    if data is None:
        return ""
    if isinstance(data, str):
        text = data
    elif isinstance(data, dict) and isinstance(data.get("details"), str):
        text = data["details"]
    else:
        text = json.dumps(data, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + "…"


def request_error(method: str, code: int, message: str, data: Any = None) -> AcpRequestError:
    """The error class a JSON-RPC error of `method` maps to."""
    said = f"{message} {error_detail(data)}".casefold()
    if code == INVALID_PARAMS and any(marker in said for marker in BUSY_MARKERS):
        return AcpSessionBusy(method, code, message, data)
    if code == RESOURCE_NOT_FOUND or (code == INVALID_PARAMS and "session not found" in said):
        return AcpSessionNotFound(method, code, message, data)
    return AcpRequestError(method, code, message, data)
