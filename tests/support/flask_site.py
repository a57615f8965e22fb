"""A strict gateway over the demo's Flask app (users alice and bob), and clients of it."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from flask.json.tag import TaggedJSONSerializer
from itsdangerous import URLSafeTimedSerializer

from gateway_kit import EventLog, Gateway
from gateway_kit.demo import create_app
from tests.support.legacy_paths import EXAMPLE_LEGACY

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
SECRET = "the-current-key"
OLD_SECRET = "the-key-before-rotation"
BASE = "http://app.test"


def flask_app(log: EventLog | None = None, **config: Any) -> Any:
    app = create_app(
        {"TURN_CHUNK_DELAY": 0, "DEMO_USERS": dict(USERS), "SECRET_KEY": SECRET, **config}
    )
    app.config["EVENT_LOG"] = log
    return app


def strict_gateway(log: EventLog, **options: Any) -> Gateway:
    return Gateway(flask_app(log), log=log, **{**EXAMPLE_LEGACY, **options})


def signed_cookie(session: dict[str, Any], *, key: str = SECRET, at: float | None = None) -> str:
    """A session cookie as a Flask app with `key` would sign it, `at` a given time."""
    serializer = URLSafeTimedSerializer(
        key,
        salt="cookie-session",
        serializer=TaggedJSONSerializer(),
        signer_kwargs={"key_derivation": "hmac", "digest_method": hashlib.sha1},
    )
    if at is None:
        return serializer.dumps(session)
    now = time.time
    try:
        time.time = lambda: at  # itsdangerous stamps with time.time()
        return serializer.dumps(session)
    finally:
        time.time = now


def with_clients(
    app: Any, body: Callable[..., Awaitable[Any]], *, count: int = 1, client_addr: Any = None
) -> Any:
    async def main() -> Any:
        transport = httpx.ASGITransport(app=app, client=client_addr or ("127.0.0.1", 50000))
        clients = [httpx.AsyncClient(transport=transport, base_url=BASE) for _ in range(count)]
        try:
            return await body(*clients)
        finally:
            for client in clients:
                await client.aclose()

    return asyncio.run(main())


async def log_in(client: httpx.AsyncClient, user: str) -> str:
    """Log `client` in as `user`; the session's CSRF token."""
    answer = await client.post("/login", json={"username": user, "password": USERS[user]})
    assert answer.status_code == 200, answer.text
    token: str = answer.json()["csrf_token"]
    return token


def assert_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"] == code and isinstance(body["message"], str) and body["message"]
