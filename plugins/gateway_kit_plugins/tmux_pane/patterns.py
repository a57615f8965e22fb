# ruff: noqa: RUF001, RUF003 - the prompt characters the agents draw are meant
"""What an agent's screen says it is doing: busy, asking for permission, idle at its prompt.

Only the bottom of the screen is read (its last non-empty lines, `Pattern.within` of them per
pattern): the scrollback above holds whatever the agent printed before, an approval prompt
already answered, a quoted "esc to interrupt", an old prompt line. What the agent shows now is
drawn at the bottom: a line-oriented REPL's prompt is its last line, a full-screen UI draws its
input box, spinner and dialogs above a footer there.

When several patterns match, permission beats busy beats idle: a prompt waiting for an answer
must never be typed into, and a spinner above an input box means the agent is still working.

The strings come from the agents' own sources (goose's ``crates/goose-cli``, Codex's
``codex-rs/tui`` and its snapshot tests, aider's ``aider/io.py`` and ``aider/waiting.py``) and,
for Claude Code, whose source is closed, from screens pasted into anthropics/claude-code issues;
``tests/execution/screens/README.md`` says which. `PATTERNS_VERSION` changes with them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

PATTERNS_VERSION = "2026.12"

Kind = Literal["busy", "permission", "idle", "unknown"]
AGENTS = ("goose", "claude_code", "codex", "aider")
PRECEDENCE: tuple[Kind, ...] = ("permission", "busy", "idle")


@dataclass(frozen=True, slots=True)
class Pattern:
    agent: str
    kind: Kind
    name: str
    regex: re.Pattern[str]
    within: int  # how many of the last non-empty lines it reads

    def matches(self, lines: Sequence[str]) -> bool:
        return self.regex.search("\n".join(lines[-self.within :])) is not None


@dataclass(frozen=True, slots=True)
class Reading:
    agent: str | None
    kind: Kind
    pattern: str | None


UNKNOWN = Reading(None, "unknown", None)


def _pattern(agent: str, kind: Kind, name: str, regex: str, within: int) -> Pattern:
    return Pattern(agent, kind, f"{agent}.{kind}.{name}", re.compile(regex, re.MULTILINE), within)


RULE = r"─{8,}"  # a full-width horizontal rule

PATTERNS = (
    # goose: cliclack's select for a tool call (◆ while it waits; ◇ once answered), its
    # spinner (◒◐◓◑) with a random message and "(Ctrl+C to interrupt)", rustyline's "( O)> "
    # prompt. Newer releases prompt with the goose emoji alone, which tmux 3.3 drops as a
    # character it does not know: that prompt reads as an empty line, and the screen as unknown.
    _pattern(
        "goose",
        "permission",
        "tool_call",
        r"^[◆*]  [Gg]oose would like to call the above tool, do you allow\?$",
        8,
    ),
    _pattern("goose", "permission", "security", r"^[◆*]  Do you allow this tool call\?$", 6),
    _pattern("goose", "busy", "spinner", r"^[◒◐◓◑]  .+\.\.\.(?:  \(Ctrl\+C to interrupt\))?$", 2),
    _pattern("goose", "idle", "prompt", r"\A\( O\)>\Z", 1),
    # Claude Code: "Do you want to proceed?" and its numbered choices; a spinner glyph, a verb
    # and "…" with "(esc to interrupt)", or, since v2.1.201, with the elapsed time and tokens
    # only; an empty "❯" input fenced by rules (v2.1) or the older "│ > │" box.
    _pattern(
        "claude_code",
        "permission",
        "question",
        r"^\s*Do you want to (?:proceed|make this edit to .+|create .+)\?$",
        10,
    ),
    _pattern("claude_code", "permission", "choices", r"^\s*❯ 1\. Yes\n\s+2\. ", 8),
    _pattern(
        "claude_code", "busy", "esc_to_interrupt", r"^[·✢✳✶✻✽*] \S.*…\s+\(.*esc to interrupt\)$", 8
    ),
    _pattern(
        "claude_code",
        "busy",
        "elapsed",
        r"^[·✢✳✶✻✽*] \S.*…\s+\((?:\d+[hms]\s?)+(?:·.*)?\)$",
        8,
    ),
    _pattern("claude_code", "idle", "prompt", rf"^{RULE}\n❯(?: Try \".*\")?\n{RULE}$", 5),
    _pattern("claude_code", "idle", "box", r"^╭─+╮\n│ >\s+│\n╰─+╯\n\s+\? for shortcuts", 5),
    # Codex: the approval overlay, the status line above the composer ("• Working (0s • esc
    # to interrupt)"), an empty composer ("› " with its placeholder) over the "? for
    # shortcuts" footer, shown only while nothing is typed; older releases drew "▌".
    _pattern(
        "codex",
        "permission",
        "question",
        r"^\s*Would you like to (?:run the following command|make the following edits"
        r"|grant these permissions)\?$",
        14,
    ),
    _pattern("codex", "permission", "confirm", r"^\s*Press enter to confirm or esc to cancel$", 1),
    _pattern(
        "codex",
        "busy",
        "status",
        r"^\s*(?:[•◦] )?\S.* \((?:\d+[hms]\s?)+.*[•·] [Ee]sc to interrupt\)$",
        8,
    ),
    _pattern("codex", "idle", "composer", r"^› .*\n\s+\? for shortcuts", 3),
    _pattern("codex", "idle", "composer_bar", r"^▌ .*\n(?:▌.*\n)*\s*⏎ send\s", 12),
    # aider: confirm_ask's "(Y)es/(N)o ... [Yes]: ", WaitingSpinner's "Waiting for <model>"
    # after a scanning frame, get_input's rule then the "> " prompt (the edit format and
    # "multi" before it when they differ from the defaults).
    _pattern(
        "aider",
        "permission",
        "confirm",
        r"\(Y\)es/\(N\)o(?:/\(A\)ll)?(?:/\(S\)kip all)?(?:/\(D\)on't ask again)? \[[^\]]*\]:$",
        2,
    ),
    _pattern("aider", "busy", "waiting", r"^[░█#= ]{10} Waiting for \S", 1),
    _pattern("aider", "idle", "prompt", rf"^{RULE}\n(?:.*\n){{0,4}}(?:[\w-]+(?: multi)?)?>\Z", 6),
)
WIDEST = max(p.within for p in PATTERNS)


def bottom(text: str, count: int = WIDEST) -> list[str]:
    """The last `count` non-empty lines of a screen, trailing blanks trimmed."""
    lines = [line.rstrip() for line in text.splitlines()]
    return [line for line in lines if line][-count:]


def read_screen(text: str, agents: Iterable[str] = AGENTS) -> Reading:
    """What the bottom of `text` shows, among the patterns of `agents`."""
    wanted = set(agents)
    lines = bottom(text)
    for kind in PRECEDENCE:
        for pattern in PATTERNS:
            if pattern.kind == kind and pattern.agent in wanted and pattern.matches(lines):
                return Reading(pattern.agent, kind, pattern.name)
    return UNKNOWN
