# ruff: noqa: RUF001 - the prompt characters the agents draw are meant
"""Reading agents' screens: each captured screen under ``support/screens/`` reads as its name says
(``<agent>/<kind>-<what>.txt``), every pattern is borne out by a captured screen, and only the
bottom of the screen counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from gateway_kit_plugins.tmux_pane.patterns import (
    AGENTS,
    PATTERNS,
    PATTERNS_VERSION,
    Pattern,
    Reading,
    bottom,
    read_screen,
)

SCREENS = Path(__file__).parents[1] / "support" / "screens"
FIXTURES = sorted(SCREENS.glob("*/*.txt"))


def expected(fixture: Path) -> tuple[str | None, str]:
    """(agent, kind) a fixture's path names; the ``none`` folder holds no agent's screens."""
    agent = None if fixture.parent.name == "none" else fixture.parent.name
    return agent, fixture.stem.split("-", 1)[0]


def named(fixture: Path) -> str:
    return f"{fixture.parent.name}/{fixture.stem}"


def screen(fixture: Path) -> str:
    return fixture.read_text(encoding="utf-8")


def test_every_agent_has_a_captured_screen_of_each_kind() -> None:
    shown = {expected(fixture) for fixture in FIXTURES}
    wanted = {(agent, kind) for agent in AGENTS for kind in ("busy", "permission", "idle")}
    assert wanted <= shown
    assert (None, "unknown") in shown


@pytest.mark.parametrize("fixture", FIXTURES, ids=named)
def test_a_captured_screen_reads_as_its_name_says(fixture: Path) -> None:
    agent, kind = expected(fixture)
    reading = read_screen(screen(fixture))
    assert (reading.agent, reading.kind) == (agent, kind)
    if reading.pattern is not None:
        assert reading.pattern.startswith(f"{agent}.{kind}.")


def matched_by_its_screens(pattern: Pattern) -> list[str]:
    return [
        named(fixture)
        for fixture in FIXTURES
        if expected(fixture) == (pattern.agent, pattern.kind)
        and pattern.matches(bottom(screen(fixture)))
    ]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda pattern: pattern.name)
def test_every_pattern_is_matched_by_a_captured_screen_of_its_agent_and_kind(
    pattern: Pattern,
) -> None:
    assert matched_by_its_screens(pattern), f"no captured screen shows {pattern.name}"


def test_patterns_are_named_uniquely_and_versioned() -> None:
    assert len({pattern.name for pattern in PATTERNS}) == len(PATTERNS)
    assert {pattern.agent for pattern in PATTERNS} == set(AGENTS)
    assert PATTERNS_VERSION.strip()


def test_a_prompt_left_in_the_scrollback_does_not_count() -> None:
    text = screen(SCREENS / "none" / "unknown-old-prompt-in-scrollback.txt")
    assert "Do you want to proceed?" in text
    assert read_screen(text) == Reading(None, "unknown", None)


def test_busy_beats_the_idle_input_box_shown_beneath_it() -> None:
    text = screen(SCREENS / "codex" / "busy-working.txt")
    [composer] = [p for p in PATTERNS if p.name == "codex.idle.composer"]
    assert composer.matches(bottom(text))  # the empty composer is there too
    assert read_screen(text).kind == "busy"


def test_permission_beats_a_spinner_still_on_screen() -> None:
    spinner = "✻ Pondering… (4s · ↓ 120 tokens)\n"
    text = spinner + screen(SCREENS / "claude_code" / "permission-bash.txt")
    assert read_screen(text).kind == "permission"
    assert read_screen(spinner).kind == "busy"


def test_only_the_agents_asked_for_are_read() -> None:
    text = screen(SCREENS / "codex" / "idle-composer.txt")
    assert read_screen(text, agents=("goose", "aider")) == Reading(None, "unknown", None)
    assert read_screen(text, agents=("codex",)).agent == "codex"


def test_something_typed_into_the_input_box_is_not_an_idle_prompt() -> None:
    text = screen(SCREENS / "claude_code" / "idle-prompt.txt").replace("❯\n", "❯ half a question\n")
    assert read_screen(text).kind == "unknown"
    typed = screen(SCREENS / "goose" / "idle-prompt.txt").rstrip() + " list the tests"
    assert read_screen(typed).kind == "unknown"
