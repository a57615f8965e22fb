"""Recovery from a polluted tool history: a clean session from the conversation's visible text.

A history in which a tool call has no result (a turn cut off mid-call, a result lost) is refused
by the provider on every later turn of the session:

- OpenAI: "An assistant message with 'tool_calls' must be followed by tool messages responding
  to each 'tool_call_id'…"
- Anthropic: "`tool_use` ids were found without `tool_result` blocks immediately after…"

`classify_error` names ``SESSION_TOOL_HISTORY_INVALID`` for those (quoted, backticked or
JSON-escaped, inside a longer message) and for the configured patterns; `plan_recovery`
answers a clean goose session with every extension and tool of the failed one, starting from
the conversation's visible text (`visible_text`), told to carry on with the task. A run takes
this recovery once; a visual fallback (`visual_fallback`) keeps its own budget.

Settings (``plugin_config={"tool_history_recovery": {...}}``): ``enabled`` (default true) and
``error_patterns``: more regular expressions (case-insensitive) that name this class.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway_kit import RecoveryPlan, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.log import EventLog

from .settings import check_known, flag
from .visible_text import text_only_session

TOOL_HISTORY_CLASS = "SESSION_TOOL_HISTORY_INVALID"
KIND = "tool_history_recovery"
_QUOTE = r"(?:\\*[`'\"]|\\*u0060|&quot;|&#96;|&#39;)*"
DEFAULT_PATTERNS = (
    rf"assistant\s+message\s+with\s+{_QUOTE}tool_calls{_QUOTE}\s+must\s+be\s+followed\s+by"
    r"\s+tool\s+messages",
    rf"{_QUOTE}tool_use{_QUOTE}\s+ids\s+were\s+found\s+without\s+{_QUOTE}tool_result",
)
INSTRUCTIONS = (
    "This conversation's earlier tool history could not be sent to the model again, so it goes "
    "on in a new session from its visible text. Your tools are all still available. Carry on "
    "with the task.\n\nThe task: {message}"
)


class ToolHistoryRecovery:
    def __init__(self) -> None:
        self.enabled = True
        self.patterns = [re.compile(p, re.IGNORECASE) for p in DEFAULT_PATTERNS]
        self.log: EventLog | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        check_known(config, {"enabled", "error_patterns"})
        self.enabled = flag(config, "enabled", True)
        extra = config.get("error_patterns", [])
        if isinstance(extra, str) or not isinstance(extra, list | tuple):
            raise ValueError(f"error_patterns must be a list of regular expressions, got {extra!r}")
        for pattern in extra:
            if not isinstance(pattern, str) or not pattern.strip():
                raise ValueError(f"an error pattern must be a non-empty string, got {pattern!r}")
            try:
                self.patterns.append(re.compile(pattern, re.IGNORECASE))
            except re.error as exc:
                raise ValueError(
                    f"error pattern {pattern!r} is no regular expression: {exc}"
                ) from exc
        self.log = context.log

    @hookimpl(trylast=True)
    def classify_error(self, error: str) -> str | None:
        if self.enabled and any(p.search(error) for p in self.patterns):
            return TOOL_HISTORY_CLASS
        return None

    @hookimpl(trylast=True)
    def plan_recovery(self, error_class: str, run: Any) -> RecoveryPlan | None:
        if not self.enabled or error_class != TOOL_HISTORY_CLASS:
            return None
        # The failed session's extensions, every tool kept: only the history was wrong.
        return text_only_session(KIND, self.log, run, INSTRUCTIONS, drop_tools=())
