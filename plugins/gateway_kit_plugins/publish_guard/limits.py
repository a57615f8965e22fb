"""How far the guard goes on the disk: how deep and how long a path it reads or writes, which
kinds of file it writes, and how many files and bytes one run's writes may make.

Each limit is checked before anything is made: a path past them is refused whole, never
written in part. A claimed page or an asset past the path limits cannot be published, so it is
missing; a write past any limit is refused, logged, and left unwritten.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from .claims import Refused

DEFAULT_MAX_DEPTH = 32  # segments of a path under the root, its file name included
DEFAULT_MAX_PATH_LENGTH = 1024  # bytes (UTF-8) of a path under the root
DEFAULT_MAX_FILES = 20  # files one run's writes may make
DEFAULT_MAX_BYTES = 4 * 1024 * 1024  # bytes (UTF-8) one run's writes may make, together
MAX_NAME_BYTES = 255  # the longest file name the usual filesystems take (NAME_MAX)
# What a published page is made of: pages, styles, scripts, data, images and fonts.
EXTENSIONS = frozenset(
    {
        ".html", ".htm", ".css", ".js", ".mjs", ".json", ".txt", ".svg",
        ".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif", ".ico",
        ".woff", ".woff2", ".ttf", ".otf",
    }
)  # fmt: skip

TOO_DEEP = "{depth} segments deep, over max_depth ({limit})"
TOO_LONG = "{length} bytes long, over max_path_length ({limit})"
NAME_TOO_LONG = "holds a name of {length} bytes, over the {limit} a file name may have"
HIDDEN = "holds a hidden name (starting with '.'), which no published page needs"
NOT_A_PAGE_FILE = "a file of kind {suffix!r}, not one a published page needs ({allowed})"
OVER_FILES = "over max_files: the run's writes already make {limit} files"
OVER_BYTES = "over max_bytes: the run's writes would make more than {limit} bytes"


class OverLimit(Refused):
    """A path deeper or longer than the guard goes: what it names cannot be published."""


@dataclass(frozen=True, slots=True)
class PathLimits:
    """How deep and how long a path under the root the guard reads or writes."""

    max_depth: int = DEFAULT_MAX_DEPTH
    max_path_length: int = DEFAULT_MAX_PATH_LENGTH

    def check(self, relative: str) -> None:
        """`OverLimit` when `relative` (a plain path under the root) goes past the limits."""
        depth = relative.count("/") + 1
        if depth > self.max_depth:
            raise OverLimit(relative, TOO_DEEP.format(depth=depth, limit=self.max_depth))
        length = len(relative.encode("utf-8", "surrogatepass"))
        if length > self.max_path_length:
            raise OverLimit(relative, TOO_LONG.format(length=length, limit=self.max_path_length))
        longest = max(len(part.encode("utf-8", "surrogatepass")) for part in relative.split("/"))
        if longest > MAX_NAME_BYTES:
            raise OverLimit(relative, NAME_TOO_LONG.format(length=longest, limit=MAX_NAME_BYTES))


@dataclass(frozen=True, slots=True)
class WriteLimits:
    """What the guard writes: only files of `extensions`, and per run at most `max_files`
    files and `max_bytes` bytes."""

    extensions: frozenset[str] = EXTENSIONS
    max_files: int = DEFAULT_MAX_FILES
    max_bytes: int = DEFAULT_MAX_BYTES

    def check(self, relative: str) -> None:
        """`Refused` when the file `relative` is none a published page needs."""
        if any(part.startswith(".") for part in relative.split("/")):
            raise Refused(relative, HIDDEN)
        suffix = posixpath.splitext(relative)[1].lower()
        if suffix not in self.extensions:
            allowed = " ".join(sorted(self.extensions))
            raise Refused(relative, NOT_A_PAGE_FILE.format(suffix=suffix, allowed=allowed))

    def capped(self, writes: Mapping[str, str]) -> tuple[dict[str, str], list[Refused]]:
        """The first of `writes` (in the run's order) within the run's caps, and the rest,
        refused: the same writes pass at every check of a run, however many follow-ups it has."""
        within: dict[str, str] = {}
        over: list[Refused] = []
        total = 0
        for relative, content in writes.items():
            size = len(content.encode("utf-8", "replace"))
            if len(within) >= self.max_files:
                over.append(Refused(relative, OVER_FILES.format(limit=self.max_files)))
            elif total + size > self.max_bytes:
                over.append(Refused(relative, OVER_BYTES.format(limit=self.max_bytes)))
            else:
                within[relative] = content
                total += size
        return within, over


DEFAULT_PATHS = PathLimits()
DEFAULT_WRITES = WriteLimits()
