"""A small legacy Flask app of the adopt tests' own, copied under a fresh module name per test.

Its answers vary between two runs the way real apps' do (random ids, times, its own session
cookie) and it keeps its logins in memory, so that a check passes only if each side has its
own app, its own cookie jar and the masking.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

from flask import Flask, Response, request

API_TOKEN = "app-own-token"
SESSION_COOKIE = "site_session"

app = Flask(__name__)
logins: dict[str, str] = {}  # session id → user: this module's memory, one per side
visits = [0]


@app.post("/login")
def login() -> Response:
    user = (request.get_json(silent=True) or request.form).get("user", "")
    if not user:
        return Response('{"error": "no user"}', 400, content_type="application/json")
    session_id = secrets.token_urlsafe(24)
    logins[session_id] = user
    answer = Response(f'{{"user": "{user}"}}', content_type="application/json")
    answer.set_cookie(SESSION_COOKIE, session_id, httponly=True)
    return answer


@app.get("/me")
def me() -> tuple[dict[str, object], int]:
    user = logins.get(request.cookies.get(SESSION_COOKIE, ""))
    if user is None:
        return {"error": "not logged in"}, 401
    return {"user": user, "session": request.cookies[SESSION_COOKIE]}, 200


@app.get("/visits")
def count_visits() -> dict[str, object]:
    visits[0] += 1  # a second side sharing this module would see 2
    return {"visits": visits[0]}


@app.get("/orders/latest")
def latest_order() -> dict[str, object]:
    now = datetime.now(UTC)
    return {
        "id": str(uuid.uuid4()),
        "created_at": now.isoformat(),
        "created": int(now.timestamp()),
        "etag": secrets.token_hex(16),
        "items": [{"sku": "A-1", "count": int(request.args.get("count", "2"))}],
    }


@app.get("/events")
def events() -> Response:
    def forever() -> Iterator[str]:
        n = 0
        while True:  # a stream that never ends: the check must still finish
            n += 1
            yield f'id: {n}\ndata: {{"n": {n}, "at": {time.time()}, "id": "{uuid.uuid4()}"}}\n\n'
            time.sleep(0.001)

    return Response(forever(), content_type="text/event-stream")


@app.get("/page")
def page() -> Response:
    nonce = secrets.token_hex(16)
    body = f'<!doctype html><html><body><script nonce="{nonce}"></script><p>Hello</p></body></html>'
    return Response(body, content_type="text/html; charset=utf-8")


@app.get("/private")
def private() -> tuple[dict[str, object], int]:
    if request.headers.get("Authorization") != f"Bearer {API_TOKEN}":
        return {"error": "bad token"}, 401
    return {"private": True}, 200
