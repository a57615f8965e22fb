"""The example's own finish guard: a task whose agent says a page is published, and the page is
not on disk, is not done.

It reads only what the fake agent said last (``public/NAME.html`` in its last reply, the
reply's chunks joined by message id) and looks under one directory; names are confined to it by
their very shape. The built-in ``publish_guard`` does the same in full for goose's runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..hooks import GuardVeto, hookimpl
from ..log import Event

CLAIMED_PAGE = re.compile(r"public/([A-Za-z0-9_-]{1,64}\.html)")
NOT_PUBLISHED = "the agent said it published pages that are not there"


def last_reply(events: Sequence[Event]) -> str:
    """The run's last assistant reply, its chunks joined in order ("" when there is none)."""
    replies: dict[object, list[str]] = {}
    for event in events:
        data = event.data
        if event.type == "Message" and data.get("role") == "assistant":
            replies.setdefault(data.get("message_id"), []).append(str(data.get("text", "")))
    return "".join(list(replies.values())[-1]) if replies else ""


class ClaimedPagesGuard:
    """Vetoes a run whose last reply names pages under `public_root` that do not exist."""

    def __init__(self, public_root: Path) -> None:
        self.public_root = public_root

    @hookimpl
    def finish_guard(self, run: Any, events: Sequence[Event]) -> GuardVeto | None:
        claimed = dict.fromkeys(CLAIMED_PAGE.findall(last_reply(events)))
        missing = [f"public/{name}" for name in claimed if not (self.public_root / name).is_file()]
        return GuardVeto(NOT_PUBLISHED, missing=missing) if missing else None
