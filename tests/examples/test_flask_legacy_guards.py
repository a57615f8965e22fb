"""The example's legacy tasks held to the built-in ``publish_guard``, over real HTTP: a task
whose agent claims a page it has not written gets a follow-up turn told exactly which file is
missing in the user's public folder, and one whose page never comes ends flagged
``guard_failed``; the legacy poll shows both."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from gateway_kit_plugins.publish_guard import MISSING

from gateway_kit.demo.agent import reply_chunks
from tests.support.serving import serve_in_thread

from .legacy_clients import EXAMPLE, Answer, log_in, poll_until_done, start_task, transcript

USER = "demo"  # who `log_in` logs in: the conversation's owner, whose folder the guard checks
NOT_THERE = MISSING.format(tool="write_file")  # the built-in guard's reason


@pytest.fixture
def example(log_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The example's `gateway.py`, over the test's database, publishing under `tmp_path`."""
    monkeypatch.setenv("GATEWAY_KIT_DB", log_url)
    monkeypatch.setenv("GATEWAY_KIT_DEMO_PUBLIC_ROOT", str(tmp_path / "public"))
    spec = importlib.util.spec_from_file_location("flask_legacy_gateway", EXAMPLE / "gateway.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.flask_app.config["TURN_CHUNK_DELAY"] = 0
    try:
        yield module
    finally:
        module.log.close()


def run_task(module: ModuleType, message: str) -> list[Answer]:
    """Log in over HTTP, start a task with `message`, and poll it to its end."""

    async def main() -> list[Answer]:
        with serve_in_thread(module.app) as url:
            async with httpx.AsyncClient(base_url=url) as client:
                await log_in(client)
                task_id = await start_task(client, message)
                return await poll_until_done(client, task_id)

    return asyncio.run(main())


def events(answers: list[Answer]) -> list[tuple[str, dict[str, Any]]]:
    return [(type, data) for _, type, data in transcript(answers)]


def test_a_page_claimed_and_not_written_is_asked_for_then_written(
    example: ModuleType, tmp_path: Path
) -> None:
    page = tmp_path / "public" / USER / "report.html"
    answers = run_task(example, "/publish report")
    assert answers[-1]["status"] == "completed"
    got = events(answers)
    types = [type for type, _ in got]
    assert types.count("FollowUpStarted") == 1 and "guard_failed" not in types
    [started] = [data for type, data in got if type == "FollowUpStarted"]
    assert started["reasons"] == [NOT_THERE] and started["missing"] == ["public/report.html"]
    assert "- public/report.html\n" in started["prompt"]
    assert got[-1] == ("Finish", {"reason": "stop"})  # a plain success: the page is there
    assert page.is_file()


def test_a_page_that_never_comes_ends_the_task_flagged_after_two_follow_ups(
    example: ModuleType, tmp_path: Path
) -> None:
    answers = run_task(example, "/pretend report")
    assert answers[-1]["status"] == "completed"
    got = events(answers)
    assert [type for type, _ in got].count("FollowUpStarted") == 2
    assert got[-2] == (
        "guard_failed",
        {
            "type": "guard_failed",
            "reasons": [NOT_THERE],
            "missing": ["public/report.html"],
            "follow_ups": 2,
        },
    )
    assert got[-1] == ("Finish", {"reason": "stop", "guard_failed": True})
    assert not (tmp_path / "public").exists()


def test_a_task_that_claims_nothing_is_untouched_by_the_guard(
    example: ModuleType, tmp_path: Path
) -> None:
    answers = run_task(example, "hello there")
    got = events(answers)
    chunks = [data["text"] for type, data in got if type == "Message"][1:]
    assert chunks == reply_chunks("hello there")
    assert [type for type, _ in got if type in ("FollowUpStarted", "guard_failed")] == []
    assert got[-1] == ("Finish", {"reason": "stop"})
    assert not (tmp_path / "public").exists()
