"""goose's error answers, turned into the typed UpstreamHTTPError tree.

goose writes errors as JSON `{"message": ...}`, but some routes (the auth layer, `/events`) answer
with a bare status and no body, and a proxy in between may answer with HTML: every case still
gives a readable message. A ``Retry-After`` (seconds or an HTTP date) is kept with the error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from gateway_kit.exceptions import (
    SessionBusy,
    SessionNotFound,
    UpstreamAuthError,
    UpstreamBadRequest,
    UpstreamHTTPError,
)

SESSION_BUSY_MARKER = "Session already has an active request"
NO_MESSAGE = "no error message"
MAX_MESSAGE_CHARS = 300


def error_from_response(
    response: httpx.Response, *, about_session: bool = True
) -> UpstreamHTTPError:
    """Map a goose error response (its body already read) to the matching exception.

    `about_session` is False for routes without a session id, where a 404 means a wrong URL
    rather than an unknown session.
    """
    status = response.status_code
    message = error_message(response)
    if status == httpx.codes.UNAUTHORIZED:
        return UpstreamAuthError(status, message)
    if status == httpx.codes.NOT_FOUND and about_session:
        return SessionNotFound(status, message)
    if status == httpx.codes.BAD_REQUEST:
        if SESSION_BUSY_MARKER in message:
            return SessionBusy(status, message)
        return UpstreamBadRequest(status, message)
    return UpstreamHTTPError(status, message, retry_after(response))


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait (a number or an HTTP date); None
    without one, or with one that says neither."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(UTC)).total_seconds()
    if seconds != seconds or seconds == float("inf"):  # NaN, inf: no usable answer
        return None
    return max(0.0, round(seconds, 3))


def error_message(response: httpx.Response) -> str:
    """goose's `message`, else the body text (shortened), else the status's reason phrase."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    text = response.text.strip()
    if len(text) > MAX_MESSAGE_CHARS:
        return text[:MAX_MESSAGE_CHARS] + "…"
    return text or response.reason_phrase or NO_MESSAGE
