"""A real browser keeps every event, exactly once and in order, across a killed server.

Headless Chromium (Debian's, driven by Playwright) opens the demo's conversation page, whose
`EventSource` reads the stream from a gateway that `gateway-kit serve` runs under uvicorn in a
subprocess, on a SQLite file. The server is killed with SIGKILL while events are being sent,
events are appended while it is down, then it is restarted on the same port: the browser
reconnects on its own with ``Last-Event-ID`` and the page ends with every event once, in order.
The page does not deduplicate, so a repeated or skipped event shows.

The same page also starts goose runs on the demo's simulated goose and cancels them: its
transcript shows the streamed chunks merged into messages, the tool call, and how each run ended.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
from playwright.sync_api import Page, sync_playwright

from gateway_kit import EventLog

from .demo_server import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NO_CHROMIUM,
    STREAM,
    WAIT_MS,
    Server,
    open_conversation,
)

BATCH = 25


def received(page: Page) -> list[dict[str, object]]:
    events: list[dict[str, object]] = page.evaluate("window.gatewayEvents")
    return events


def wait_for_event(page: Page, n: int) -> None:
    page.wait_for_function(
        "n => window.gatewayEvents.some(e => e.data.n === n)", arg=n, timeout=WAIT_MS
    )


def append_batch(log: EventLog, start: int) -> int:
    log.append_many(
        {"stream": STREAM, "type": "Message", "data": {"n": n}, "run_id": None}
        for n in range(start, start + BATCH)
    )
    return start + BATCH


def wait_until_ended(demo: Server, page: Page) -> None:
    """Until the run of the page's newest event is recorded as no longer active."""
    run_id = page.evaluate("window.gatewayEvents.at(-1).run_id")
    deadline = time.monotonic() + WAIT_MS / 1000
    run_url = f"{demo.url}/gateway/runs/{run_id}"
    while httpx.get(run_url, headers=demo.auth).json()["status"] == "active":
        assert time.monotonic() < deadline, f"run {run_id} never ended"
        time.sleep(0.05)


def wait_until_caught_up(demo: Server, page: Page) -> None:
    """Until the page has shown the newest event the log holds of its stream now."""
    with EventLog(demo.db_url) as log:
        newest = log.latest(STREAM)
    assert newest is not None, "the stream is empty"
    page.wait_for_function(
        f"window.gatewayEvents.some((e) => e.seq === {newest.seq})", timeout=WAIT_MS
    )


def test_the_page_gets_every_event_once_in_order_across_a_server_kill(demo: Server) -> None:
    assert os.path.exists(CHROMIUM), NO_CHROMIUM
    with EventLog(demo.db_url) as log, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            open_conversation(page, demo)

            sent = append_batch(log, 0)
            wait_for_event(page, sent - 1)
            sent = append_batch(log, sent)  # the server is sending these when it is killed
            assert demo.kill() == -signal.SIGKILL
            sent = append_batch(log, sent)  # written while no server runs
            demo.start()
            sent = append_batch(log, sent)
            wait_for_event(page, sent - 1)
            page.wait_for_function(
                "n => window.socketEvents.some(e => e.data.n === n)", arg=sent - 1, timeout=WAIT_MS
            )

            events = received(page)
            socket_events = page.evaluate("window.socketEvents")
            state = page.evaluate("document.getElementById('state').className")
        finally:
            browser.close()

    assert [e["data"] for e in events] == [{"n": n} for n in range(sent)]
    # Over Socket.IO the page got the same events, each once, across the kill too.
    assert [e["seq"] for e in socket_events] == [e["seq"] for e in events]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    assert {e["stream"] for e in events} == {STREAM}
    assert state == "live"


def transcript(page: Page) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = page.evaluate(
        "[...document.getElementById('transcript').children].map(e => [e.className, e.textContent])"
    )
    return [(kind, text) for kind, text in rows]


def test_the_page_runs_and_cancels_turns_on_the_simulated_goose(demo: Server) -> None:
    assert os.path.exists(CHROMIUM), NO_CHROMIUM
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            open_conversation(page, demo)
            page.fill("#run-message", "hello from the browser")
            page.click("#run button:not(#cancel)")
            page.wait_for_function(
                "document.getElementById('transcript').textContent.includes('— done')",
                timeout=WAIT_MS,
            )
            finished = transcript(page)
            # The run is recorded as ended just after its Finish reaches the page; a second run
            # started in between would be refused (409).
            wait_until_ended(demo, page)

            page.fill("#run-message", "stop me")
            page.click("#run button:not(#cancel)")
            page.wait_for_function("!document.getElementById('cancel').disabled", timeout=WAIT_MS)
            page.click("#cancel")
            page.wait_for_function(
                "document.getElementById('transcript').textContent.includes('— cancelled')",
                timeout=WAIT_MS,
            )
            # Anything the run wrote after its Finish would be in the log once it has ended:
            # the page shows all of that, then it is looked at.
            wait_until_ended(demo, page)
            wait_until_caught_up(demo, page)
            cancelled = transcript(page)[len(finished) :]
            cancel_enabled = page.evaluate("!document.getElementById('cancel').disabled")
        finally:
            browser.close()

    kinds = [kind for kind, _ in finished]
    assert kinds == ["bubble user", "bubble assistant", "tool", "tool", "bubble assistant", "note"]
    assert finished[0][1] == "hello from the browser"
    assert finished[1][1] == "Let me count the words of your message."
    assert finished[2][1].startswith("→ count_words(")
    assert finished[3][1] == "← 4 words"
    assert finished[4][1].startswith("You said: “hello from the browser”. That is 4 words.")
    assert finished[5][1] == "— done"
    assert cancelled[0] == ("bubble user", "stop me")
    assert [text for kind, text in cancelled if kind == "note"] == [
        "— cancel requested",
        "— cancelled",
    ]
    assert cancelled[-1] == ("note", "— cancelled")  # nothing of the run after its Finish
    assert not cancel_enabled
