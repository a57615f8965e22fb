"""`AcpUpstream`'s settings: a wrong one fails when the upstream is made, saying what to write."""

from __future__ import annotations

from typing import Any

import pytest

from gateway_kit.exceptions import SettingsError
from gateway_kit.upstream.acp import AcpUpstream
from gateway_kit.upstream.acp.target import StdioAgent, WebSocketAgent


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({}, "needs where the agent is"),
        ({"command": ["goose", "acp"], "url": "ws://127.0.0.1:3284/acp"}, "not both"),
        ({"command": "goose acp"}, "['goose', 'acp']"),
        ({"command": []}, "names no program"),
        ({"command": [""]}, "names no program"),
        ({"command": ["goose", 3]}, "list of strings"),
        ({"url": "http://127.0.0.1:3284/acp"}, "ws:// or wss://"),
        ({"url": "ws:///acp"}, "ws:// or wss://"),
        ({"url": "ws://127.0.0.1:3284/acp", "cwd": "/tmp"}, "cwd is for an agent run as a child"),
        ({"url": "ws://127.0.0.1:3284/acp", "env": {}}, "env is for an agent run as a child"),
        ({"command": ["goose", "acp"], "secret_key": "k"}, "secret_key is for an agent reached"),
        ({"command": ["goose", "acp"], "env": {"A": 1}}, "maps names to strings"),
        ({"command": ["goose", "acp"], "cancel_deadline": 0}, "cancel_deadline must be a positive"),
        ({"command": ["goose", "acp"], "restart_delay": -1}, "restart_delay must be a positive"),
        ({"command": ["goose", "acp"], "max_message_bytes": True}, "max_message_bytes must"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_with_what_to_write(
    settings: dict[str, Any], said: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        AcpUpstream(**settings)
    assert said in str(refused.value)


def test_a_command_or_a_url_names_the_agent_without_starting_it() -> None:
    stdio = AcpUpstream(command=["goose", "acp"], cwd="/srv", env={"GOOSE_MODE": "approve"})
    assert stdio.target == StdioAgent(("goose", "acp"), "/srv", {"GOOSE_MODE": "approve"})
    assert stdio.session_cwd == "/srv"
    assert stdio.pid is None  # started at first use, not before
    socket = AcpUpstream(url="ws://127.0.0.1:3284/acp", secret_key="k")
    assert socket.target == WebSocketAgent("ws://127.0.0.1:3284/acp", "k")
    assert socket.target.headers == {"X-Secret-Key": "k"}
