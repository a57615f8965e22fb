"""The prompt of a follow-up turn: what a finish guard's veto tells goose to do next.

It names the vetoes' reasons and exactly their missing items, each once, in the goose session
the run already has.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..hooks import GuardVeto

FOLLOW_UP_PROMPT = "Your previous answer is not complete yet: {reasons}."
MISSING_LINE = "Still missing:\n{items}"
FOLLOW_UP_END = "Finish exactly these, then answer again."


def follow_up_prompt(vetoes: Sequence[GuardVeto]) -> tuple[str, list[str], list[str]]:
    """The follow-up's prompt, the vetoes' reasons and their missing items (each once)."""
    reasons = list(dict.fromkeys(veto.reason for veto in vetoes))
    missing = list(dict.fromkeys(item for veto in vetoes for item in veto.missing))
    parts = [FOLLOW_UP_PROMPT.format(reasons="; ".join(reasons))]
    if missing:
        parts.append(MISSING_LINE.format(items="\n".join(f"- {item}" for item in missing)))
    parts.append(FOLLOW_UP_END)
    return "\n\n".join(parts), reasons, missing
