"""Everything the fake emits validates against goose's own OpenAPI `MessageEvent` schema."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from gateway_kit.testing import (
    TEXT_ONLY_MODEL_ERROR,
    FakeGoose,
    Turn,
    goose_openapi,
    goose_validator,
    user_message,
)

from .frames import FAST_PINGS, Frame, open_events, start_reply

EVERY_STEP = (
    Turn()
    .text("Let me ", "look.")
    .usage(12, 3)
    .tool_call("developer__shell", {"command": "ls"}, result="a.png")
    .read_image("a.png")
    .notification("call_1", {"method": "notifications/message", "params": {"data": "x"}})
    .update_conversation([user_message("compacted")])
    .usage(5, 1, message_id=None)
    .error(TEXT_ONLY_MODEL_ERROR)
)


async def _every_frame_kind() -> list[Frame]:
    """Frames of every kind the fake sends: each step kind, errors, ActiveRequests, too far."""
    fake = FakeGoose(ping_interval=FAST_PINGS, replay_buffer_size=64)
    session_id = fake.create_session()
    release = asyncio.Event()
    fake.script(
        session_id,
        EVERY_STEP,
        Turn().error("Failed to get session agent: gone", finish=False),
    )
    frames: list[Frame] = []
    async with fake.client() as client:
        for _ in range(2):
            await start_reply(client, session_id)
            await fake.wait_idle()
        await start_reply(client, session_id)  # the echo turn
        await fake.wait_idle()
        fake.script(session_id, Turn().text("held").pause(release))
        await start_reply(client, session_id)  # held: in flight while we connect
        replayed = len(fake.buffered_events(session_id))
        async with open_events(client, session_id) as events:
            for _ in range(1 + replayed):  # ActiveRequests, then the replay
                frame = await events.next_event()
                assert frame is not None
                frames.append(frame)
        release.set()
        await fake.wait_idle()
        for _ in range(70):  # push the first events out of the 64-event buffer
            await start_reply(client, session_id, "x")
            await fake.wait_idle()
        async with open_events(client, session_id, "1") as events:
            frames += await events.remaining_frames()
    return frames


def test_every_event_the_fake_emits_is_a_goose_message_event() -> None:
    frames = asyncio.run(_every_frame_kind())
    validator = goose_validator("MessageEvent")
    for frame in frames:
        errors = [e.message for e in validator.iter_errors(frame.data)]
        assert errors == [], (frame.lines, errors)
    kinds = {frame.type for frame in frames}
    assert kinds == {
        "ActiveRequests",
        "Message",
        "MessageUsage",
        "Notification",
        "UpdateConversation",
        "Error",
        "Finish",
    }
    contents = {
        c["type"] for f in frames if f.type == "Message" for c in f.data["message"]["content"]
    }
    assert contents == {"text", "toolRequest", "toolResponse"}
    images = [
        c
        for f in frames
        if f.type == "Message"
        for tool in f.data["message"]["content"]
        if tool["type"] == "toolResponse"
        for c in tool["toolResult"]["value"]["content"]
        if c["type"] == "image"
    ]
    assert images and all(goose_validator("MessageContent").is_valid(i) for i in images)
    assert frames[-1].id == "0"  # the too-far-behind frame was among them


@pytest.mark.parametrize(
    "event",
    [
        {"type": "Finish", "reason": "stop"},  # no token_state
        {"type": "Error"},
        {"type": "Bogus"},
        {"type": "ActiveRequests", "request_ids": [1]},
        {
            "type": "Message",
            "message": {
                "role": "system",
                "created": 0,
                "content": [],
                "metadata": {"userVisible": True, "agentVisible": True},
            },
            "token_state": {},
        },
    ],
)
def test_the_validator_rejects_what_goose_would_not_send(event: dict[str, Any]) -> None:
    assert not goose_validator().is_valid(event)


def test_nullable_fields_accept_null() -> None:
    usage = {"type": "MessageUsage", "message_id": None, "usage": {"inputTokens": None}}
    assert goose_validator().is_valid(usage)


def test_goose_schemas_allow_the_request_id_fields_goose_adds() -> None:
    variants = goose_openapi()["components"]["schemas"]["MessageEvent"]["oneOf"]
    assert all(v.get("additionalProperties", True) is not False for v in variants)
    assert "chat_request_id" not in str(variants)  # undocumented there: validated as extras


def test_the_document_ships_with_the_package() -> None:
    document = goose_openapi()
    assert document["info"]["version"] == "1.41.0"
    assert "/sessions/{id}/events" in document["paths"]
    with pytest.raises(KeyError):
        goose_validator("NoSuchSchema")


def test_the_user_message_helper_builds_a_valid_reply_request() -> None:
    body = {"request_id": str(uuid.uuid4()), "user_message": user_message("hi")}
    goose_validator("SessionReplyRequest").validate(body)
