"""The publish guard's settings: off until `public_root` is set, and settings that cannot work
stop the gateway's start-up naming the plugin; which texts it takes for claims; and the code
docs/plugins.md shows of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gateway_kit_plugins import publish_guard
from gateway_kit_plugins.publish_guard.claims import claimed_pages
from gateway_kit_plugins.publish_guard.settings import CLAIM_PHRASES

from gateway_kit import EventLog, Gateway, PluginError, StreamOwners

from .publish import (
    NAME,
    OWNER,
    configured,
    goose_text,
    goose_tool_call,
    page,
    run_events,
    template,
)


def gateway(log: EventLog, settings: dict[str, Any]) -> Gateway:
    return Gateway(
        log=log,
        plugin_config={NAME: settings},
        allow_anonymous=True,
        load_entry_points=False,
    )


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"public_root": "srv/{user_id}/public"}, "absolute path"),
        ({"public_root": "/srv/{owner}/public"}, "absolute path"),
        ({"public_root": "/srv/{user_id!r}/public"}, "absolute path"),
        ({"public_root": "/srv/../{user_id}"}, "absolute path"),
        ({"public_root": 7}, "absolute path"),
        ({"public_root": "/srv/{user_id}", "claim_phrases": "published"}, "claim_phrases"),
        ({"public_root": "/srv/{user_id}", "claim_phrases": ["ok", ""]}, "claim_phrases"),
        ({"public_root": "/srv/{user_id}", "write_tools": []}, "write_tools"),
        ({"public_root": "/srv/{user_id}", "write_tools": [{"path": "p"}]}, "write_tools"),
        ({"public_root": "/srv/{user_id}", "write_tools": [{"name": "w", "x": 1}]}, "write_tools"),
        ({"public_root": "/srv/{user_id}", "min_bytes": -1}, "min_bytes"),
        ({"public_root": "/srv/{user_id}", "min_bytes": True}, "min_bytes"),
        ({"public_root": "/srv/{user_id}", "root": "/srv"}, "unknown publish_guard settings"),
        ({"public_root": "/srv/{user_id}", "max_depth": 0}, "max_depth must be an integer"),
        ({"public_root": "/srv/{user_id}", "max_depth": "32"}, "max_depth must be an integer"),
        (
            {"public_root": "/srv/{user_id}", "max_path_length": True},
            "max_path_length must be an integer",
        ),
        ({"public_root": "/srv/{user_id}", "max_files": -1}, "max_files must be an integer"),
        ({"public_root": "/srv/{user_id}", "max_bytes": 1.5}, "max_bytes must be an integer"),
        ({"public_root": "/srv/{user_id}", "extensions": "html"}, "extensions must be a list"),
        ({"public_root": "/srv/{user_id}", "extensions": ["html", ""]}, "extensions must be"),
        ({"public_root": "/srv/{user_id}", "extensions": ["../php"]}, "extensions must be"),
        ({"public_root": "/srv/{user_id}", "extensions": [7]}, "extensions must be"),
    ],
)
def test_settings_that_cannot_work_stop_the_start_up(
    sqlite_url: str, settings: dict[str, Any], said: str
) -> None:
    with EventLog(sqlite_url) as log, pytest.raises(PluginError, match=f"'{NAME}'.*{said}"):
        gateway(log, settings)


def test_without_a_public_root_the_guard_is_off(sqlite_url: str, tmp_path: Path) -> None:
    with EventLog(sqlite_url) as log:
        gateway(log, {})  # starts
        guard = configured(log, tmp_path, public_root=None)
        run, events = run_events(log, "conv", goose_text("页面已生成: /MindSpace/a/public/x.html"))
        assert guard.finish_guard(run, events) is None


def test_custom_phrases_tools_and_stub_size(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "ms" / OWNER / "public"
    root.mkdir(parents=True)
    (root / "tiny.html").write_text("<p>soon</p>")
    with EventLog(sqlite_url) as log:
        StreamOwners(log).declare("conv", OWNER)
        guard = configured(
            log,
            tmp_path,
            claim_phrases=["c'est en ligne"],
            write_tools=[{"name": "save", "path": "to", "content": "body"}],
            min_bytes=1000,
        )
        run, events = run_events(log, "conv", goose_text("C'est en ligne : public/tiny.html"))
        veto = guard.finish_guard(run, events)
        assert veto is not None and list(veto.missing) == ["public/tiny.html"]
        assert "save" in veto.reason
        english, events = run_events(log, "conv", goose_text("Saved to public/tiny.html"))
        assert guard.finish_guard(english, events) is None  # not a phrase of this deployment
    assert template(tmp_path).endswith("/ms/{user_id}/public")


@pytest.mark.parametrize(
    ("text", "pages"),
    [
        ("页面已生成\uff0c已保存至public/kids-posture.html\u3002", ["kids-posture.html"]),
        ("[报告](/MindSpace/u1/public/r/report.html)", ["r/report.html"]),
        ("see https://ms.example/MindSpace/u1/public/a%20b.html?v=2#top", ["a b.html"]),
        ('<a href="public/x.html">x</a>', ["x.html"]),
        ("You could create public/idea.html later.", []),
        (
            "The page is ready: public/a.html, public/a.html and public/b.html.",
            ["a.html", "b.html"],
        ),
        ("published: public/notes.htmlx and mypublic/x.html", []),
        ("published public/./sub//y.html", ["sub/y.html"]),
        ("Foxes are mammals.", []),
    ],
)
def test_what_counts_as_a_claim(text: str, pages: list[str]) -> None:
    found, refused = claimed_pages([text], CLAIM_PHRASES)
    assert (found, refused) == (pages, [])


def test_a_page_changed_since_its_last_check_is_read_again(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "ms" / OWNER / "public"
    root.mkdir(parents=True)
    (root / "fox.html").write_text(page("fox.svg"))
    with EventLog(sqlite_url) as log:
        StreamOwners(log).declare("conv", OWNER)
        guard = configured(log, tmp_path)
        run, events = run_events(log, "conv", goose_text("published: public/fox.html"))
        first = guard.finish_guard(run, events)
        assert first is not None and list(first.missing) == ["public/fox.svg"]
        again = guard.finish_guard(run, events)  # unchanged: the same answer, from memory
        assert again is not None and list(again.missing) == ["public/fox.svg"]
        (root / "fox.html").write_text(page("fox.png", title="Foxes!"))
        changed = guard.finish_guard(run, events)
        assert changed is not None and list(changed.missing) == ["public/fox.png"]


def test_only_write_calls_are_materialized(sqlite_url: str, tmp_path: Path) -> None:
    root = tmp_path / "ms" / OWNER / "public"
    root.mkdir(parents=True)
    with EventLog(sqlite_url) as log:
        StreamOwners(log).declare("conv", OWNER)
        guard = configured(log, tmp_path)
        editor = "developer__text_editor"
        write = {"command": "write", "path": "/x/public/b.html", "file_text": "b"}
        view = {"command": "view", "path": "/x/public/c.html", "file_text": "c"}
        run, events = run_events(
            log,
            "conv",
            *goose_tool_call("files__write_file", {"path": "public/a.html", "content": page()}),
            *goose_tool_call(editor, write),
            *goose_tool_call(editor, view),
            *goose_tool_call("read_file", {"path": "public/d.html", "content": "d"}),
            goose_text("Done."),
        )
        assert guard.finish_guard(run, events) is None  # nothing claimed: no veto either
    assert sorted(p.name for p in root.iterdir()) == ["a.html", "b.html"]
    assert (root / "b.html").read_text() == "b"


def test_the_plugins_doc_shows_the_guards_real_code_down_to_finish_guard() -> None:
    source = Path(publish_guard.__file__).read_text(encoding="utf-8")
    code = source[source.index("from __future__") : source.index("    def root(")].rstrip()
    doc = Path(__file__).parents[2] / "docs" / "plugin_hooks.md"
    assert f"```python\n{code}\n```" in doc.read_text(encoding="utf-8")
