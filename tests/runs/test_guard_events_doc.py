"""The goose events docs/plugin_hooks.md shows under "What a guard sees" are the events a guard is
handed: a run through the fake goose, recorded by a `finish_guard`, stores events of the same
types, in the same order, with the same keys and kinds of values; the examples are goose's
`MessageEvent`s by goose's own schema, and the guard helpers read them as the doc says."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import (
    Event,
    EventLog,
    Gateway,
    GooseUpstream,
    ToolCall,
    final_assistant_text,
    hookimpl,
    tool_calls,
)
from gateway_kit.testing import FakeGoose, Turn, goose_validator
from tests.support.waiting import until

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin_hooks.md"
HEADING = "#### What a guard sees\n"
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.DOTALL | re.MULTILINE)
GATEWAY_TYPES = {"RunStarted"}  # the gateway's own events; every other one is goose's JSON


def documented() -> list[dict[str, Any]]:
    """The examples of the doc's section, each `{"type": event.type, "data": event.data}`."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(HEADING)
    end = text.index("\n#", start + len(HEADING))
    return [json.loads(block) for block in JSON_BLOCK.findall(text[start:end])]


def as_events(examples: Sequence[dict[str, Any]]) -> list[Event]:
    return [
        Event(n, "s", n, "r", e["type"], json.dumps(e["data"]), None, 0.0)
        for n, e in enumerate(examples, 1)
    ]


def shape(value: Any) -> Any:
    """What is compared: the keys of every object, the kind of every value."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value[:1]]
    return type(value).__name__


class Recorder:
    def __init__(self) -> None:
        self.handed: list[list[Event]] = []

    @hookimpl
    def finish_guard(self, events: Sequence[Event]) -> None:
        self.handed.append(list(events))


def handed_to_a_guard(sqlite_url: str, turn: Turn) -> list[Event]:
    recorder = Recorder()
    fake = FakeGoose(ping_interval=0.05, default_turn=lambda message: turn)

    async def main() -> None:
        upstream = GooseUpstream(secret_key=fake.secret_key, client=fake.client())
        with EventLog(sqlite_url) as log:
            gateway = Gateway(
                log=log,
                upstream=upstream,
                plugins=[recorder],
                allow_anonymous=True,
                load_entry_points=False,
            )
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                started = await client.post("/gateway/streams/foxes/runs", json={"message": "hi"})
                assert started.status_code == 200, started.text
                await until(lambda: bool(recorder.handed), timeout=20)
            assert gateway.runs is not None
            await gateway.runs.shutdown()
        await upstream.aclose()

    asyncio.run(main())
    return recorder.handed[0]


def test_the_documented_events_are_what_a_guard_is_handed(sqlite_url: str) -> None:
    examples = documented()
    written = {"path": "public/foxes.html", "content": "<!doctype html>..."}
    turn = (
        Turn()
        .tool_call("write_file", written, result="wrote public/foxes.html")
        .text("The page is ", "ready")
        .usage(12, 7)
    )
    handed = [e for e in handed_to_a_guard(sqlite_url, turn) if e.type != "MessageUsage"]
    assert [e["type"] for e in examples] == [e.type for e in handed]
    for example, event in zip(examples, handed, strict=True):
        assert shape(example["data"]) == shape(event.data), f"the doc's {event.type} drifted"
        if event.type == "Message":
            assert example["data"]["message"]["role"] == event.data["message"]["role"]
            kinds = [c["type"] for c in event.data["message"]["content"]]
            assert [c["type"] for c in example["data"]["message"]["content"]] == kinds
    assert handed[-1].type == "UpstreamFinish"  # the last event a guard is handed


def test_the_documented_goose_events_are_goose_message_events() -> None:
    validator = goose_validator("MessageEvent")
    goose_events = [e["data"] for e in documented() if e["type"] not in GATEWAY_TYPES]
    assert len(goose_events) == 5
    for data in goose_events:
        assert validator.is_valid(data), list(validator.iter_errors(data))


def test_the_guard_helpers_read_the_documented_events_as_the_doc_says() -> None:
    events = as_events(documented())
    chunks = [e.data["message"] for e in events if e.type == "Message"][-2:]
    assert chunks[0]["id"] == chunks[1]["id"]  # one streamed text
    assert final_assistant_text(events) == "The page is ready"
    written = {"path": "public/foxes.html", "content": "<!doctype html>..."}
    assert tool_calls(events) == [ToolCall("call_9a2e", "write_file", written, "success")]
