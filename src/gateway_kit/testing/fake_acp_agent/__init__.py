"""A scripted fake ACP agent to test a gateway against, built on the SDK's agent side.

Over stdio, as a child process: ``AcpUpstream(command=[sys.executable, "-m",
"gateway_kit.testing.fake_acp_agent", "--state-dir", str(tmp_path)])``. Over WebSocket: serve
``FakeAcpServer(secret_key=...)`` with uvicorn and use ``url="ws://127.0.0.1:PORT/acp"``.

What it does for a prompt is written in the prompt (`AcpScript`)::

    script = AcpScript().thought("Let me look").text("Hel", "lo").tool(
        "developer__shell", {"command": "ls"}, permission=True, result="a.txt"
    ).usage(12, 3)
    await upstream.prompt(session_id, script.prompt())

Any other prompt is echoed back in a few chunks.
"""

from __future__ import annotations

from .agent import FakeAcpAgent
from .script import SCRIPT_MARKER, AcpScript, echo_steps, parse_prompt
from .sessions import MODES, FakeSession, SessionStore
from .websocket import DEFAULT_SECRET_KEY, FakeAcpServer

MODULE = "gateway_kit.testing.fake_acp_agent"

__all__ = [
    "DEFAULT_SECRET_KEY",
    "MODES",
    "MODULE",
    "SCRIPT_MARKER",
    "AcpScript",
    "FakeAcpAgent",
    "FakeAcpServer",
    "FakeSession",
    "SessionStore",
    "echo_steps",
    "parse_prompt",
]
