"""The demo app's own writes to the log (a task, a title) answer as the gateway's routes do
while the database is away: 503 with ``Retry-After`` and the JSON error, never a 500."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient

from gateway_kit import EventLog
from gateway_kit.demo.app import create_app
from gateway_kit.http.errors import DATABASE_UNAVAILABLE
from tests.support.postgres import PgServer


@pytest.fixture
def client(throwaway_pg_url: str) -> Iterator[FlaskClient]:
    log = EventLog(throwaway_pg_url)
    try:
        app = create_app({"EVENT_LOG": log, "SECRET_KEY": "outage", "TURN_CHUNK_DELAY": 0})
        yield app.test_client()
    finally:
        log.close()


def test_the_apps_writes_answer_503_while_the_database_is_down_and_work_after(
    throwaway_pg: PgServer, client: FlaskClient
) -> None:
    login = client.post("/login", json={"username": "demo", "password": "demo"})
    csrf = {"X-CSRF-Token": login.get_json()["csrf_token"]}
    throwaway_pg.kill()
    task = {"conversation_id": "demo-notes", "message": "hello"}
    title = {"title": "notes"}
    answers = [
        client.post("/api/tasks", json=task, headers=csrf),
        client.post("/api/conversations/demo-notes/title", json=title, headers=csrf),
    ]
    for answer in answers:
        assert answer.status_code == 503, answer.get_data(as_text=True)
        assert answer.headers["Retry-After"].isdigit()
        assert answer.get_json()["error"] == DATABASE_UNAVAILABLE
    throwaway_pg.start()
    renamed = client.post("/api/conversations/demo-notes/title", json=title, headers=csrf)
    assert renamed.status_code == 200, renamed.get_data(as_text=True)
