"""Which pages an answer claims: links and paths to ``…/public/<path>.html`` in its text.

A path is taken from its first ``public`` segment on, whatever comes before it: a relative
``public/x.html``, ``/MindSpace/<user>/public/x.html``, a full URL. A link (an absolute path, a
URL, a Markdown link's target, an ``href``) is a claim by itself; a bare relative path is one
only in an answer that also says the page is done (a claim phrase): "you could create
public/x.html" claims nothing.

Every path is made relative to the public root lexically (`inside`): one that climbs out of it
is refused here, before anything touches the disk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

PUBLIC = "public"
# What ends a path in prose: spaces, quotes, brackets, and the full-width punctuation of
# Chinese text around it (commas, stops, colons, quotes and brackets).
STOPS = (
    "\\s\"'`<>()\\[\\]{}|"
    "\uff0c\u3002\uff1b\uff1a\u3001\uff01\uff1f\u300c\u300d\u300e\u300f\uff08\uff09\u3010\u3011\u300a\u300b"
)
PUBLIC_PAGE = re.compile(
    rf"(?<![A-Za-z0-9_.~%-])public/(?P<rel>[^{STOPS}?#]*?\.html)"
    r"(?![A-Za-z0-9_/-]|\.[A-Za-z0-9])"
)
LINK_BEFORE = ("/", "](", 'href="', "href='", "<")


class Refused(ValueError):
    """A path that leaves the public root (``..`` above it, an absolute path elsewhere, a
    symlink out of it) or that no file name can have."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path!r}: {why}")
        self.path = path
        self.why = why


def inside(path: str) -> str:
    """`path` (relative to the root) made plain: no ``.``, no empty segment, ``..`` resolved;
    `Refused` when it climbs out of the root or holds what no file name may."""
    if "\x00" in path or "\\" in path or not path.isprintable():
        raise Refused(path, "not a plain file path")
    if path.startswith("/"):
        raise Refused(path, "an absolute path outside the public root")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise Refused(path, "climbs out of the public root")
            parts.pop()
        else:
            parts.append(part)
    if not parts:
        raise Refused(path, "names the public root itself")
    return "/".join(parts)


def public_path(relative: str) -> str:
    """How the guard names a file of the public root to the agent and to every client: by its
    path under ``public/``, as the agent's own claims and writes name it. The server's path of
    the root is never named: it would reach every client of the stream."""
    return f"{PUBLIC}/{relative}"


def under_public(path: str) -> str | None:
    """The part of `path` after its first ``public`` segment (None: it has none), plain."""
    parts = path.split("/")
    if PUBLIC not in parts[:-1]:
        return None
    return inside("/".join(parts[parts.index(PUBLIC) + 1 :]))


def claimed_pages(texts: Iterable[str], phrases: Iterable[str]) -> tuple[list[str], list[Refused]]:
    """The pages `texts` claim, relative to the root and each once, and the paths refused."""
    phrases = tuple(phrases)
    pages: dict[str, None] = {}
    refused: list[Refused] = []
    for text in texts:
        claiming = any(phrase in text.casefold() for phrase in phrases)
        for match in PUBLIC_PAGE.finditer(text):
            before = text[max(0, match.start() - 6) : match.start()]
            if not claiming and not before.endswith(LINK_BEFORE):
                continue
            try:
                pages.setdefault(inside(unquote(match["rel"])), None)
            except Refused as exc:
                refused.append(exc)
    return list(pages), refused
