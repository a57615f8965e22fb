"""One check of a run: what it claimed and wrote, made good where the run's own write calls
allow, and what is still missing."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway_kit import Event, final_assistant_text, tool_calls
from gateway_kit.runs.events import UPSTREAM_FINISH

from .assets import page_assets
from .claims import Refused, under_public
from .confinement import PublicRoot, Version
from .settings import WriteTool

MAX_PAGE_BYTES = 4 * 1024 * 1024  # read for its assets; a larger page is checked in its start
KNOWN_PAGES = 1024

PageKey = tuple[str, str, Version]  # the root, the page in it, the page's version


@dataclass
class Findings:
    missing: list[str] = field(default_factory=list)  # as named to the agent: the root's path
    materialized: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def answers(events: Sequence[Event]) -> list[str]:
    """The final text of each goose request of the run: what each turn ended by saying (a
    follow-up's "done" does not take back what the turn before it claimed)."""
    texts, start = [], 0
    for index, event in enumerate(events):
        if event.type == UPSTREAM_FINISH:
            texts.append(final_assistant_text(events[start:index]))
            start = index + 1
    texts.append(final_assistant_text(events[start:]))
    return [text for text in texts if text]


def public_writes(
    events: Sequence[Event], tools: Sequence[WriteTool]
) -> tuple[dict[str, str], list[Refused]]:
    """What the run's write calls wrote under a ``public`` segment, by path relative to the
    root (the last write of a path wins), and the paths refused."""
    writes: dict[str, str] = {}
    refused: list[Refused] = []
    for call in tool_calls(events):
        for tool in tools:
            written = tool.written(call)
            if written is None:
                continue
            path, content = written
            try:
                relative = under_public(path)
            except Refused as exc:
                refused.append(exc)
                break
            if relative is not None:
                writes.pop(relative, None)
                writes[relative] = content
            break
    return writes, refused


def check(
    root: PublicRoot,
    pages: Sequence[str],
    writes: dict[str, str],
    min_bytes: int,
    known: KnownPages,
) -> Findings:
    """Materialize the missing files `writes` carries, then find what `pages` lack."""
    found = Findings()
    for relative, content in writes.items():
        try:
            if root.stat(relative) is None and root.create(relative, content.encode()):
                found.materialized.append(relative)
        except (Refused, OSError) as exc:
            found.refused.append(exc if isinstance(exc, Refused) else Refused(relative, str(exc)))
    for page in pages:
        try:
            _check_page(root, page, min_bytes, found, known)
        except Refused as exc:
            found.refused.append(exc)
    found.missing = list(dict.fromkeys(found.missing))
    return found


def _check_page(
    root: PublicRoot, page: str, min_bytes: int, found: Findings, known: KnownPages
) -> None:
    read = root.read(
        page, MAX_PAGE_BYTES, known=lambda version: (root.real, page, version) in known
    )
    if read is None or read[0].size < min_bytes:
        found.missing.append(root.path(page))
        return
    version, content = read
    key = (root.real, page, version)
    if content is None:
        assets, refused = known[key]
    else:
        assets, refused = page_assets(content.decode("utf-8", "replace"), page)
        known[key] = (assets, refused)
    missing, refused_now = root.absent(assets)
    found.missing += [root.path(asset) for asset in missing]
    found.refused += refused + refused_now


class KnownPages:
    """The assets of the pages checked lately, by page and version: a page checked again
    unchanged (at a follow-up, or linked by a later run) is not read and parsed again."""

    def __init__(self, capacity: int = KNOWN_PAGES) -> None:
        self.capacity = capacity
        self._pages: OrderedDict[PageKey, tuple[list[str], list[Refused]]] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._pages

    def __getitem__(self, key: PageKey) -> tuple[list[str], list[Refused]]:
        with self._lock:
            self._pages.move_to_end(key)
            return self._pages[key]

    def __setitem__(self, key: PageKey, assets: tuple[list[str], list[Refused]]) -> None:
        with self._lock:
            self._pages[key] = assets
            while len(self._pages) > self.capacity:
                self._pages.popitem(last=False)
