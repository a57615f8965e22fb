"""Exceptions raised by gateway_kit.

The tree::

    GatewayKitError
    ├── SettingsError             a setting that cannot work (also a ValueError), at start-up
    ├── PluginError               a plugin that cannot be loaded, registered or configured
    ├── EventLogError
    │   ├── InvalidEvent          bad stream/type/data: nothing was written
    │   │   └── PayloadTooLarge   encoded data above the configured limit
    │   ├── InvalidCursor         a cursor that is negative or not an integer
    │   ├── LogClosed             the log was closed
    │   └── DatabaseUnavailable   the database cannot be reached now (HTTP 503, try again)
    │       └── PluginUnavailable a plugin whose word is needed cannot be asked now: no thread
    │                             was free in time, or it has too many calls hung (HTTP 503)
    ├── InvalidCredential         a user id, scope or token text that cannot be stored
    ├── TmuxSessionTaken          another user holds the tmux session, or its user holds the
    │                             most one may (HTTP 403)
    ├── RunError
    │   ├── RunConflict           the stream already has an active run (HTTP 409)
    │   ├── RecoveryUsed          the run already had a recovery of this kind
    │   └── RunNotFound           no run with that id (HTTP 404)
    ├── ApprovalError
    │   ├── ApprovalNotFound      no approval with that id (HTTP 404)
    │   └── ApprovalClosed        decided, expired or voided already (HTTP 409; ``approval``)
    │       ├── ApprovalExpired       nobody decided in time: it counts as rejected (HTTP 410)
    │       └── ArgumentsChanged      the decision names other arguments (HTTP 409)
    └── UpstreamError             talking to goose failed
        ├── UpstreamUnavailable   goose could not be reached (connect error, timeout)
        │   └── UpstreamTimeout   goose did not answer within the gateway's bound (HTTP 504)
        ├── UpstreamTooFarBehind  the events cursor fell out of goose's replay buffer
        └── UpstreamHTTPError     goose answered with an error status (``status``, ``message``)
            ├── UpstreamAuthError     401: wrong or missing X-Secret-Key
            ├── SessionNotFound       404: goose does not know the session
            ├── SessionBusy           400: "Session already has an active request"
            └── UpstreamBadRequest    any other 400
"""

from __future__ import annotations

from typing import Any


class GatewayKitError(Exception):
    """Base class of every error gateway_kit raises."""


class SettingsError(GatewayKitError, ValueError):
    pass


class PluginError(GatewayKitError):
    pass


class InvalidCredential(GatewayKitError, ValueError):
    pass


class TmuxSessionTaken(GatewayKitError, PermissionError):
    pass


class EventLogError(GatewayKitError):
    pass


class InvalidEvent(EventLogError, ValueError):
    pass


class PayloadTooLarge(InvalidEvent):
    pass


class InvalidCursor(EventLogError, ValueError):
    pass


class LogClosed(EventLogError):
    pass


class DatabaseUnavailable(EventLogError):
    """The database cannot be reached now; the same call may succeed once it is back."""


class PluginUnavailable(DatabaseUnavailable):
    """An access plugin cannot be asked now (no thread free in time, or it has too many calls
    hung). Answered wherever a database outage is, and alike: no verdict on the request, a 503
    to try again, never a refusal."""


class RunError(GatewayKitError):
    pass


class RunConflict(RunError):
    pass


class RecoveryUsed(RunError):
    """A run already had a recovery of this kind: each kind runs at most once per run."""


class RunNotFound(RunError, LookupError):
    pass


class UpstreamError(GatewayKitError):
    pass


class UpstreamUnavailable(UpstreamError):
    pass


class UpstreamTimeout(UpstreamUnavailable):
    pass


class UpstreamTooFarBehind(UpstreamError):
    def __init__(self, last_event_id: int | None, message: str) -> None:
        super().__init__(f"goose cannot resume after event {last_event_id}: {message}")
        self.last_event_id = last_event_id
        self.message = message


class UpstreamHTTPError(UpstreamError):
    """`retry_after`: the seconds goose (or a proxy before it) asked to wait, from its
    ``Retry-After``; the text says it too, as ``(retry after N s)``."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        wait = "" if retry_after is None else f" (retry after {retry_after:g} s)"
        super().__init__(f"goose answered {status}: {message}{wait}")
        self.status = status
        self.message = message
        self.retry_after = retry_after


class UpstreamAuthError(UpstreamHTTPError):
    pass


class SessionNotFound(UpstreamHTTPError):
    pass


class SessionBusy(UpstreamHTTPError):
    pass


class UpstreamBadRequest(UpstreamHTTPError):
    pass


class ApprovalError(GatewayKitError):
    """An approval cannot be claimed or decided as asked."""


class ApprovalNotFound(ApprovalError, LookupError):
    pass


class ApprovalClosed(ApprovalError):
    """The approval was decided, expired or voided already: `approval` is how it stands."""

    def __init__(self, message: str, approval: Any) -> None:
        super().__init__(message)
        self.approval = approval


class ApprovalExpired(ApprovalClosed):
    """Nobody decided in time: the approval counts as rejected."""


class ArgumentsChanged(ApprovalClosed):
    """The decision names other arguments than the approval's: the client was shown others."""
