"""The local files a page needs: its ``src``, ``href`` and ``srcset`` references to images,
stylesheets and scripts, relative to the page. External URLs (any scheme, ``//host``),
``data:`` and anchors are not the guard's business."""

from __future__ import annotations

import posixpath
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

from .claims import Refused, inside, under_public

ASSET_SUFFIXES = (".svg", ".png", ".jpg", ".jpeg", ".webp", ".gif", ".css", ".js")
REFERENCES = frozenset({"src", "href"})


class _References(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in REFERENCES:
                self.found.append(value)
            elif name == "srcset":
                self.found += [part.split()[0] for part in value.split(",") if part.split()]


def page_assets(html: str, page: str) -> tuple[list[str], list[Refused]]:
    """The assets `html` (the page at `page`, relative to the root) needs, relative to the
    root and each once, and the references refused (outside the root)."""
    parser = _References()
    parser.feed(html)
    parser.close()
    assets: dict[str, None] = {}
    refused: list[Refused] = []
    for reference in parser.found:
        try:
            asset = _local(reference.strip(), page)
        except Refused as exc:
            refused.append(exc)
            continue
        if asset is not None:
            assets.setdefault(asset, None)
    return list(assets), refused


def _local(reference: str, page: str) -> str | None:
    if not reference or reference.startswith(("#", "//")):
        return None
    if ":" in reference:  # perhaps a scheme: the full parse
        try:
            parts = urlsplit(reference)
        except ValueError:
            return None  # not a URL a browser would load either
        if parts.scheme or parts.netloc:
            return None
        path = unquote(parts.path)
    else:  # the common relative reference, without urlsplit's cost
        path = unquote(reference.partition("#")[0].partition("?")[0])
    if not path.lower().endswith(ASSET_SUFFIXES):
        return None
    if path.startswith("/"):
        public = under_public(path)  # /MindSpace/<user>/public/assets/x.svg
        if public is None:
            raise Refused(path, "an absolute path outside the public root")
        return public
    return inside(posixpath.join(posixpath.dirname(page), path))
