"""Masking: what varies between two runs of the same app is replaced by a placeholder before
two answers are compared, so that only what the gateway changed remains.

In text (and in every string and key of a JSON body, and in header values):

- a UUID (``550e8400-e29b-41d4-a716-446655440000``)          → ``<uuid>``
- an ISO 8601 time (``2024-05-01T12:00:00.123Z``, with a time of day) → ``<time>``
- an HTTP date (``Wed, 01 May 2024 12:00:00 GMT``)           → ``<time>``
- 16 or more hexadecimal digits (hashes, ETags, hex ids)      → ``<hex>``
- 22 or more letters, digits, ``-`` or ``_`` with both upper and lower case letters, and
  digits or one upper-case letter in four at least (``secrets.token_urlsafe``, signed values;
  not a long camelCase name)                                   → ``<token>``
- 10 or 13 digits that read as a time within ten years of now, in seconds or milliseconds
  (a fraction of a second may follow)                           → ``<epoch>``

In a JSON body, a number that reads as such a time is ``"<epoch>"`` too. A cookie's value of
16 or more characters (a session, a signed value) is ``<value>``; its name, a short value and
its attributes are compared. Dates without a time of day are kept: they rarely change between
two runs, and may be what an answer is about.
"""

from __future__ import annotations

import re
import time
from typing import Any

TEN_YEARS = 10 * 365.25 * 24 * 3600
UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")
ISO_TIME = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?"
)
HTTP_DATE = re.compile(
    r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2}[ -]"
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[ -]\d{2,4} \d{2}:\d{2}:\d{2} GMT"
)
LONG_HEX = re.compile(r"\b[0-9a-fA-F]{16,}\b")
TOKEN_LIKE = re.compile(r"(?<![\w-])[A-Za-z0-9_-]{22,}(?![\w-])")
EPOCH_DIGITS = re.compile(r"(?<![\d.])(?:\d{13}|\d{10}(?:\.\d+)?)(?![\d.])")
COOKIE_VALUE_MASKED_FROM = 16
PLACEHOLDERS = (
    (UUID, "<uuid>"),
    (ISO_TIME, "<time>"),
    (HTTP_DATE, "<time>"),
    (LONG_HEX, "<hex>"),
)


def is_epoch(number: float) -> bool:
    """Whether `number` reads as a time within ten years of now, in seconds or milliseconds."""
    now = time.time()
    return any(abs(number / scale - now) < TEN_YEARS for scale in (1, 1000))


def is_token(word: str) -> bool:
    """Whether `word` reads as random: both cases, and digits or many upper-case letters
    (a random token without a digit is no rarity; a camelCase name has few capitals)."""
    upper, lower = sum(c.isupper() for c in word), sum(c.islower() for c in word)
    has_digit = any(c.isdigit() for c in word)
    return bool(upper and lower) and (has_digit or upper * 4 >= upper + lower)


def mask_text(text: str) -> str:
    for pattern, placeholder in PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    text = TOKEN_LIKE.sub(lambda match: "<token>" if is_token(match[0]) else match[0], text)
    return EPOCH_DIGITS.sub(
        lambda match: "<epoch>" if is_epoch(float(match[0])) else match[0], text
    )


def mask_json(value: Any) -> Any:
    """`value` with every string, key and time-like number masked; keys that mask alike are
    kept apart by their order (``<uuid>``, ``<uuid>#2``)."""
    if isinstance(value, dict):
        masked: dict[str, Any] = {}
        for key, item in value.items():
            name = base = mask_text(key)
            count = 1
            while name in masked:
                count += 1
                name = f"{base}#{count}"
            masked[name] = mask_json(item)
        return masked
    if isinstance(value, list):
        return [mask_json(item) for item in value]
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, int | float) and not isinstance(value, bool) and is_epoch(value):
        return "<epoch>"
    return value


def mask_cookie(set_cookie: str) -> str:
    """A ``Set-Cookie`` value with a long cookie value masked, its attributes as text."""
    pair, semicolon, attributes = set_cookie.partition(";")
    name, equals, value = pair.partition("=")
    if len(value.strip()) >= COOKIE_VALUE_MASKED_FROM:
        value = "<value>"
    return f"{name}{equals}{mask_text(value)}{semicolon}{mask_text(attributes)}"
