"""A gateway_kit plugin: nobody reads the streams whose name starts with a prefix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway_kit import hookimpl

SETTINGS = ("deny_prefix",)
UNKNOWN_SETTINGS = "unknown settings {names}; the only setting is 'deny_prefix'"
BAD_PREFIX = "deny_prefix must be a non-empty string, got {value!r}"


def checked_prefix(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(BAD_PREFIX.format(value=value))
    return value


class PrefixGuard:
    """Refuses every read of the streams whose name starts with `deny_prefix`;
    without a prefix it refuses nothing.

    The entry point names this class, so every Gateway makes a guard of its own,
    with the settings of its own ``plugin_config``.
    """

    def __init__(self, deny_prefix: str | None = None) -> None:
        self.deny_prefix = None if deny_prefix is None else checked_prefix(deny_prefix)

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any]) -> None:
        unknown = sorted(set(config) - set(SETTINGS))
        if unknown:
            raise ValueError(
                UNKNOWN_SETTINGS.format(names=", ".join(map(repr, unknown)))
            )
        if "deny_prefix" in config:
            self.deny_prefix = checked_prefix(config["deny_prefix"])

    @hookimpl
    def authorize_subscription(self, stream: str) -> bool | None:
        if self.deny_prefix is not None and stream.startswith(self.deny_prefix):
            return False
        return None  # not ours to decide: the next plugin is asked
