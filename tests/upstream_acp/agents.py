"""The fake ACP agent as the tests of this folder run it, and what they read of a turn."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway_kit.testing.fake_acp_agent import MODULE
from gateway_kit.upstream.acp import AcpTurn, AcpUpstream, TranslatedEvent, TurnEnd

# Bounds that end a test that would hang; never waited for when it passes.
TURN_TIMEOUT = 30.0
QUICK_RESTARTS = {"restart_delay": 0.05, "max_restart_delay": 0.4}


def agent_command(tmp_path: Path, *flags: str) -> list[str]:
    """The fake agent as a child process, its sessions kept under `tmp_path`."""
    return [sys.executable, "-m", MODULE, "--state-dir", str(tmp_path / "sessions"), *flags]


@asynccontextmanager
async def fake_agent(tmp_path: Path, *flags: str, **settings: Any) -> AsyncIterator[AcpUpstream]:
    upstream = AcpUpstream(command=agent_command(tmp_path, *flags), **settings)
    try:
        yield upstream
    finally:
        await upstream.aclose()


async def run_turn(
    upstream: AcpUpstream, session_id: str, prompt: str, **kwargs: Any
) -> tuple[list[TranslatedEvent], TurnEnd]:
    """The events a turn emits (its end last) and how it ended."""
    events: list[TranslatedEvent] = []
    turn = AcpTurn(upstream, session_id, emit=events.append, **kwargs)
    end = await asyncio.wait_for(turn.run(prompt), TURN_TIMEOUT)
    return events, end


def texts(events: list[TranslatedEvent], role: str = "assistant") -> list[str]:
    """The text of each message chunk of `role`, in order."""
    return [
        item["text"]
        for event in events
        if event.type == "Message" and event.data["message"]["role"] == role
        for item in event.data["message"]["content"]
        if item["type"] == "text"
    ]


def contents(events: list[TranslatedEvent]) -> list[dict[str, Any]]:
    return [item for e in events if e.type == "Message" for item in e.data["message"]["content"]]
