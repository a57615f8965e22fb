"""A small tmux client: find a session's active pane, read its screen, type into it.

tmux runs as a subprocess with argument lists, never through a shell. A session is always named
exactly (tmux's ``=name`` form): without it tmux takes ``abc`` as a prefix of ``abcdef``, and
``name:1`` or ``name.2`` as a window or a pane of ``name``.
"""

from __future__ import annotations

import re
import subprocess
import unicodedata

PANE_ID = re.compile(r"%[0-9]+")
MAX_TARGET = 256
CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})  # control characters, line and paragraph breaks
# tmux turns ':' and '.' in a new session's name into '_': a name holding either is no session.
NOT_IN_SESSION_NAMES = (":", ".")

SESSION_AND_PANE = "#{session_name}\t#{pane_id}"

NO_TMUX = "tmux not found: {binary!r}"
TIMED_OUT = "tmux {command} timed out after {timeout:g}s"
FAILED = "tmux {command} failed: {reason}"
NO_SUCH_SESSION = "no tmux session named {name!r}"
BAD_TARGET = "a tmux target must be a non-empty line of at most {limit} characters, got {target!r}"
BAD_TEXT = "text to type must be one line without control characters, got {text!r}"


class TmuxError(Exception):
    """tmux could not do it: missing, no such session or pane, timed out, refused."""


class Tmux:
    def __init__(
        self,
        *,
        socket_name: str | None = None,
        socket_path: str | None = None,
        binary: str = "tmux",
        timeout: float = 5.0,
    ) -> None:
        self.binary = binary
        self.timeout = timeout
        self.server: tuple[str, ...] = ()
        if socket_path is not None:
            self.server = ("-S", socket_path)
        elif socket_name is not None:
            self.server = ("-L", socket_name)

    def pane_id(self, target: str) -> str:
        """The pane id (``%N``) of session `target`'s active pane, or of pane `target`."""
        _check_target(target)
        if PANE_ID.fullmatch(target):
            found = self._run("display-message", "-p", "-t", target, "#{pane_id}").strip()
            if found != target:
                raise TmuxError(FAILED.format(command="display-message", reason="no such pane"))
            return found
        if any(mark in target for mark in NOT_IN_SESSION_NAMES):
            raise TmuxError(NO_SUCH_SESSION.format(name=target))
        shown = self._run("display-message", "-p", "-t", f"={target}:", SESSION_AND_PANE)
        session, _, pane = shown.rstrip("\n").partition("\t")
        if session != target or not PANE_ID.fullmatch(pane):
            raise TmuxError(NO_SUCH_SESSION.format(name=target))
        return pane

    def capture(self, target: str) -> str:
        """The visible screen of `target`'s pane, as text."""
        return self._run("capture-pane", "-p", "-t", self.pane_id(target))

    def send_text(self, target: str, text: str, *, enter: bool = True) -> None:
        """Type `text` into `target`'s pane as it is (no key names), then Enter."""
        if any(_is_control(c) for c in text):
            raise ValueError(BAD_TEXT.format(text=text))
        pane = self.pane_id(target)
        if text:
            self._run("send-keys", "-t", pane, "-l", "--", text)
        if enter:
            self._run("send-keys", "-t", pane, "Enter")

    def has_session(self, name: str) -> bool:
        _check_target(name)
        if PANE_ID.fullmatch(name) or any(mark in name for mark in NOT_IN_SESSION_NAMES):
            return False
        try:
            self._run("has-session", "-t", f"={name}")
        except TmuxError as exc:
            if isinstance(exc.__cause__, subprocess.CalledProcessError):
                return False  # no such session, or no server running at all
            raise
        return True

    def _run(self, command: str, *args: str) -> str:
        argv = [self.binary, *self.server, command, *args]
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=self.timeout, check=True
            )
        except FileNotFoundError:
            raise TmuxError(NO_TMUX.format(binary=self.binary)) from None
        except subprocess.TimeoutExpired:
            raise TmuxError(TIMED_OUT.format(command=command, timeout=self.timeout)) from None
        except subprocess.CalledProcessError as exc:
            reason = (exc.stderr or "").strip().splitlines() or [f"exit status {exc.returncode}"]
            raise TmuxError(FAILED.format(command=command, reason=reason[0])) from exc
        return done.stdout


def _is_control(char: str) -> bool:
    return unicodedata.category(char) in CONTROL_CATEGORIES


def _check_target(target: str) -> None:
    if not target or len(target) > MAX_TARGET or any(_is_control(c) for c in target):
        raise TmuxError(BAD_TARGET.format(limit=MAX_TARGET, target=target[: MAX_TARGET + 1]))
