"""Ending the open streams of a credential that is revoked or logged out, in every process.

A stream is authorized once, when it opens; the credential that opened it may end later
(``gateway-kit tokens revoke``, a logout in the Flask app, in any process). Each stream of a
token or cookie principal watches its credential in the process's `CredentialView`, which
reads every change within its interval, and ends cleanly when the credential ends: the
client's reconnect then meets the identity stage's 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from ..identity.credentials import CredentialView
from ..principal import BEARER_METHOD, COOKIE_METHOD, HOST_METHOD, Principal
from .fanout import Subscription

STOP_REVOKED = "revoked"
WATCHED_METHODS = frozenset({BEARER_METHOD, HOST_METHOD, COOKIE_METHOD})


def _nothing() -> None:
    return None


def end_when_revoked(
    view: CredentialView | None, principal: Principal | None, sub: Subscription
) -> Callable[[], None]:
    """Stop `sub` when `principal`'s credential ends; returns what stops watching."""
    if view is None or principal is None or principal.method not in WATCHED_METHODS:
        return _nothing
    credential = principal.credential_id
    if credential is None:
        return _nothing
    opened = time.time()
    loop = asyncio.get_running_loop()

    def ended() -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: the stream is gone
            loop.call_soon_threadsafe(sub.stop, STOP_REVOKED)

    unwatch = view.watch(credential, ended)
    # Ended between the identity stage's check and the watch.
    if view.ended_in_memory(credential, opened):
        sub.stop(STOP_REVOKED)
    return unwatch
