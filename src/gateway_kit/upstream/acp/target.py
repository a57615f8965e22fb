"""Where the agent is: a command run as a child process over stdio, or a WebSocket URL.

Checked when the upstream is made, so that a wrong setting fails at start-up with a
`SettingsError` saying what to write, not at the first run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ...exceptions import SettingsError

SECRET_KEY_HEADER = "X-Secret-Key"
WEBSOCKET_SCHEMES = ("ws", "wss")

NEITHER = (
    "AcpUpstream needs where the agent is: command=[...] to run it as a child process over "
    'stdio (e.g. command=["goose", "acp"]), or url="ws://127.0.0.1:3284/acp" for an agent '
    "served over WebSocket (goose serve)"
)
BOTH = "AcpUpstream takes command=[...] or url=..., not both: {command!r} and {url!r}"
COMMAND_NOT_LIST = (
    "AcpUpstream's command is the program and its arguments as a list of strings, "
    "e.g. {example!r}, not {value!r}"
)
EMPTY_COMMAND = "AcpUpstream's command names no program: {value!r}"
BAD_URL = (
    "AcpUpstream's url must be a ws:// or wss:// URL of the agent's WebSocket endpoint "
    "(goose serve: ws://127.0.0.1:3284/acp), not {url!r}"
)
STDIO_ONLY = "AcpUpstream's {name} is for an agent run as a child process (command=...), not a url"
URL_ONLY = "AcpUpstream's secret_key is for an agent reached by url=..., not a command"
BAD_ENV = "AcpUpstream's env maps names to strings: {name!r}={value!r} is not"


@dataclass(frozen=True, slots=True)
class StdioAgent:
    """An agent run as `command` in `cwd`, with `env` on top of a minimal environment."""

    command: tuple[str, ...]
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return " ".join(self.command)


@dataclass(frozen=True, slots=True)
class WebSocketAgent:
    """An agent served over WebSocket at `url`, reached with `secret_key` if given."""

    url: str
    secret_key: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.secret_key is None else {SECRET_KEY_HEADER: self.secret_key}

    def describe(self) -> str:
        return self.url


AgentTarget = StdioAgent | WebSocketAgent


def agent_target(
    *,
    command: Sequence[str] | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
    url: str | None,
    secret_key: str | None,
) -> AgentTarget:
    """The agent these settings name, or the `SettingsError` that says what is wrong."""
    if command is None and url is None:
        raise SettingsError(NEITHER)
    if command is not None and url is not None:
        raise SettingsError(BOTH.format(command=command, url=url))
    if url is not None:
        if cwd is not None or env is not None:
            raise SettingsError(STDIO_ONLY.format(name="cwd" if cwd is not None else "env"))
        if not isinstance(url, str) or urlsplit(url).scheme not in WEBSOCKET_SCHEMES:
            raise SettingsError(BAD_URL.format(url=url))
        if not urlsplit(url).hostname:
            raise SettingsError(BAD_URL.format(url=url))
        return WebSocketAgent(url, secret_key)
    if secret_key is not None:
        raise SettingsError(URL_ONLY)
    if isinstance(command, str | bytes) or not all(isinstance(part, str) for part in command or ()):
        example = command.split() if isinstance(command, str) else ["goose", "acp"]
        raise SettingsError(COMMAND_NOT_LIST.format(example=example, value=command))
    if not command or not command[0]:
        raise SettingsError(EMPTY_COMMAND.format(value=command))
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise SettingsError(BAD_ENV.format(name=name, value=value))
    return StdioAgent(tuple(command), cwd, dict(env or {}))
