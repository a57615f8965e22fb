"""One approval, followed by everyone who watches the conversation: two tabs of the demo's
page in headless Chromium (one logged-in browser) and ``gateway-kit tail`` in a terminal.

A tab runs ``/approve rm -rf build`` on the simulated goose, which waits for an approval. Both
tabs show its card and the tail prints ``approval_requested``; focusing the card in one tab
claims it, which the other tab and the tail show; a decision in the other tab is shown by both
as the outcome, the tail prints it, and goose goes on to the end of its turn. A tab that
missed the decision and decides too is told who decided first.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from gateway_kit import EventLog
from gateway_kit.approvals import ApprovalStore
from gateway_kit.demo.goose import SHELL_TOOL

from .demo_server import STREAM, WAIT_MS, Server, open_conversation

COMMAND = "rm -rf build"
FINAL_WORDS = f"what came of `{COMMAND}`."
STOP_TIMEOUT = 20.0


class Tail:
    """`gateway-kit tail` of a stream in a process of its own; its lines as they come."""

    def __init__(self, stream: str, db_url: str) -> None:
        command = [sys.executable, "-m", "gateway_kit.cli", "tail", stream, "--db", db_url]
        self.proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._new.put(line.rstrip("\n"))
        self._new.put(None)  # the process closed its output

    def wait_for(self, wanted: Callable[[str], bool], timeout: float = WAIT_MS / 1000) -> str:
        """The first line printed, now or later, that is `wanted`; fails at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((line for line in self.lines if wanted(line)), None)
            if found is not None:
                return found
            left = deadline - time.monotonic()
            assert left > 0, "tail did not print it in time:\n" + "\n".join(self.lines)
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, "tail exited:\n" + "\n".join(self.lines)
            self.lines.append(line)

    def event(self, event_type: str, approval_id: str) -> str:
        return self.wait_for(lambda line: f" {event_type} " in line and approval_id in line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(STOP_TIMEOUT)
        self._reader.join(STOP_TIMEOUT)  # it reads up to the end of the output, then stops
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def tail(demo: Server) -> Iterator[Tail]:
    following = Tail(STREAM, demo.db_url)
    try:
        following.wait_for(lambda line: line.startswith(f"# {STREAM} in "))
        yield following
    finally:
        following.stop()


def printed_approval(line: str) -> Any:
    """The approval a line of `gateway-kit tail` shows (its event's data, last on the line)."""
    return json.loads(line[line.index("{") :])


def card_text(page: Page, part: str) -> str:
    return page.locator(f".approval .{part}").inner_text()


def wait_for_card(page: Page, part: str, text: str) -> None:
    page.wait_for_function(
        """([part, text]) => [...document.querySelectorAll(`.approval .${part}`)]
            .some((e) => e.textContent.includes(text))""",
        arg=[part, text],
        timeout=WAIT_MS,
    )


def wait_for_transcript(page: Page, text: str) -> None:
    page.wait_for_function(
        "text => document.getElementById('transcript').textContent.includes(text)",
        arg=text,
        timeout=WAIT_MS,
    )


def test_two_tabs_and_a_tail_follow_one_approval_from_request_to_the_end_of_the_run(
    demo: Server, browser: Browser, tail: Tail
) -> None:
    context = browser.new_context()
    first, second = context.new_page(), context.new_page()
    open_conversation(first, demo)  # logs the browser in
    second.goto(f"{demo.url}/conversations/{STREAM}")
    second.wait_for_function("document.getElementById('state').className === 'live'")
    second.wait_for_function("document.getElementById('socket-state').className === 'live'")
    tabs = (first, second)

    first.fill("#run-message", f"/approve {COMMAND}")
    first.click("#run button:not(#cancel)")
    for tab in tabs:
        tab.wait_for_selector(".approval:not(.closed) button.approve", timeout=WAIT_MS)
    approval_id = first.get_attribute(".approval", "data-approval-id")
    assert approval_id is not None and approval_id.startswith("apr_")
    requested = tail.event("approval_requested", approval_id)
    asked = [
        (card_text(tab, "title"), card_text(tab, "arguments"), card_text(tab, "claim"))
        for tab in tabs
    ]
    countdowns = [card_text(tab, "countdown") for tab in tabs]
    second_id = second.get_attribute(".approval", "data-approval-id")

    first.focus(".approval")
    wait_for_card(first, "claim", "claimed by demo (this tab)")
    wait_for_card(second, "claim", "claimed by demo")
    claimed = tail.event("approval_claimed", approval_id)
    claims = [card_text(tab, "claim") for tab in tabs]
    # Later events leave the arguments out: each card keeps those of the first.
    arguments_claimed = [card_text(tab, "arguments") for tab in tabs]

    second.click(".approval button.approve")
    for tab in tabs:
        wait_for_card(tab, "outcome", "approved by demo")
    decided = tail.event("approval_decided", approval_id)
    for tab in tabs:
        wait_for_transcript(tab, FINAL_WORDS)
        wait_for_transcript(tab, "— done")
    tail.wait_for(lambda line: " Finish " in line)
    buttons = [tab.locator(".approval button.approve").is_visible() for tab in tabs]
    outcomes = [card_text(tab, "outcome") for tab in tabs]
    arguments_decided = [card_text(tab, "arguments") for tab in tabs]
    answers = [card_text(tab, "answer") for tab in tabs]
    closed = [tab.locator(".approval.closed").count() for tab in tabs]
    context.close()

    assert second_id == approval_id
    for title, arguments, claim in asked:
        assert title == f"goose asks to run {SHELL_TOOL}"
        assert '"command": "rm -rf build"' in arguments
        assert claim == "not claimed yet"
    assert all(countdown.startswith("expires in ") for countdown in countdowns)
    shown = [arguments for _, arguments, _ in asked]
    assert arguments_claimed == shown and arguments_decided == shown
    assert claims == ["claimed by demo (this tab)", "claimed by demo"]
    assert all(outcome.startswith("approved by demo at ") for outcome in outcomes)
    assert answers == ["", ""]
    assert buttons == [False, False] and closed == [1, 1]
    printed = [printed_approval(line) for line in (requested, claimed, decided)]
    assert [a["status"] for a in printed] == ["pending", "pending", "approved"]
    assert [a["claimed_by"] for a in printed] == [None, "demo", "demo"]
    assert printed[2]["decided_by"] == "demo"
    assert printed[0]["run_id"] is not None and f" run={printed[0]['run_id']} " in requested


def test_a_tab_that_missed_the_decision_is_told_who_decided_first(
    demo: Server, browser: Browser
) -> None:
    context = browser.new_context()
    first = context.new_page()
    open_conversation(first, demo)
    first.click("#provoke button[data-message^='/approve']")
    first.wait_for_selector(".approval:not(.closed) button.reject", timeout=WAIT_MS)
    # A tab whose stream never connects knows the approval from the list it asks for on load,
    # and hears nothing of the decision another tab takes.
    late = context.new_page()
    late.route("**/gateway/streams/*/events*", lambda route: route.abort())
    late.goto(f"{demo.url}/conversations/{STREAM}")
    late.wait_for_selector(".approval:not(.closed) button.approve", timeout=WAIT_MS)
    late.focus(".approval")  # claimed here first, so its decision goes out without a claim
    wait_for_card(late, "claim", "claimed by demo (this tab)")
    wait_for_card(first, "claim", "claimed by demo")
    first.click(".approval button.reject")
    wait_for_card(first, "outcome", "rejected by demo")
    approval_id = late.get_attribute(".approval", "data-approval-id")
    late.click(".approval button.approve")
    wait_for_card(late, "outcome", "rejected by demo")
    wait_for_card(late, "answer", "the first decision wins")
    answer = card_text(late, "answer")
    approve_shown = late.locator(".approval button.approve").is_visible()
    wait_for_transcript(first, "— done")
    context.close()
    assert approval_id is not None
    with EventLog(demo.db_url) as log:
        refused = [
            e.action for e in ApprovalStore(log).audit_of(approval_id) if "refused" in e.action
        ]

    assert refused == ["decision_refused"]  # the late tab's decision went out, and lost
    assert "demo rejected it at" in answer and "the first decision wins" in answer
    assert not approve_shown
