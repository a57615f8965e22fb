"""`HttpSettings`: the limits on what a client sends and on how long writes to it may take.

They hold for the gateway's own routes and for the wrapped app alike: a WSGI app gets a request
once its body is read within them, so that slow clients hold none of its threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_WSGI_WORKERS,
    check_count,
    check_seconds,
)


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """:param max_body_bytes: the largest request body the gateway's routes accept (413 above
        it), and the wrapped WSGI app is handed.
    :param body_timeout: seconds a client may take to send a request body, to the gateway's
        routes or the wrapped WSGI app (408 after it).
    :param send_timeout: seconds one write to a client may take: an SSE client is then
        disconnected (noticed within a quarter of that again), a Socket.IO connection that
        cannot send what it holds is closed, and the rest of a WSGI app's answer is dropped so
        that its thread finishes.
    :param wsgi_workers: threads serving the wrapped WSGI app; each request holds one while it
        runs.
    """

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    wsgi_workers: int = DEFAULT_WSGI_WORKERS

    def __post_init__(self) -> None:
        check_count("HttpSettings.max_body_bytes", self.max_body_bytes)
        check_seconds("HttpSettings.body_timeout", self.body_timeout)
        check_seconds("HttpSettings.send_timeout", self.send_timeout)
        check_count("HttpSettings.wsgi_workers", self.wsgi_workers)
