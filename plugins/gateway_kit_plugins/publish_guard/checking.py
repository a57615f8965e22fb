"""One check of a run: what it claimed and wrote, made good where the run's own write calls
allow (those known to have run, within the limits), and what is still missing."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gateway_kit import Event, final_assistant_text, tool_calls
from gateway_kit.runs.events import FOLLOW_UP_STARTED, UPSTREAM_FINISH

from .approvals import Approvals
from .assets import page_assets
from .claims import Refused, public_path, under_public
from .confinement import PublicRoot, Version
from .limits import OverLimit
from .settings import GuardSettings

MAX_PAGE_BYTES = 4 * 1024 * 1024  # read for its assets; a larger page is checked in its start
KNOWN_PAGES = 1024
KNOWN_REFERENCES = 100_000  # about 10 MB of paths at most

PageKey = tuple[str, str, Version]  # the root, the page in it, the page's version


@dataclass
class Writes:
    """The run's writes to materialize, by path relative to the root, and those over the
    run's caps (refused if they are missing)."""

    within: dict[str, str] = field(default_factory=dict)
    over: list[Refused] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.within or self.over)


@dataclass
class Findings:
    missing: list[str] = field(default_factory=list)  # as named to the agent: `public_path`
    materialized: list[str] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


# Where one turn of a run ends: goose's `Finish` of the gateway's runs; an app's own runs
# (`owned_run`) hold their `Finish` back, and their next turn starts after a `FollowUpStarted`.
TURN_ENDS = frozenset({UPSTREAM_FINISH, FOLLOW_UP_STARTED})


def answers(events: Sequence[Event]) -> list[str]:
    """The final text of each turn of the run (each goose request, each app turn): what each
    turn ended by saying (a follow-up's "done" does not take back what the turn before it
    claimed)."""
    texts, start = [], 0
    for index, event in enumerate(events):
        if event.type in TURN_ENDS:
            texts.append(final_assistant_text(events[start:index]))
            start = index + 1
    texts.append(final_assistant_text(events[start:]))
    return [text for text in texts if text]


def public_writes(events: Sequence[Event], settings: GuardSettings) -> tuple[Writes, list[Refused]]:
    """What the run's write calls wrote under a ``public`` segment and may be materialized,
    by path relative to the root (the last such write of a path wins; the first decides its
    place against the caps), and the writes refused."""
    approvals = Approvals.of(events)
    writes: dict[str, str] = {}
    refused: list[Refused] = []
    for call in tool_calls(events):
        for tool in settings.write_tools:
            written = tool.written(call)
            if written is None:
                continue
            path, content = written
            try:
                relative = under_public(path)
                if relative is not None:
                    _may_write(relative, approvals.refusal(call), settings)
                    writes[relative] = content
            except Refused as exc:
                refused.append(exc)
            break
    within, over = settings.writes.capped(writes)
    return Writes(within, over), refused


def _may_write(relative: str, refusal: str | None, settings: GuardSettings) -> None:
    if refusal is not None:
        raise Refused(relative, refusal)
    settings.paths.check(relative)
    settings.writes.check(relative)


def check(
    root: PublicRoot,
    pages: Sequence[str],
    writes: Writes,
    min_bytes: int,
    known: KnownPages,
) -> Findings:
    """Materialize the missing files `writes` carries, then find what `pages` lack."""
    found = Findings()
    for relative, content in writes.within.items():
        try:
            if root.stat(relative) is None and root.create(
                relative, content.encode("utf-8", "replace")
            ):
                found.materialized.append(relative)
        except (Refused, OSError) as exc:
            found.refused.append(exc if isinstance(exc, Refused) else Refused(relative, str(exc)))
    for over in writes.over:  # said only of what the guard would have had to write
        try:
            if root.stat(over.path) is None:
                found.refused.append(over)
        except Refused as exc:
            found.refused.append(exc)
    for page in pages:
        try:
            _check_page(root, page, min_bytes, found, known)
        except OverLimit as exc:  # it cannot be published, so it is not there
            found.missing.append(public_path(page))
            found.refused.append(exc)
        except Refused as exc:
            found.refused.append(exc)
    found.missing = list(dict.fromkeys(found.missing))
    return found


def _check_page(
    root: PublicRoot, page: str, min_bytes: int, found: Findings, known: KnownPages
) -> None:
    remembered: list[tuple[list[str], list[Refused]]] = []

    def known_version(version: Version) -> bool:
        entry = known.get((root.real, page, version))
        if entry is not None:
            remembered.append(entry)
        return entry is not None

    read = root.read(page, MAX_PAGE_BYTES, known_version)
    if read is None or read[0].size < min_bytes:
        found.missing.append(public_path(page))
        return
    version, content = read
    if content is None:
        assets, refused = remembered[0]
    else:
        assets, refused = page_assets(content.decode("utf-8", "replace"), page)
        known.remember((root.real, page, version), assets, refused)
    missing, refused_now = root.absent(assets)
    found.missing += [public_path(asset) for asset in missing]
    found.refused += refused + refused_now


class KnownPages:
    """The assets of the pages checked lately, by page and version: a page checked again
    unchanged (at a follow-up, or linked by a later run) is not read and parsed again. Bounded
    in pages and in the references they hold, the least recently used forgotten first."""

    def __init__(self, pages: int = KNOWN_PAGES, references: int = KNOWN_REFERENCES) -> None:
        self.pages = pages
        self.references = references
        self._known: OrderedDict[PageKey, tuple[list[str], list[Refused]]] = OrderedDict()
        self._held = 0  # references held
        self._lock = threading.Lock()

    def get(self, key: PageKey) -> tuple[list[str], list[Refused]] | None:
        with self._lock:
            found = self._known.get(key)
            if found is not None:
                self._known.move_to_end(key)
            return found

    def remember(self, key: PageKey, assets: list[str], refused: list[Refused]) -> None:
        size = len(assets) + len(refused)
        if size > self.references:
            return
        with self._lock:
            if key in self._known:
                return
            self._known[key] = (assets, refused)
            self._held += size
            while len(self._known) > self.pages or self._held > self.references:
                _, (old_assets, old_refused) = self._known.popitem(last=False)
                self._held -= len(old_assets) + len(old_refused)
