"""Requests written as JSON lines, one request a line (blank lines are skipped)::

    {"method": "POST", "path": "/login?next=/", "headers": {"Content-Type": "..."}, "body": "..."}
    {"method": "GET", "path": "/api/items", "headers": [["Accept", "application/json"]]}
    {"method": "POST", "path": "/api/items", "json": {"name": "a"}}

``headers`` is an object or a list of ``[name, value]`` pairs (a name may repeat); ``body`` is
text sent as UTF-8; ``json`` is any JSON value, sent with ``Content-Type: application/json``
unless the line names another. They are sent to ``http://localhost`` (the ``Host`` header).
"""

from __future__ import annotations

import json
from typing import Any

from .recorded import BadRecording, Recorded, recorded

FIELDS = ("method", "path", "headers", "body", "json")
NOT_JSON = "line {n}: not JSON ({error})"
NOT_AN_OBJECT = "line {n}: a request is a JSON object, not {kind}"
UNKNOWN_FIELDS = "line {n}: unknown field {names} (a request has " + ", ".join(FIELDS) + ")"
MISSING = "line {n}: {name!r} is missing"
NOT_TEXT = "line {n}: {name!r} is not a string"
BAD_HEADERS = 'line {n}: "headers" is an object of strings or a list of [name, value] pairs'
BODY_AND_JSON = 'line {n}: "body" and "json" are both given; a request has one body'


def read_json_lines(text: str) -> list[Recorded]:
    """Every request of `text`, in order; `BadRecording` naming the first line that is not one."""
    requests = []
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            requests.append(request_of(line, n))
    return requests


def request_of(line: str, n: int) -> Recorded:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadRecording(NOT_JSON.format(n=n, error=exc.msg)) from None
    if not isinstance(value, dict):
        raise BadRecording(NOT_AN_OBJECT.format(n=n, kind=type(value).__name__))
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise BadRecording(UNKNOWN_FIELDS.format(n=n, names=", ".join(map(repr, unknown))))
    method, path = (text_field(value, name, n) for name in ("method", "path"))
    headers = headers_of(value.get("headers", []), n)
    if "body" in value and "json" in value:
        raise BadRecording(BODY_AND_JSON.format(n=n))
    body = b""
    if "body" in value:
        body = text_field(value, "body", n).encode()
    elif "json" in value:
        body = json.dumps(value["json"]).encode()
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "application/json"))
    return recorded(method, path, headers, body, source=f"line {n}")


def text_field(value: dict[str, Any], name: str, n: int) -> str:
    if name not in value:
        raise BadRecording(MISSING.format(n=n, name=name))
    if not isinstance(value[name], str):
        raise BadRecording(NOT_TEXT.format(n=n, name=name))
    return str(value[name])


def headers_of(value: object, n: int) -> list[tuple[str, str]]:
    pairs: list[Any] = list(value.items()) if isinstance(value, dict) else value  # type: ignore[assignment]
    if not isinstance(pairs, list) or not all(
        isinstance(pair, list | tuple)
        and len(pair) == 2
        and all(isinstance(part, str) for part in pair)
        for pair in pairs
    ):
        raise BadRecording(BAD_HEADERS.format(n=n))
    return [(name, text) for name, text in pairs]
