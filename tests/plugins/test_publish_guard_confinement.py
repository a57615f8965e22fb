"""Nothing the agent says or writes makes the publish guard read or write outside its root:
``..``, absolute paths and symlinks out of it are refused and named in a warning."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_kit import EventLog, StreamOwners

from .publish import (
    OWNER,
    configured,
    goose_text,
    goose_tool_call,
    page,
    public_root,
    run_events,
)

STREAM = "conv"
SECRET = "the secret outside"


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        StreamOwners(event_log).declare(STREAM, OWNER)
        yield event_log


def outside_tree(tmp_path: Path) -> Path:
    """Files beside the root (the user's private space, another user's pages, elsewhere), and
    symlinks from inside the root to them."""
    root = public_root(tmp_path)
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.html").write_text(page(title=SECRET))
    (outside / "dir" / "x.svg").write_text(SECRET)
    (tmp_path / "ms" / OWNER / "private.html").write_text(page(title=SECRET))
    public_root(tmp_path, "bob").joinpath("x.html").write_text(page(title=SECRET))
    (root / "leak.html").symlink_to(outside / "secret.html")
    (root / "out").symlink_to(outside / "dir")
    (root / "fox.html").write_text(page("../../private.svg", "out/x.svg", "/etc/hostname.css"))
    return root


def snapshot(tmp_path: Path, root: Path) -> dict[str, tuple[bytes | str, float]]:
    """Every path under `tmp_path` but the root and its files (its symlinks included): its
    content, or a symlink's target."""
    found: dict[str, tuple[bytes | str, float]] = {}
    for path in sorted(tmp_path.rglob("*")):
        if path.is_relative_to(root) and not path.is_symlink():
            continue
        if path.name.startswith("gateway.db"):
            continue  # the log's database (and its journal): the log's business
        if path.is_symlink():
            found[str(path)] = (os.readlink(path), path.lstat().st_mtime)
        elif path.is_file():
            found[str(path)] = (path.read_bytes(), path.stat().st_mtime)
        else:
            found[str(path)] = ("dir", path.stat().st_mtime)
    return found


@contextlib.contextmanager
def opened_paths() -> Iterator[list[str]]:
    """The real path of every file and directory opened, stat'ed or made through a directory
    descriptor meanwhile (how the guard reaches every file)."""
    seen: list[str] = []
    real_open, real_stat, real_mkdir = os.open, os.stat, os.mkdir

    def where(path: Any, dir_fd: int | None) -> str:
        if dir_fd is None:
            return os.path.abspath(path)
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)

    def opening(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return fd

    def stating(path: Any, *, dir_fd: int | None = None, follow_symlinks: bool = True) -> Any:
        if isinstance(path, str | bytes | os.PathLike):
            seen.append(where(path, dir_fd))
        return real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    def making(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        seen.append(where(path, dir_fd))
        real_mkdir(path, mode, dir_fd=dir_fd)

    with (
        mock.patch.object(os, "open", opening),
        mock.patch.object(os, "stat", stating),
        mock.patch.object(os, "mkdir", making),
    ):
        yield seen


def assert_inside(seen: list[str], root: Path) -> None:
    real = os.path.realpath(root)
    strays = [path for path in seen if os.path.commonpath([real, path]) != real]
    assert not strays, f"touched outside {real}: {strays}"


def test_escapes_are_refused_logged_and_never_touched(
    log: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = outside_tree(tmp_path)
    guard = configured(log, tmp_path)
    run, events = run_events(
        log,
        STREAM,
        *goose_tool_call("write_file", {"path": "public/../../../outside/new.html", "content": ""}),
        *goose_tool_call("write_file", {"path": "public/out/planted.svg", "content": "x"}),
        *goose_tool_call("write_file", {"path": "public/leak.html", "content": "x"}),
        goose_text(
            "页面已生成: public/../private.html, public/%2e%2e/%2e%2e/x.html, "
            "public/leak.html, public/fox.html, public/gone.html and "
            "/MindSpace/alice/public/out/secret.html"
        ),
    )
    before = snapshot(tmp_path, root)
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"), opened_paths() as seen:
        veto = guard.finish_guard(run, events)
    assert snapshot(tmp_path, root) == before  # nothing outside written or changed
    assert_inside(seen, root)
    assert veto is not None
    # Only what is inside the root and missing is asked for; the rest is refused and logged.
    assert list(veto.missing) == ["public/gone.html"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for refused in (
        "../private.html",
        "../../../outside/new.html",
        "out/planted.svg",
        "leak.html",
        "../../x.html",
        "../../private.svg",
        "out/x.svg",
        "/etc/hostname.css",
        "out/secret.html",
    ):
        assert refused in logged, refused
    assert SECRET not in logged


def test_an_owner_or_stream_that_is_no_path_segment_is_not_checked(
    sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside_tree(tmp_path)
    with EventLog(sqlite_url) as log:
        StreamOwners(log).declare(STREAM, "..")
        guard = configured(log, tmp_path)
        run, events = run_events(log, STREAM, goose_text("saved to public/private.html"))
        with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins"), opened_paths() as seen:
            assert guard.finish_guard(run, events) is None
        unowned, unowned_events = run_events(log, "nobody", goose_text("published: /public/a.html"))
        assert guard.finish_guard(unowned, unowned_events) is None
    assert seen == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "'..' cannot be one segment" in logged and "'nobody' has no owner" in logged


PREFIXES = st.sampled_from(
    [
        "public/", "/MindSpace/alice/public/", "https://ms.example/MindSpace/alice/public/",
        "public/../", "public//", "./public/", "../public/", "/srv/other/public/", "/etc/", "",
    ]
)  # fmt: skip
SEGMENTS = st.sampled_from(["out", "..", "%2e%2e", ".", "", "assets", "leak.html", "\\", "x"])
NAMES = st.sampled_from(["leak", "fox", "secret", "private", "new", "x", "..", "页面"])
SUFFIXES = st.sampled_from([".html", ".svg", ".css", ".png", ""])
PATHS = st.builds(
    lambda prefix, segments, name, suffix: prefix + "/".join([*segments, name + suffix]),
    PREFIXES,
    st.lists(SEGMENTS, max_size=4),
    NAMES,
    SUFFIXES,
)
WORDS = st.sampled_from(["页面已生成: ", "saved to ", "[page](", ") ", "。", "\n", 'href="', "%"])
TEXTS = st.lists(st.one_of(PATHS, WORDS, st.text(max_size=4)), max_size=10).map("".join)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(TEXTS, min_size=1, max_size=3),
    writes=st.lists(st.tuples(PATHS, st.lists(PATHS, max_size=4)), max_size=3),
)
def test_no_text_or_tool_call_reaches_outside_the_root(
    log: EventLog, tmp_path: Path, texts: list[str], writes: list[tuple[str, list[str]]]
) -> None:
    root = tmp_path / "ms" / OWNER / "public"
    if not root.exists():
        outside_tree(tmp_path)
    guard = configured(log, tmp_path)
    calls = [
        goose_tool_call("write_file", {"path": path, "content": page(*assets)})
        for path, assets in writes
    ]
    run, events = run_events(
        log, STREAM, *(m for call in calls for m in call), *(goose_text(t) for t in texts)
    )
    before = snapshot(tmp_path, root)
    with opened_paths() as seen:
        guard.finish_guard(run, events)
    assert snapshot(tmp_path, root) == before
    assert_inside(seen, root)
