"""The demo's conversation page as a person reads it, in headless Chromium: logged out it says
that a login is needed (and a login fixes it), new output scrolls into view, and the raw event
list stays folded away until asked for."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page

from gateway_kit import EventLog

from .demo_server import STREAM, WAIT_MS, Server, open_conversation

MESSAGES = 60  # many more bubbles than a window holds
LOGIN_HINT = "(log in first)"


@pytest.fixture
def page(browser: Browser) -> Page:
    return browser.new_page()


def text_of(page: Page, selector: str) -> str:
    return page.locator(selector).inner_text()


def assistant_says(log: EventLog, texts: list[str]) -> None:
    """The legacy app's assistant messages, appended to the page's conversation."""
    log.append_many(
        {
            "stream": STREAM,
            "type": "Message",
            "data": {"role": "assistant", "message_id": f"m-{text}", "text": text},
            "run_id": None,
        }
        for text in texts
    )


def last_bubble_in_view(page: Page) -> bool:
    shown: bool = page.evaluate(
        """() => {
        const box = document.getElementById("transcript").getBoundingClientRect();
        const last = document.getElementById("transcript").lastElementChild;
        const rect = last.getBoundingClientRect();
        return rect.top >= box.top - 1 && rect.bottom <= box.bottom + 1
            && rect.bottom <= window.innerHeight;
    }"""
    )
    return shown


def test_logged_out_the_page_says_a_login_is_needed_and_a_login_fixes_it(
    demo: Server, page: Page
) -> None:
    page.goto(f"{demo.url}/conversations/{STREAM}")
    page.wait_for_function(
        "document.getElementById('state').textContent.startsWith('Not logged in')",
        timeout=WAIT_MS,
    )
    state = text_of(page, "#state")
    hint = page.get_attribute("#task-message", "placeholder")
    page.click("#state a")  # the page's own link to the login form, and back
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo")
    page.click("form button")
    page.wait_for_url(f"{demo.url}/conversations/{STREAM}")
    page.wait_for_function("document.getElementById('state').className === 'live'")
    # The socket opens once the page knows its session, after it set or left the hint.
    page.wait_for_function("document.getElementById('socket-state').className === 'live'")
    logged_in_hint = page.get_attribute("#task-message", "placeholder")

    assert "log in" in state and "reload" not in state
    assert hint is not None and LOGIN_HINT in hint
    assert logged_in_hint is not None and LOGIN_HINT not in logged_in_hint
    assert text_of(page, "#state") == "live"


def test_new_output_scrolls_into_view_and_raw_events_stay_folded(demo: Server, page: Page) -> None:
    texts = [f"message {n}" for n in range(MESSAGES)]
    with EventLog(demo.db_url) as log:
        open_conversation(page, demo)
        assistant_says(log, texts)
        page.wait_for_function(
            "n => window.gatewayEvents.length === n", arg=MESSAGES, timeout=WAIT_MS
        )
        followed = last_bubble_in_view(page)
        raw_folded = page.evaluate("document.querySelector('details#raw:not([open])') !== null")
        raw_count = page.evaluate("document.querySelector('#raw summary')?.textContent ?? ''")
        # A reader who scrolled up to read earlier output is left there.
        page.evaluate("document.getElementById('transcript').scrollTop = 0")
        assistant_says(log, ["one more"])
        page.wait_for_function(
            "n => window.gatewayEvents.length === n", arg=MESSAGES + 1, timeout=WAIT_MS
        )
        kept = page.evaluate("document.getElementById('transcript').scrollTop")

    assert followed
    assert raw_folded and str(MESSAGES) in raw_count
    assert kept == 0


def test_the_page_provokes_the_guard_and_shows_its_follow_ups_and_the_flagged_end(
    demo: Server, page: Page
) -> None:
    open_conversation(page, demo)
    page.click("#provoke button[data-message='/pretend summary']")
    page.wait_for_function(
        "document.getElementById('transcript').textContent.includes('guards gave up')",
        timeout=WAIT_MS,
    )
    notes = page.locator("#transcript .note").all_inner_texts()
    assert sum(note.startswith("— follow-up:") for note in notes) == 2
    assert any("still not done" in note and "summary.html" in note for note in notes)
    assert notes[-1] == "— ended, but its guards gave up (guard_failed): not a success"


def test_the_page_provokes_the_visual_fallback_and_shows_the_retry(
    demo: Server, page: Page
) -> None:
    open_conversation(page, demo)
    page.click("#provoke button[data-message='/image']")
    page.wait_for_function(
        "document.getElementById('transcript').textContent.includes('— done')",
        timeout=WAIT_MS,
    )
    notes = page.locator("#transcript .note").all_inner_texts()
    assert "— retrying (visual_fallback) after SESSION_VISUAL_CONTEXT_UNSUPPORTED" in notes
