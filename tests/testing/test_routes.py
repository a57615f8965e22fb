"""The fake's HTTP surface: auth, sessions, reply and cancel answers, what it records."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from gateway_kit.testing import (
    FakeGoose,
    StreamingASGITransport,
    Turn,
    goose_validator,
    user_message,
)

from .frames import open_events, reply, start_reply

PROTECTED = [
    ("POST", "/agent/start"),
    ("POST", "/agent/resume"),
    ("POST", "/sessions/{sid}/reply"),
    ("POST", "/sessions/{sid}/cancel"),
    ("GET", "/sessions/{sid}/events"),
    ("GET", "/sessions/{sid}"),
]


def test_status_needs_no_secret_key() -> None:
    async def main() -> None:
        fake = FakeGoose()
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(fake), base_url="http://goose.test"
        ) as anonymous:
            response = await anonymous.get("/status")
        assert (response.status_code, response.text) == (200, "ok")

    asyncio.run(main())


@pytest.mark.parametrize("secret", [None, "wrong"])
@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_every_other_route_needs_the_secret_key(method: str, path: str, secret: str | None) -> None:
    async def main() -> None:
        fake = FakeGoose(secret_key="right")
        session_id = fake.create_session()
        headers = {} if secret is None else {"X-Secret-Key": secret}
        transport = StreamingASGITransport(fake)
        async with httpx.AsyncClient(transport=transport, base_url="http://goose.test") as client:
            response = await client.request(
                method,
                path.format(sid=session_id),
                headers=headers,
                json={"request_id": str(uuid.uuid4()), "user_message": user_message("hi")},
            )
        assert response.status_code == 401
        assert set(response.json()) == {"message"}
        assert fake.reply_calls == [] and fake.events_calls == []
        assert fake.conversation(session_id) == []

    asyncio.run(main())


def test_agent_start_and_get_session_answer_goose_sessions() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_schema = goose_validator("Session")
        async with fake.client() as client:
            started = await client.post("/agent/start", json={"working_dir": "/work"})
            assert started.status_code == 200
            session = started.json()
            session_schema.validate(session)
            assert session["working_dir"] == "/work"
            await start_reply(client, session["id"], "remember me")
            await fake.wait_idle()
            fetched = await client.get(f"/sessions/{session['id']}")
        assert fetched.status_code == 200
        session_schema.validate(fetched.json())
        texts = [m["content"][0]["text"] for m in fetched.json()["conversation"]]
        assert texts == ["remember me", "remember me"]
        assert fetched.json()["message_count"] == 2

    asyncio.run(main())


def test_resume_answers_the_session_and_404_for_an_unknown_one() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        async with fake.client() as client:
            body = {"session_id": session_id, "load_model_and_extensions": True}
            resumed = await client.post("/agent/resume", json=body)
            unknown = await client.post(
                "/agent/resume", json={"session_id": "nope", "load_model_and_extensions": True}
            )
            missing = await client.get("/sessions/nope")
        assert resumed.status_code == 200
        goose_validator("ResumeAgentResponse").validate(resumed.json())
        assert resumed.json()["session"]["id"] == session_id
        assert unknown.status_code == 404 and "message" in unknown.json()
        assert missing.status_code == 404 and "message" in missing.json()

    asyncio.run(main())


def test_reply_rejects_a_request_id_that_is_not_a_uuid() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        async with fake.client() as client:
            response = await reply(client, session_id, request_id="run-1")
        assert response.status_code == 400
        assert response.json() == {"message": "request_id must be a valid UUID"}
        assert fake.active_request_ids(session_id) == []

    asyncio.run(main())


@pytest.mark.parametrize(
    "request_id",
    [
        "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "67E55044-10B1-426F-9247-BB680E5FE0C8",
        "67e5504410b1426f9247bb680e5fe0c8",
        "{67e55044-10b1-426f-9247-bb680e5fe0c8}",
        "urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8",
    ],
)
def test_reply_accepts_every_uuid_form_goose_parses(request_id: str) -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        async with fake.client() as client:
            response = await reply(client, session_id, request_id=request_id)
        assert response.status_code == 200
        assert response.json() == {"request_id": request_id}
        await fake.wait_idle()

    asyncio.run(main())


def test_reply_to_an_unknown_session_is_404() -> None:
    async def main() -> None:
        fake = FakeGoose()
        async with fake.client() as client:
            response = await reply(client, "20240101_99")
            events = await client.get("/sessions/20240101_99/events")
        assert response.status_code == 404 and "message" in response.json()
        assert events.status_code == 404

    asyncio.run(main())


def test_reply_answers_at_once_while_the_turn_runs_in_the_background() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        release = asyncio.Event()
        fake.script(session_id, Turn().text("first").pause(release).text("second"))
        async with fake.client() as client:
            request_id = await start_reply(client, session_id)
            assert fake.active_request_ids(session_id) == [request_id]
            assert [e["type"] for _, e in fake.buffered_events(session_id)] == ["Message"]
            release.set()
            await fake.wait_idle()
        types = [e["type"] for _, e in fake.buffered_events(session_id)]
        assert types == ["Message", "Message", "Finish"]
        assert fake.active_request_ids(session_id) == []

    asyncio.run(main())


def test_a_second_reply_is_refused_until_the_first_is_cancelled() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        fake.script(session_id, Turn().hang())
        async with fake.client() as client:
            first = await start_reply(client, session_id)
            refused = await reply(client, session_id)
            assert refused.status_code == 400
            assert refused.json() == {
                "message": "Session already has an active request. Cancel it first."
            }
            cancelled = await client.post(
                f"/sessions/{session_id}/cancel", json={"request_id": first}
            )
            assert cancelled.status_code == 200
            # The session is free at once, while the old task may still be winding down.
            second = await start_reply(client, session_id)
        await fake.wait_idle()
        assert [c.status for c in fake.reply_calls] == [200, 400, 200]
        assert (fake.reply_calls[0].request_id, fake.reply_calls[2].request_id) == (first, second)

    asyncio.run(main())


def test_cancel_answers_200_for_unknown_ids() -> None:
    async def main() -> None:
        fake = FakeGoose()
        session_id = fake.create_session()
        async with fake.client() as client:
            for sid in (session_id, "20240101_99"):
                response = await client.post(
                    f"/sessions/{sid}/cancel", json={"request_id": str(uuid.uuid4())}
                )
                assert response.status_code == 200
        assert [c.session_id for c in fake.cancel_calls] == [session_id, "20240101_99"]

    asyncio.run(main())


def test_unknown_paths_and_wrong_methods_are_json_errors() -> None:
    async def main() -> None:
        fake = FakeGoose()
        async with fake.client() as client:
            unknown = await client.get("/nope")
            wrong_method = await client.get("/sessions/x/reply")
            not_json = await client.post(
                "/agent/start", content=b"{", headers={"content-type": "application/json"}
            )
            wrong_shape = await client.post("/agent/start", json={"dir": "/"})
        assert (unknown.status_code, wrong_method.status_code) == (404, 405)
        assert (not_json.status_code, wrong_shape.status_code) == (400, 422)
        for response in (unknown, wrong_method, not_json, wrong_shape):
            assert set(response.json()) == {"message"}

    asyncio.run(main())


def test_calls_are_recorded_with_the_last_event_id_sent() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.01)
        session_id = fake.create_session()
        assert fake.requests == []  # goose was never contacted
        async with fake.client() as client:
            request_id = await start_reply(client, session_id, "hi")
            await fake.wait_idle()
            for header in (None, "2"):
                async with open_events(client, session_id, last_event_id=header) as events:
                    await events.next_frame()
        assert [c.last_event_id for c in fake.events_calls] == [None, "2"]
        assert fake.reply_calls[0].request_id == request_id
        assert fake.reply_calls[0].user_message["content"][0]["text"] == "hi"
        assert [r.path for r in fake.requests] == [
            f"/sessions/{session_id}/reply",
            f"/sessions/{session_id}/events",
            f"/sessions/{session_id}/events",
        ]
        assert fake.requests[0].headers["x-secret-key"] == fake.secret_key
        fake.clear_calls()
        assert fake.requests == [] and fake.reply_calls == [] and fake.events_calls == []

    asyncio.run(main())
