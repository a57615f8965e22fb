"""What the publish guard writes, at most: paths no deeper than `max_depth` and no longer than
`max_path_length`, only the kinds of file a published page needs, and per run no more than
`max_files` files and `max_bytes` bytes, however many follow-ups it has. A refused write is
logged and leaves nothing behind: no partial file, no empty folder chain; a claimed page that
cannot be published is missing, so the run is never passed on it."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from gateway_kit import Event, EventLog, GatewaySettings, LifecycleSettings, StreamOwners
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session, gateway_client, run_types, start_run, wait_status

from .publish import (
    OWNER,
    configured,
    goose_text,
    goose_tool_call,
    options,
    page,
    public_root,
    run_events,
)

STREAM = "conv"


@pytest.fixture
def owned(log: EventLog) -> EventLog:
    StreamOwners(log).declare(STREAM, OWNER)
    return log


def writes(*paths: str, content: str = page()) -> list[dict[str, Any]]:
    """goose's `write_file` calls of `paths`, each answered as written."""
    return [
        message
        for path in paths
        for message in goose_tool_call("write_file", {"path": path, "content": content})
    ]


def everything_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() for r in caplog.records)


# --- how deep and how long --------------------------------------------------------------------


@pytest.mark.parametrize("depth", [33, 900, 1200])
def test_a_page_deeper_than_max_depth_is_refused_without_making_a_folder_and_stays_missing(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture, depth: int
) -> None:
    root = public_root(tmp_path)
    deep = "d/" * (depth - 1) + "fox.html"
    guard = configured(owned, tmp_path)
    run, events = run_events(
        owned, STREAM, *writes(f"public/{deep}"), goose_text(f"已发布 public/{deep}")
    )
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        veto = guard.finish_guard(run, events)
    assert everything_under(root) == []
    assert veto is not None and list(veto.missing) == [f"public/{deep}"]
    assert f"{depth} segments deep, over max_depth (32)" in logged(caplog)


def test_a_path_longer_than_max_path_length_or_with_a_name_too_long_is_refused(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = public_root(tmp_path)
    long_path = "/".join(["folder" + "x" * 54] * 20) + "/fox.html"  # 1228 bytes, 21 deep
    long_name = "f" * 300 + ".html"
    guard = configured(owned, tmp_path)
    run, events = run_events(owned, STREAM, *writes(f"public/{long_path}", f"public/{long_name}"))
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        assert guard.finish_guard(run, events) is None  # nothing claimed
    assert everything_under(root) == []
    said = logged(caplog)
    assert "1228 bytes long, over max_path_length (1024)" in said
    assert "a name of 305 bytes, over the 255" in said


def test_deeper_and_longer_paths_are_written_when_configured(
    owned: EventLog, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    deep = "d/" * 39 + "fox.html"
    guard = configured(owned, tmp_path, max_depth=40, max_path_length=4000)
    run, events = run_events(
        owned, STREAM, *writes(f"public/{deep}"), goose_text(f"已发布 public/{deep}")
    )
    assert guard.finish_guard(run, events) is None
    assert (root / deep).read_text() == page()


def test_a_run_claiming_a_page_too_deep_to_publish_is_never_reported_delivered(
    log_url: str, tmp_path: Path
) -> None:
    root = public_root(tmp_path)
    deep = "d/" * 1199 + "fox.html"
    turn = (
        Turn()
        .tool_call("write_file", {"path": f"public/{deep}", "content": page()})
        .text(f"页面已生成: public/{deep}")
    )
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> tuple[dict[str, Any], list[Event]]:
        async with gateway_client(
            log_url,
            fake,
            settings=GatewaySettings(lifecycle=LifecycleSettings(max_follow_ups=0)),
            **options(tmp_path),
        ) as (client, gateway, log):
            StreamOwners(log).declare(STREAM, OWNER)
            bound_session(fake, gateway, turn)
            run_id = await start_run(client, "a page, deep down")
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    assert run_types(events)[-2:] == ["guard_failed", "Finish"]
    assert events[-2].data["missing"] == [f"public/{deep}"]
    assert events[-1].data["guard_failed"] is True and shown["guard_failed"] is True
    assert everything_under(root) == []


# --- which files ----------------------------------------------------------------------------

PAGE_FILES = [
    "index.html", "about.htm", "site.css", "app.js", "mod.mjs", "data.json", "notes.txt",
    "img/logo.svg", "img/photo.PNG", "img/a.jpg", "img/b.webp", "favicon.ico", "fonts/f.woff2",
]  # fmt: skip
NOT_PAGE_FILES = [
    ".htaccess", "index.php", "run.cgi", "deploy.sh", ".user.ini", "a/.git/config",
    "x.php.bak", "Makefile", ".well-known/x.json",
]  # fmt: skip


def test_only_the_files_a_published_page_needs_are_written(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = public_root(tmp_path)
    guard = configured(owned, tmp_path)
    paths = [f"public/{name}" for name in NOT_PAGE_FILES + PAGE_FILES]
    run, events = run_events(owned, STREAM, *writes(*paths, content="x"))
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        assert guard.finish_guard(run, events) is None
    written = [p for p in everything_under(root) if (root / p).is_file()]
    assert written == sorted(PAGE_FILES)
    assert not (root / "a").exists() and not (root / ".well-known").exists()
    said = logged(caplog)
    assert all(repr(name) in said for name in NOT_PAGE_FILES), said


def test_the_extensions_written_can_be_configured(owned: EventLog, tmp_path: Path) -> None:
    root = public_root(tmp_path)
    guard = configured(owned, tmp_path, extensions=["html", ".PHP"])
    run, events = run_events(
        owned, STREAM, *writes("public/index.php", "public/a.html", "public/s.css")
    )
    assert guard.finish_guard(run, events) is None
    assert everything_under(root) == ["a.html", "index.php"]


# --- how much per run ------------------------------------------------------------------------


def test_a_run_writes_at_most_max_files_files_even_over_its_follow_ups(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = public_root(tmp_path)
    guard = configured(owned, tmp_path)
    run, events = run_events(owned, STREAM, *writes(*(f"public/p{n:02}.html" for n in range(15))))
    assert guard.finish_guard(run, events) is None
    for data in writes(*(f"public/p{n:02}.html" for n in range(15, 40))):  # the next turn's
        owned.append(STREAM, "Message", data, run_id=run.run_id)
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        assert guard.finish_guard(run, owned.read(run_id=run.run_id, settled=False)) is None
    assert everything_under(root) == [f"p{n:02}.html" for n in range(20)]
    said = logged(caplog)
    assert "'p20.html'" in said and "'p39.html'" in said and "over max_files" in said


def test_a_run_writes_at_most_max_bytes(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = public_root(tmp_path)
    guard = configured(owned, tmp_path, max_bytes=10_000)
    content = "x" * 3000
    run, events = run_events(
        owned, STREAM, *writes(*(f"public/p{n}.js" for n in range(5)), content=content)
    )
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        assert guard.finish_guard(run, events) is None
    assert everything_under(root) == ["p0.js", "p1.js", "p2.js"]
    assert "over max_bytes" in logged(caplog)


# --- nothing half written ---------------------------------------------------------------------


@pytest.fixture
def full_disk() -> Iterator[None]:
    """A disk that takes the first bytes of a file written, then is full."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, opened: Any) -> None:
            self.opened = opened

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.opened.close()

        def write(self, data: bytes) -> int:
            self.opened.write(data[:10])
            self.opened.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = real_fdopen(fd, mode, *args, **kwargs)
        return Full(opened) if "w" in mode else opened

    with mock.patch.object(os, "fdopen", fdopen):
        yield


def test_a_write_the_disk_refuses_leaves_no_partial_file_and_no_empty_folders(
    owned: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture, full_disk: None
) -> None:
    root = public_root(tmp_path)
    (root / "kept").mkdir()
    guard = configured(owned, tmp_path)
    run, events = run_events(
        owned, STREAM, *writes("public/kept/new/deeper/fox.html", "public/b.css")
    )
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"):
        assert guard.finish_guard(run, events) is None
    assert everything_under(root) == ["kept"]  # what was there before stays
    assert "No space left on device" in logged(caplog)


def test_a_root_made_for_a_write_the_disk_refuses_is_removed_again(
    owned: EventLog, tmp_path: Path, full_disk: None
) -> None:
    (tmp_path / "ms").mkdir()
    guard = configured(owned, tmp_path)
    run, events = run_events(owned, STREAM, *writes("public/fox.html"))
    assert guard.finish_guard(run, events) is None
    assert everything_under(tmp_path / "ms") == []


def test_a_run_whose_every_write_is_refused_makes_no_root(owned: EventLog, tmp_path: Path) -> None:
    guard = configured(owned, tmp_path)
    deep = "d/" * 40 + "x.html"
    run, events = run_events(owned, STREAM, *writes("public/index.php", f"public/{deep}"))
    assert guard.finish_guard(run, events) is None
    assert not (tmp_path / "ms").exists()
