"""Recovery from a text-only model that meets an image: a clean session without the image tool.

goose's image tool (``read_image``) returns an image block, which OpenAI-format providers send as
an ``image_url`` part; a text-only model (DeepSeek, say) refuses the whole request with ``unknown
variant `image_url`, expected `text```, and since the history is sent again every turn, every
later turn of that session fails the same way. Retrying as it is cannot help.

- `classify_error` names ``SESSION_VISUAL_CONTEXT_UNSUPPORTED`` for that phrase in any of its
  forms: plain, in backticks or quotes, JSON-escaped, inside a provider's longer message.
- `plan_recovery` answers a clean goose session that keeps every extension of the failed one
  but the image tool (``drop_tools``: the gateway reads the failed session's extensions and
  tools from goose), starting from the conversation's visible text (`visible_text`), and
  telling the agent to skip visual checks and carry on with the text task. The conversation
  goes on in that session; other conversations keep their image tool.

Settings (``plugin_config={"visual_fallback": {...}}``): ``enabled`` (default true) and
``image_tool``: the tool to leave out, ``read_image`` (in whichever extension has it) or
``<extension>__read_image`` (in that one). A run takes this recovery once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway_kit import RecoveryPlan, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.log import EventLog

from .settings import check_known, flag, word
from .visible_text import text_only_session

VISUAL_CLASS = "SESSION_VISUAL_CONTEXT_UNSUPPORTED"
KIND = "visual_fallback"
DEFAULT_IMAGE_TOOL = "read_image"
# What may surround a name in the provider's message: backticks or quotes, JSON-escaped or not.
_QUOTE = r"(?:\\*[`'\"]|\\*u0060|&quot;|&#96;|&#39;)*"
VISUAL_ERROR = re.compile(
    rf"unknown\s+variant\s+{_QUOTE}image_url{_QUOTE}\s*,\s*expected\s+{_QUOTE}text",
    re.IGNORECASE,
)
INSTRUCTIONS = (
    "The model of this conversation cannot read images, so the image tool is not available "
    "any more. Skip every visual check (screenshots, images) and carry on with the text "
    "task; do not try to look at images again.\n\nThe task: {message}"
)


def is_visual_error(error: str) -> bool:
    return VISUAL_ERROR.search(error) is not None


class VisualFallback:
    def __init__(self) -> None:
        self.enabled = True
        self.image_tool = DEFAULT_IMAGE_TOOL
        self.log: EventLog | None = None

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        check_known(config, {"enabled", "image_tool"})
        self.enabled = flag(config, "enabled", True)
        self.image_tool = word(config, "image_tool", DEFAULT_IMAGE_TOOL)
        self.log = context.log

    @hookimpl(trylast=True)
    def classify_error(self, error: str) -> str | None:
        return VISUAL_CLASS if self.enabled and is_visual_error(error) else None

    @hookimpl(trylast=True)
    def plan_recovery(self, error_class: str, run: Any) -> RecoveryPlan | None:
        if not self.enabled or error_class != VISUAL_CLASS:
            return None
        return text_only_session(KIND, self.log, run, INSTRUCTIONS, drop_tools=(self.image_tool,))
