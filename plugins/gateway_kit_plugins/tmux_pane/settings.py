"""The tmux_pane plugin's settings, checked once when the gateway is made (ValueError otherwise)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..settings import check_known, flag, seconds
from .patterns import AGENTS

DEFAULT_HOLD = 3.0
KNOWN = {"enabled", "hold", "socket_name", "socket_path", "agents"}

BAD_SOCKET = "{name} must be a non-empty string, got {value!r}"
BOTH_SOCKETS = "give socket_name or socket_path, not both"
BAD_AGENTS = "agents must be a non-empty list of {known}, got {value!r}"


@dataclass(frozen=True, slots=True)
class PaneSettings:
    enabled: bool = True
    hold: float = DEFAULT_HOLD
    socket_name: str | None = None
    socket_path: str | None = None
    agents: tuple[str, ...] = AGENTS


def parse_settings(config: Mapping[str, Any]) -> PaneSettings:
    check_known(config, KNOWN)
    socket_name = _socket(config, "socket_name")
    socket_path = _socket(config, "socket_path")
    if socket_name is not None and socket_path is not None:
        raise ValueError(BOTH_SOCKETS)
    return PaneSettings(
        enabled=flag(config, "enabled", True),
        hold=seconds(config, "hold", DEFAULT_HOLD),
        socket_name=socket_name,
        socket_path=socket_path,
        agents=_agents(config.get("agents", AGENTS)),
    )


def _socket(config: Mapping[str, Any], name: str) -> str | None:
    value = config.get(name)
    if value is not None and (not isinstance(value, str) or not value or "\x00" in value):
        raise ValueError(BAD_SOCKET.format(name=name, value=value))
    return value


def _agents(value: object) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, list | tuple)
        or not value
        or not all(agent in AGENTS for agent in value)
    ):
        raise ValueError(BAD_AGENTS.format(known=list(AGENTS), value=value))
    return tuple(dict.fromkeys(value))
