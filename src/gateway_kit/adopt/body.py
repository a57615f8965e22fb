"""Comparing two bodies: as JSON when both are JSON, else as text, else byte for byte.

Both are masked first (`masking`). JSON bodies are compared as values (key order and spacing
do not count; ``1`` and ``1.0`` are one number, ``true`` is no number): each difference is
named by its JSON pointer. Text is compared line by line. A body read in part (a stream) is
compared on what both sides read: its complete lines, as many as the shorter side has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .call import Answer
from .difference import NONE, Difference, first_difference, shorten, shortened_pair
from .masking import mask_json, mask_text

MAX_DIFFERENCES = 5
MISSING = object()
MORE = "more"  # what a `Difference` standing for those not listed is


def body_differences(app: Answer, gateway: Answer) -> list[Difference]:
    a, b = json_of(app), json_of(gateway)
    if a is not MISSING and b is not MISSING:
        found = list(json_differences(mask_json(a), mask_json(b), ""))
    else:
        text_a, text_b = text_of(app), text_of(gateway)
        in_part = bool(app.cut or gateway.cut)
        if text_a is None or text_b is None:
            found = byte_differences(app.body, gateway.body, in_part=in_part)
        else:
            found = line_differences(text_a, text_b, in_part=in_part)
    if len(found) > MAX_DIFFERENCES:
        rest = str(len(found) - MAX_DIFFERENCES + 1)
        found = [*found[: MAX_DIFFERENCES - 1], Difference(MORE, "", rest, rest)]
    return found


def json_of(answer: Answer) -> Any:
    content_type = ",".join(answer.header("content-type")).lower()
    if answer.cut or "json" not in content_type:
        return MISSING
    try:
        return json.loads(answer.body)
    except ValueError:  # not JSON after all: compared as text
        return MISSING


def text_of(answer: Answer) -> str | None:
    """The body as UTF-8 text, or None when it is not; a stream may be cut inside a character."""
    for trim in range(4 if answer.cut else 1):
        try:
            return answer.body[: len(answer.body) - trim].decode()
        except UnicodeDecodeError:
            continue
    return None


def json_differences(a: Any, b: Any, pointer: str) -> Iterator[Difference]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            where = pointer + "/" + key.replace("~", "~0").replace("/", "~1")
            yield from json_differences(a.get(key, MISSING), b.get(key, MISSING), where)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            yield from json_differences(item(a, i), item(b, i), f"{pointer}/{i}")
    elif not same_json(a, b):
        yield Difference("body", pointer, shown(a), shown(b))


def item(items: list[Any], i: int) -> Any:
    return items[i] if i < len(items) else MISSING


def same_json(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def shown(value: Any) -> str:
    return NONE if value is MISSING else shorten(json.dumps(value, ensure_ascii=False))


def line_differences(a: str, b: str, *, in_part: bool) -> list[Difference]:
    lines_a, lines_b = (mask_text(text).splitlines(keepends=True) for text in (a, b))
    if in_part:  # what both read: whole lines, as many as the shorter side has
        lines_a, lines_b = whole_lines(lines_a), whole_lines(lines_b)
        common = min(len(lines_a), len(lines_b))
        lines_a, lines_b = lines_a[:common], lines_b[:common]
    for n in range(max(len(lines_a), len(lines_b))):
        line_a, line_b = (lines[n] if n < len(lines) else None for lines in (lines_a, lines_b))
        if line_a != line_b:
            if line_a is None or line_b is None:
                shown_a = NONE if line_a is None else shorten(line_a.rstrip("\r\n"))
                shown_b = NONE if line_b is None else shorten(line_b.rstrip("\r\n"))
            else:
                shown_a, shown_b = shortened_pair(line_a.rstrip("\r\n"), line_b.rstrip("\r\n"))
            return [Difference("body", f"line {n + 1}", shown_a, shown_b)]
    return []


def whole_lines(lines: list[str]) -> list[str]:
    return lines if not lines or lines[-1].endswith(("\n", "\r")) else lines[:-1]


def byte_differences(a: bytes, b: bytes, *, in_part: bool) -> list[Difference]:
    if in_part:  # what both read
        a, b = a[: min(len(a), len(b))], b[: min(len(a), len(b))]
    if a == b:
        return []
    at = first_difference(a, b)
    return [Difference("body", f"byte {at + 1}", f"{len(a)} bytes", f"{len(b)} bytes")]
