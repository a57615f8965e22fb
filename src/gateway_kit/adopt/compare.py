"""Comparing the app's answer with the gateway's: status, headers, body, and how each ended.

Headers are compared by name (any case), their values masked (`masking`); these are not
compared, being the server's and not the app's, or said by the body: `IGNORED_HEADERS`.
``Set-Cookie`` is compared cookie by cookie, by name, each with its long value masked.
"""

from __future__ import annotations

from .body import body_differences
from .call import MAX_BODY, Answer
from .difference import NONE, Difference, shortened_pair
from .masking import mask_cookie, mask_text

IGNORED_HEADERS = frozenset(
    {"connection", "content-length", "date", "keep-alive", "server", "transfer-encoding"}
)
NO_ANSWER = "no answer"
NOT_BEGUN = "no answer began within --timeout"
WHOLE = "whole, {size}"
IN_PART = "read {size} of a stream ({why})"
WHY = {MAX_BODY: "--max-body reached"}
TIMED_OUT = "--timeout reached"


def differences(app: Answer, gateway: Answer) -> list[Difference]:
    """How `gateway` differs from `app`, in the order: status, error, end, headers, body."""
    found = []
    if app.status != gateway.status:
        found.append(Difference("status", "", status(app), status(gateway)))
    if app.error != gateway.error:
        found.append(Difference("error", "", app.error or NONE, gateway.error or NONE))
    if app.status is None or gateway.status is None:
        return found  # nothing more to compare with an answer that never began
    if (app.cut is None) != (gateway.cut is None):
        found.append(Difference("end", "", how_read(app), how_read(gateway)))
    found += header_differences(app, gateway)
    found += body_differences(app, gateway)
    return found


def status(answer: Answer) -> str:
    return NO_ANSWER if answer.status is None else str(answer.status)


def how_read(answer: Answer) -> str:
    if answer.status is None:
        return NOT_BEGUN
    if answer.cut is None:
        return WHOLE.format(size=size(len(answer.body)))
    return IN_PART.format(size=size(len(answer.body)), why=WHY.get(answer.cut, TIMED_OUT))


def size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / 1024 / 1024:.1f} MB"


def header_differences(app: Answer, gateway: Answer) -> list[Difference]:
    found = []
    names = dict.fromkeys(k.lower() for k, _ in [*app.headers, *gateway.headers])
    for name in names:
        if name in IGNORED_HEADERS:
            continue
        if name == "set-cookie":
            found += cookie_differences(app.header(name), gateway.header(name))
            continue
        a, b = (", ".join(answer.header(name)) for answer in (app, gateway))
        if mask_text(a) != mask_text(b):
            found.append(Difference("header", name, *shown_values(a, b)))
    return found


def cookie_differences(app: list[str], gateway: list[str]) -> list[Difference]:
    a, b = cookies(app), cookies(gateway)
    found = []
    for name in dict.fromkeys([*a, *b]):
        if a.get(name) != b.get(name):
            shown = shown_values(a.get(name, ""), b.get(name, ""))
            found.append(Difference("header", f"set-cookie {name}", *shown))
    return found


def cookies(values: list[str]) -> dict[str, str]:
    """Each cookie's masked ``Set-Cookie`` by its name (the last one said, as a browser keeps)."""
    return {value.split("=", 1)[0].strip(): mask_cookie(value) for value in values}


def shown_values(a: str, b: str) -> tuple[str, str]:
    shown_a, shown_b = shortened_pair(a, b)
    return shown_a if a else NONE, shown_b if b else NONE
