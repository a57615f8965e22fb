"""Noticing that the wrapped Flask app logged a cookie login out.

The app logs out by rewriting its session cookie: deleting it, or signing a session without the
user (or with another login). The gateway sees that ``Set-Cookie`` on the app's response to the
request of that login, and ends the login (`EndedLogins`): any copy of the old cookie is refused
from then on, and the login's Socket.IO connections are closed.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..principal import Principal
from .flask_session import FlaskSessionReader

DELETED = ("max-age=0", "expires=thu, 01 jan 1970")


def login_ended(
    reader: FlaskSessionReader, principal: Principal, headers: Iterable[tuple[bytes, bytes]]
) -> bool:
    """Whether a response's headers end `principal`'s cookie login."""
    name = reader.settings.cookie_name
    for key, raw in headers:
        if key.lower() != b"set-cookie":
            continue
        text = bytes(raw).decode("latin-1")
        pair, _, attributes = text.partition(";")
        cookie, _, value = pair.strip().partition("=")
        if cookie != name:
            continue
        value = value.strip().strip('"')
        lowered = attributes.lower()
        if not value or any(mark in lowered for mark in DELETED):
            return True
        session = reader.session(value)
        login = None if session is None else reader.login_of(session)
        if login is None or login.credential_id != principal.credential_id:
            return True
    return False
