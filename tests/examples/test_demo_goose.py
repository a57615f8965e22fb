"""The demo's goose path in-process: runs on the simulated goose, through the demo's gateway.

A run is started with ``POST /gateway/streams/<conversation>/runs`` and followed with
``GET /gateway/runs/<run_id>/events``, which ends after the run's `Finish` or `Error`, so
`httpx.ASGITransport` (which waits for the whole body) can read it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import EventLog
from gateway_kit.demo.gateway import bound_session_ids, build_demo
from gateway_kit.demo.goose import FAILURE, SHELL_TOOL, TOOL_NAME, SimulatedGoose
from gateway_kit.testing import DECLINED_RESPONSE
from gateway_kit.testing.sessions import new_session_id
from gateway_kit.types import Message
from tests.support.approvals import decide, pending_approval

CONVERSATION = "conv-goose"
SLOW = 60.0  # seconds between chunks: a run typing this slowly is still running when cancelled
Envelope = dict[str, Any]


def with_demo(
    db_url: str, body: Callable[[httpx.AsyncClient], Awaitable[Any]], **options: Any
) -> Any:
    """Run `body` with a client of `build_demo(db_url, **options)`, then stop the demo."""

    async def main() -> Any:
        demo = build_demo(db_url, **options)
        transport = httpx.ASGITransport(app=demo)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://demo.test") as c:
                await log_in(c)
                result = await body(c)
            assert demo.gateway.pumps is not None
            # The pumps record the end of a run just after appending its terminal event, which
            # the run streams have handed over already: stopping now could leave a run active.
            await demo.gateway.pumps.wait_idle()
            return result
        finally:
            assert demo.gateway.pumps is not None
            await demo.gateway.pumps.stop()
            await demo.goose.aclose()
            demo.log.close()

    return asyncio.run(main())


async def log_in(client: httpx.AsyncClient) -> None:
    """Log in as the demo's user; the session's CSRF token goes with every later request."""
    answer = await client.post("/login", json={"username": "demo", "password": "demo"})
    assert answer.status_code == 200, answer.text
    client.headers["x-csrf-token"] = answer.json()["csrf_token"]


async def start_run(client: httpx.AsyncClient, message: str) -> str:
    answer = await client.post(f"/gateway/streams/{CONVERSATION}/runs", json={"message": message})
    assert answer.status_code == 200, answer.text
    run_id: str = answer.json()["run_id"]
    return run_id


async def run_events(client: httpx.AsyncClient, run_id: str) -> list[Envelope]:
    answer = await client.get(f"/gateway/runs/{run_id}/events")
    assert answer.status_code == 200, answer.text
    return [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]


def texts_by_message(events: list[Envelope]) -> dict[str, str]:
    """Every goose message's text, its streamed chunks joined, as the demo's page shows it."""
    texts: dict[str, str] = {}
    for event in events:
        message = event["data"].get("message") if event["type"] == "Message" else None
        for item in message["content"] if message else []:
            if item["type"] == "text":
                texts[message["id"]] = texts.get(message["id"], "") + item["text"]
    return texts


def tool_calls(events: list[Envelope]) -> list[str]:
    return [
        item["toolCall"]["value"]["name"]
        for event in events
        if event["type"] == "Message"
        for item in event["data"]["message"]["content"]
        if item["type"] == "toolRequest"
    ]


def test_a_goose_run_streams_the_scripted_turn_into_the_conversation(sqlite_url: str) -> None:
    async def body(client: httpx.AsyncClient) -> list[Envelope]:
        return await run_events(client, await start_run(client, "hello goose"))

    events = with_demo(sqlite_url, body, typing_delay=0)
    types = [e["type"] for e in events]
    assert types[0] == "RunStarted" and events[0]["data"]["message"] == "hello goose"
    assert types[-1] == "Finish" and types.count("Finish") == 1
    # Between RunStarted and the run's Finish every event is goose's, under goose's own id,
    # counted from 1; goose's own Finish is among them, kept as UpstreamFinish.
    goose = events[1:-1]
    assert [int(e["upstream_event_id"]) for e in goose] == list(range(1, len(goose) + 1))
    assert goose[-1]["type"] == "UpstreamFinish" and events[-1]["upstream_event_id"] is None
    assert {e["stream"] for e in events} == {CONVERSATION}
    assert tool_calls(events) == [TOOL_NAME]
    thinking, answer = texts_by_message(events).values()
    assert thinking == "Let me count the words of your message."
    assert answer.startswith("You said: “hello goose”. That is 2 words. ")


def test_a_failing_goose_run_ends_with_its_error(sqlite_url: str) -> None:
    async def body(client: httpx.AsyncClient) -> list[Envelope]:
        return await run_events(client, await start_run(client, "/fail please"))

    events = with_demo(sqlite_url, body, typing_delay=0)
    assert events[-1]["type"] == "Error" and events[-1]["data"]["error"] == FAILURE
    assert "Finish" not in [e["type"] for e in events]  # the run stream ends at its Error
    assert tool_calls(events) == [TOOL_NAME]


def run_and_page(client_body: str, tmp_path: Path, sqlite_url: str) -> tuple[list[Envelope], Any]:
    """The events of one run of `client_body`, and the run as `GET /gateway/runs/{id}` shows it."""

    async def body(client: httpx.AsyncClient) -> tuple[list[Envelope], Any]:
        run_id = await start_run(client, client_body)
        events = await run_events(client, run_id)
        return events, (await client.get(f"/gateway/runs/{run_id}")).json()

    result: tuple[list[Envelope], Any] = with_demo(
        sqlite_url, body, typing_delay=0, public_root=f"{tmp_path}/{{user_id}}/public"
    )
    return result


def test_a_claimed_page_never_written_is_asked_for_and_written_from_the_follow_ups_call(
    sqlite_url: str, tmp_path: Path
) -> None:
    events, run = run_and_page("/publish report", tmp_path, sqlite_url)
    types = [e["type"] for e in events]
    assert types.count("FollowUpStarted") == 1
    follow_up = next(e for e in events if e["type"] == "FollowUpStarted")
    assert follow_up["data"]["missing"] == ["public/report.html"]
    assert tool_calls(events) == ["write_file"]  # the follow-up's, carrying the page
    assert "guard_failed" not in types
    assert events[-1]["type"] == "Finish" and "guard_failed" not in events[-1]["data"]
    assert run["guard_failed"] is False
    assert "<h1>report</h1>" in (tmp_path / "demo" / "public" / "report.html").read_text()


def test_a_page_only_pretended_ends_flagged_after_the_follow_ups(
    sqlite_url: str, tmp_path: Path
) -> None:
    events, run = run_and_page("/pretend report", tmp_path, sqlite_url)
    types = [e["type"] for e in events]
    assert types.count("FollowUpStarted") == 2  # the lifecycle's max_follow_ups
    failed = next(e for e in events if e["type"] == "guard_failed")
    assert failed["data"]["missing"] == ["public/report.html"]
    assert events[-1]["type"] == "Finish" and events[-1]["data"]["guard_failed"] is True
    assert run["guard_failed"] is True
    assert not (tmp_path / "demo" / "public" / "report.html").exists()


def button_message(label: str) -> str:
    """The message the demo page's button labelled `label` starts a run with."""
    html = (resources.files("gateway_kit.demo") / "static" / "conversation.html").read_text()
    found = re.search(rf'<button[^>]*data-message="([^"]+)"[^>]*>{re.escape(label)}</button>', html)
    assert found is not None, f"no button {label!r} on the demo page"
    return found[1]


def test_never_delivered_ends_flagged_after_fake_delivery_ran_in_the_same_demo(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The page's two guard buttons, one after the other: the page the first has the follow-up
    write must not be the one the second only pretends to have written."""

    async def body(client: httpx.AsyncClient) -> list[list[Envelope]]:
        runs = []
        for label in ("fake delivery", "never delivered"):
            runs.append(await run_events(client, await start_run(client, button_message(label))))
        return runs

    delivered, pretended = with_demo(
        sqlite_url, body, typing_delay=0, public_root=f"{tmp_path}/{{user_id}}/public"
    )
    assert delivered[-1]["type"] == "Finish" and "guard_failed" not in delivered[-1]["data"]
    assert [e["type"] for e in pretended].count("FollowUpStarted") == 2
    assert pretended[-2]["type"] == "guard_failed"
    assert pretended[-1]["type"] == "Finish" and pretended[-1]["data"]["guard_failed"] is True


def test_an_image_refused_by_a_text_model_is_retried_without_the_image_tool(
    sqlite_url: str, tmp_path: Path
) -> None:
    events, run = run_and_page("/image", tmp_path, sqlite_url)
    recovery = next(e for e in events if e["type"] == "RecoveryStarted")
    assert recovery["data"]["recovery"] == "visual_fallback"
    assert recovery["data"]["error_class"] == "SESSION_VISUAL_CONTEXT_UNSUPPORTED"
    assert events[-1]["type"] == "Finish"
    assert [a.get("recovery") for a in run["attempts"]] == [None, "visual_fallback"]
    assert tool_calls(events) == ["read_image", TOOL_NAME]  # no image read after the retry


def tool_results(events: list[Envelope]) -> list[str]:
    return [
        content["text"]
        for event in events
        if event["type"] == "Message"
        for item in event["data"]["message"]["content"]
        if item["type"] == "toolResponse"
        for content in item["toolResult"]["value"]["content"]
    ]


def approve_run(sqlite_url: str, decision: str) -> tuple[Envelope, Envelope, list[Envelope]]:
    """A run of ``/approve rm -rf build``: its approval as asked, as decided with `decision`,
    and the run's events."""

    async def body(client: httpx.AsyncClient) -> tuple[Envelope, Envelope, list[Envelope]]:
        run_id = await start_run(client, "/approve rm -rf build")
        asked = await pending_approval(client, CONVERSATION)
        answer = await decide(client, asked, decision)
        assert answer.status_code == 200, answer.text
        return asked, answer.json()["approval"], await run_events(client, run_id)

    result: tuple[Envelope, Envelope, list[Envelope]] = with_demo(sqlite_url, body, typing_delay=0)
    return result


def test_an_approve_run_asks_to_run_the_command_and_goes_on_once_allowed(
    sqlite_url: str,
) -> None:
    asked, decided, events = approve_run(sqlite_url, "approve")
    assert asked["tool_name"] == SHELL_TOOL
    assert asked["arguments"] == {"command": "rm -rf build"}
    assert asked["run_id"] == events[0]["run_id"]
    assert decided["status"] == "approved" and decided["decided_by"] == "demo"
    types = [e["type"] for e in events]
    assert types.index("approval_requested") < types.index("approval_decided")
    assert events[-1]["type"] == "Finish"
    assert tool_calls(events) == [SHELL_TOOL]
    assert tool_results(events) == ["ran `rm -rf build` (simulated: nothing was run)"]
    asking, answered = texts_by_message(events).values()
    assert asking.endswith("`rm -rf build`")
    assert answered.endswith("what came of `rm -rf build`.")


def test_an_approve_run_goes_on_after_a_rejection_with_goose_s_refusal(sqlite_url: str) -> None:
    _, decided, events = approve_run(sqlite_url, "reject")
    assert decided["status"] == "rejected"
    assert events[-1]["type"] == "Finish"
    assert tool_results(events) == [DECLINED_RESPONSE]
    assert list(texts_by_message(events).values())[-1].endswith("what came of `rm -rf build`.")


def test_cancel_stops_a_goose_run_that_is_typing(sqlite_url: str) -> None:
    async def body(client: httpx.AsyncClient) -> tuple[list[Envelope], int]:
        run_id = await start_run(client, "take your time")
        busy = await client.post(f"/gateway/streams/{CONVERSATION}/runs", json={"message": "x"})
        cancelled = await client.post(f"/gateway/runs/{run_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        return await run_events(client, run_id), busy.status_code

    events, busy_status = with_demo(sqlite_url, body, typing_delay=SLOW)
    assert busy_status == 409
    types = [e["type"] for e in events]
    assert types[:2] == ["RunStarted", "CancelRequested"]
    assert types[-1] == "Finish" and types.count("Finish") == 1
    assert "MessageUsage" not in types  # the turn stopped before its end


def test_a_restarted_demo_runs_again_in_the_conversation_of_an_earlier_run(
    sqlite_url: str,
) -> None:
    async def one_run(client: httpx.AsyncClient) -> list[Envelope]:
        return await run_events(client, await start_run(client, "again"))

    first = with_demo(sqlite_url, one_run, typing_delay=0)
    second = with_demo(sqlite_url, one_run, typing_delay=0)  # a new goose, as after a restart
    assert first[-1]["type"] == second[-1]["type"] == "Finish"
    assert second[-1]["upstream_event_id"] == first[-1]["upstream_event_id"]  # ids restarted
    with EventLog(sqlite_url) as log:
        assert len(bound_session_ids(log)) == 1  # the conversation kept its goose session


def test_the_simulated_goose_never_hands_out_a_session_id_it_was_given() -> None:
    # A goose started in a new process numbers its sessions from 1 again; here, the ids it is
    # about to hand out stand for those an earlier demo bound streams to.
    day, number = new_session_id().rsplit("_", 1)
    taken = [f"{day}_{int(number) + n}" for n in range(1, 4)]
    goose = SimulatedGoose(taken)
    created = goose.create_session()
    assert created not in taken
    assert set(goose.sessions) == {*taken, created}


def test_the_lifespan_shutdown_ends_the_turns_of_the_simulated_goose(sqlite_url: str) -> None:
    async def main() -> None:
        demo = build_demo(sqlite_url, typing_delay=SLOW)
        startup, shutdown = asyncio.Event(), asyncio.Event()
        sent: list[str] = []

        async def receive() -> Message:
            if not startup.is_set():
                startup.set()
                return {"type": "lifespan.startup"}
            await shutdown.wait()
            return {"type": "lifespan.shutdown"}

        async def send(message: Message) -> None:
            sent.append(message["type"])

        lifespan = asyncio.create_task(demo({"type": "lifespan"}, receive, send))
        try:
            transport = httpx.ASGITransport(app=demo)
            async with httpx.AsyncClient(transport=transport, base_url="http://demo.test") as c:
                await log_in(c)
                await start_run(c, "a long answer")
            shutdown.set()
            await lifespan
            # Without the shutdown the turn would type for minutes; it was ended instead.
            await asyncio.wait_for(demo.goose.wait_idle(), timeout=SLOW / 2)
        finally:
            demo.log.close()
        assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

    asyncio.run(main())
