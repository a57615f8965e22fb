"""Which option answers a permission request: chosen by kind, never allowing by mistake."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit.upstream.acp import PermissionRequest, choose_option, deny

GOOSE = [
    {"optionId": k, "name": k, "kind": k}
    for k in ("allow_always", "allow_once", "reject_once", "reject_always")
]
CLAUDE = [
    {"optionId": "allow_always", "name": "Always Allow", "kind": "allow_always"},
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]
ONLY_ALLOW = [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]


@pytest.mark.parametrize(
    ("options", "kind", "chosen"),
    [
        (GOOSE, "allow_once", "allow_once"),
        (GOOSE, "reject_always", "reject_always"),
        (CLAUDE, "allow_once", "allow"),
        (CLAUDE, "reject_once", "reject"),
        (CLAUDE, "reject_always", "reject"),  # no "always": its "once"
        (CLAUDE, None, None),  # cancelled
        (ONLY_ALLOW, "reject_once", None),  # a rejection never selects an allowing option
        (ONLY_ALLOW, "something else", None),
    ],
)
def test_the_option_is_chosen_by_its_kind(
    options: list[dict[str, str]], kind: str | None, chosen: str | None
) -> None:
    assert choose_option(options, kind) == chosen


def test_the_default_decision_rejects() -> None:
    request = PermissionRequest("s", {"toolCallId": "c"}, GOOSE)
    assert choose_option(GOOSE, asyncio.run(deny(request))) == "reject_once"


def test_the_request_names_the_tool_from_what_the_agent_announced() -> None:
    # goose's permission request names neither the tool nor, often, the arguments.
    announced = {
        "toolCallId": "c",
        "title": "developer: shell · ls",
        "rawInput": {"command": "ls"},
        "_meta": {"goose": {"toolCall": {"toolName": "developer__shell"}}},
    }
    request = PermissionRequest(
        "s", {"toolCallId": "c", "title": "shell", "kind": "other"}, GOOSE, announced
    )
    assert (request.tool_call_id, request.tool_name, request.arguments) == (
        "c",
        "developer__shell",
        {"command": "ls"},
    )
    unannounced = PermissionRequest(
        "s", {"toolCallId": "d", "title": "`ls`", "rawInput": "ls"}, GOOSE
    )
    assert (unannounced.tool_name, unannounced.arguments) == ("`ls`", {"input": "ls"})
