"""The publish guard in a gateway's runs, through the fake goose: what a user of a run sees,
and what goose is asked to do."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from gateway_kit import Event, GatewaySettings, LifecycleSettings, StreamOwners
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session, gateway_client, run_types, start_run, wait_status
from tests.support.upstream import until

from .publish import OWNER, claiming, options, page, public_root

STREAM = "conv"  # the stream of `bound_session`


def prompt_of(fake: FakeGoose, number: int) -> str:
    text: str = fake.reply_calls[number].user_message["content"][0]["text"]
    return text


def follow_ups(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type == "FollowUpStarted"]


def test_a_claimed_page_written_by_the_follow_up_passes(log_url: str, tmp_path: Path) -> None:
    root = public_root(tmp_path)
    link = f"https://ms.example/MindSpace/{OWNER}/public/fox.html"
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> tuple[dict[str, Any], list[Event]]:
        written = asyncio.Event()
        async with gateway_client(log_url, fake, **options(tmp_path)) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(
                fake,
                gateway,
                claiming("页面已生成: ", f"[狐狸]({link})"),
                Turn().pause(written).text("已用 write_file 写入。"),
            )
            run_id = await start_run(client, "做一个关于狐狸的页面")
            await until(lambda: len(fake.reply_calls) == 2)
            (root / "fox.html").write_text(page())  # goose's write tool, during the follow-up
            written.set()
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    assert [f["missing"] for f in follow_ups(events)] == [["public/fox.html"]]
    assert "- public/fox.html" in prompt_of(fake, 1) and "write_file" in prompt_of(fake, 1)
    assert "guard_failed" not in run_types(events) and events[-1].data.get("guard_failed") is None
    assert shown["guard_failed"] is False and shown["attempt"] == 2


def test_missing_assets_are_named_exactly(log_url: str, tmp_path: Path) -> None:
    root = public_root(tmp_path)
    (root / "assets").mkdir()
    references = [
        "assets/hero.svg",  # there
        "assets/chart.png",  # missing
        "./assets/logo.webp",  # missing
        "../public/assets/hero.svg",  # out of the root and back in: refused, not asked for
        "https://cdn.example/lib.js",
        "//cdn.example/font.css",
        "data:image/png;base64,iVBORw0KGgo=",
        "#top",
        "other.html",  # a page, not an asset
    ]
    (root / "fox.html").write_text(page(*references) + '<link rel="stylesheet" href="site.css">')
    (root / "assets" / "hero.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> tuple[dict[str, Any], list[Event]]:
        written = asyncio.Event()
        async with gateway_client(log_url, fake, **options(tmp_path)) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(
                fake,
                gateway,
                claiming("The page is ready: public/fox.html (with its pictures)."),
                Turn().pause(written).text("Written, pictures too."),
            )
            run_id = await start_run(client, "a page about foxes, with pictures")
            await until(lambda: len(fake.reply_calls) == 2)
            for name in ("assets/chart.png", "assets/logo.webp", "site.css"):
                (root / name).write_bytes(b"\x89PNG not really, but there")
            written.set()
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    missing = ["public/assets/chart.png", "public/assets/logo.webp", "public/site.css"]
    assert [f["missing"] for f in follow_ups(events)] == [missing]
    assert all(f"- {path}" in prompt_of(fake, 1) for path in missing)
    assert shown["guard_failed"] is False and "guard_failed" not in run_types(events)


def test_a_page_never_written_ends_flagged_after_the_follow_ups(
    log_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = public_root(tmp_path)
    fake = FakeGoose(ping_interval=0.05)
    says = "生成完成, 已保存至 public/fox.html"

    async def main() -> tuple[dict[str, Any], list[Event]]:
        async with gateway_client(
            log_url,
            fake,
            settings=GatewaySettings(lifecycle=LifecycleSettings(max_follow_ups=2)),
            **options(tmp_path),
        ) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, claiming(says), claiming(says), claiming(says))
            run_id = await start_run(client, "做一个页面")
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    with caplog.at_level(logging.WARNING, logger="gateway_kit.runs"):
        shown, events = asyncio.run(main())
    types = run_types(events)
    assert types.count("FollowUpStarted") == 2 and len(fake.reply_calls) == 3
    assert types[-2:] == ["guard_failed", "Finish"]
    assert events[-2].data["missing"] == ["public/fox.html"]
    assert events[-1].data["guard_failed"] is True and shown["guard_failed"] is True
    assert any("still vetoed" in r.getMessage() for r in caplog.records)
    assert not (root / "fox.html").exists()


def test_a_plain_answer_is_left_alone(log_url: str, tmp_path: Path) -> None:
    public_root(tmp_path)
    fake = FakeGoose(ping_interval=0.05)
    answer = Turn().text("Foxes are small omnivores. You could make public/foxes.html one day.")
    elsewhere = {"path": "/tmp/notes/foxes.md", "content": "notes"}

    async def main() -> tuple[dict[str, Any], list[Event]]:
        async with gateway_client(log_url, fake, **options(tmp_path)) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, answer.tool_call("write_file", elsewhere))
            run_id = await start_run(client, "tell me about foxes")
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    assert len(fake.reply_calls) == 1 and "FollowUpStarted" not in run_types(events)
    assert shown["guard_failed"] is False and shown["attempt"] == 1
    assert not any((tmp_path / "ms").rglob("*.md"))


def test_pages_the_run_wrote_with_its_tools_are_materialized(log_url: str, tmp_path: Path) -> None:
    root = public_root(tmp_path)
    html = page("assets/fox.svg")
    svg = "<svg xmlns='http://www.w3.org/2000/svg'><circle r='4'/></svg>"
    svg_at = f"/home/goose/MindSpace/{OWNER}/public/assets/fox.svg"  # goose's own view
    turn = (
        Turn()
        .tool_call("write_file", {"path": "public/fox.html", "content": html})
        .tool_call("developer__text_editor", {"command": "write", "path": svg_at, "file_text": svg})
        .tool_call("write_file", {"path": "public/declined.html", "content": html}, is_error=True)
        .text("页面已生成: public/fox.html")
    )
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> dict[str, Any]:
        async with gateway_client(log_url, fake, **options(tmp_path)) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, turn)
            run_id = await start_run(client, "做一个关于狐狸的页面")
            return await wait_status(client, run_id, "finished")

    shown = asyncio.run(main())
    assert (root / "fox.html").read_text() == html
    assert (root / "assets" / "fox.svg").read_text() == svg
    assert not (root / "declined.html").exists()  # the user declined that write
    assert len(fake.reply_calls) == 1 and shown["guard_failed"] is False
