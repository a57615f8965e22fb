"""`Difference`: one way two answers differ, with both sides shortened for a table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SHOWN_CHARACTERS = 40
NONE = "(none)"
MORE_IN_BODY = "… and {count} more differences in the body"


@dataclass(frozen=True, slots=True)
class Difference:
    """:param what: ``status``, ``header``, ``body``, ``end`` (one answer ended, the other was
        cut short) or ``error`` (an app raised).
    :param where: the header's name, the body's JSON pointer (``/items/0/name``), ``line N``
        or ``byte N`` of a body, or ``""``.
    :param app: what the app alone answered there, shortened; `NONE` when it had nothing.
    :param gateway: what the gateway answered there, likewise."""

    what: str
    where: str
    app: str
    gateway: str

    def describe(self) -> str:
        if self.what == "more":
            return MORE_IN_BODY.format(count=self.app)
        if self.what == "body" and self.where.startswith("/"):
            place = f"body at {self.where}"
        else:
            place = f"{self.what} {self.where}".strip()
        return f"{place}: {self.app} → {self.gateway}"


def shorten(text: str, start: int = 0, width: int = SHOWN_CHARACTERS) -> str:
    """`text` from about `start`, at most `width` characters, with ``…`` where it was cut."""
    start = max(0, min(start - width // 3, len(text) - width))
    shown = text[start : start + width]
    return ("…" if start else "") + shown + ("…" if start + width < len(text) else "")


def first_difference(a: Sequence[object], b: Sequence[object]) -> int:
    """Where `a` and `b` first differ (the shorter one's length when one begins the other)."""
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))


def shortened_pair(a: str, b: str) -> tuple[str, str]:
    """`a` and `b`, each shortened around where they first differ."""
    at = first_difference(a, b)
    return shorten(a, at), shorten(b, at)
