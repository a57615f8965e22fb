"""`PluginSettings`: how long plugins may take, and how many of one's calls may hang."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import DEFAULT_PLUGIN_HUNG_LIMIT, DEFAULT_PLUGIN_TIMEOUT, check_count, check_seconds


@dataclass(frozen=True, slots=True)
class PluginSettings:
    """:param timeout: seconds an access decision of a plugin may take before it counts as a
        refusal.
    :param hung_limit: calls one plugin may have hung (past their timeout, still running in
        their threads) before it is no longer asked: its hooks then answer their failure value
        at once (a refusal, a guard that failed, a bill delivered later), logged with its name,
        until one of those calls returns. Other plugins are asked as before.
    """

    timeout: float = DEFAULT_PLUGIN_TIMEOUT
    hung_limit: int = DEFAULT_PLUGIN_HUNG_LIMIT

    def __post_init__(self) -> None:
        check_seconds("PluginSettings.timeout", self.timeout)
        check_count("PluginSettings.hung_limit", self.hung_limit)
