"""Requests from a HAR file (HTTP Archive 1.2), as a browser's developer tools save it.

A page's HAR holds every request the page made, other sites' too (fonts, analytics, a CDN):
only the requests to the origin of the first HTTP entry (scheme, host and port: usually the
page itself) are replayed. WebSocket connections are left out too: they are no request and
answer.
What was left out is counted, by reason. A request body is ``postData.text``, sent as UTF-8.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import SplitResult, urlsplit

from .recorded import BadRecording, Recorded, recorded

OTHER_ORIGIN = "to other origins"
WEBSOCKET = "WebSocket connections"
NO_ENTRIES = "not a HAR file: log.entries is not a list"
NOT_A_REQUEST = "entry {n}: {what}"
NO_URL = "request.url is not a URL"
NO_METHOD = "request.method is not a string"
BAD_HEADERS = "request.headers is not a list of {name, value} objects"
NO_BODY_TEXT = "request.postData has no text (the body was not recorded)"


def read_har(document: dict[str, Any]) -> tuple[list[Recorded], dict[str, int]]:
    """The requests to replay, in order, and how many were left out for each reason."""
    log = document.get("log")
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise BadRecording(NO_ENTRIES)
    requests: list[Recorded] = []
    skipped = {OTHER_ORIGIN: 0, WEBSOCKET: 0}
    origin = None
    for n, entry in enumerate(entries, start=1):
        request = entry.get("request") if isinstance(entry, dict) else None
        if not isinstance(request, dict):
            raise BadRecording(NOT_A_REQUEST.format(n=n, what="it has no request object"))
        url = url_of(request)
        if url is None:
            raise BadRecording(NOT_A_REQUEST.format(n=n, what=NO_URL))
        if entry.get("_resourceType") == "websocket" or url.scheme in ("ws", "wss"):
            skipped[WEBSOCKET] += 1
            continue
        here = (url.scheme, url.netloc)
        if url.scheme not in ("http", "https") or not url.netloc or origin not in (None, here):
            skipped[OTHER_ORIGIN] += 1
        else:
            origin = here
            requests.append(request_of(request, n))
    return requests, {reason: count for reason, count in skipped.items() if count}


def url_of(request: dict[str, Any]) -> SplitResult | None:
    """The request's URL, or None when it has none with a scheme (data: and blob: have one)."""
    url = request.get("url")
    try:
        split = urlsplit(url) if isinstance(url, str) else None
    except ValueError:  # such as an unclosed [ of an IPv6 address
        return None
    return split if split is not None and split.scheme else None


def request_of(request: dict[str, Any], n: int) -> Recorded:
    def bad(what: str) -> BadRecording:
        return BadRecording(NOT_A_REQUEST.format(n=n, what=what))

    url = urlsplit(request["url"])
    method = request.get("method")
    if not isinstance(method, str):
        raise bad(NO_METHOD)
    headers = request.get("headers", [])
    if not isinstance(headers, list) or not all(
        isinstance(h, dict) and isinstance(h.get("name"), str) and isinstance(h.get("value"), str)
        for h in headers
    ):
        raise bad(BAD_HEADERS)
    body = b""
    post = request.get("postData")
    if post is not None:
        if not isinstance(post, dict) or not isinstance(post.get("text"), str):
            raise bad(NO_BODY_TEXT)
        body = post["text"].encode()
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    pairs = [(h["name"], h["value"]) for h in headers]
    return recorded(
        method, target, pairs, body, scheme=url.scheme, host=url.netloc, source=f"entry {n}"
    )
