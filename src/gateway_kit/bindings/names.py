"""What a tmux session id may be, wherever one comes in: a path, a request body, a plugin's
answer, the command line."""

from __future__ import annotations

import re

MAX_TMUX_SESSION_CHARS = 256
# Printable characters only: an id is written to logs and handed to tmux as a target.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A session's name, never a pane (``%3``), a window (``name:1``) or a pane of one (``name.2``):
# tmux would take those as targets inside some session, tracked apart from the session the
# agent's requests name, and type into them.
_NOT_A_SESSION = re.compile(r"^%|[:.]")
BAD_TMUX_SESSION = (
    "a tmux session id is the name of a session: 1 to {max} printable characters, "
    "without ':' or '.', not starting with '%', got {value!r}"
)


def tmux_session_problem(value: object) -> str | None:
    """Why `value` cannot be a tmux session id, or None when it can."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_TMUX_SESSION_CHARS
        or _CONTROL.search(value)
        or _NOT_A_SESSION.search(value)
    ):
        shown = value if not isinstance(value, str) else value[:80]
        return BAD_TMUX_SESSION.format(max=MAX_TMUX_SESSION_CHARS, value=shown)
    return None


def is_tmux_session_id(value: object) -> bool:
    return tmux_session_problem(value) is None
