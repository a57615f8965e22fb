"""`PublicRoot`: the only way the publish guard touches the disk, and never outside its root.

Paths reach it already made relative to the root (`claims.inside`). Every file is reached from
a descriptor of the root, one directory at a time, opened without following symlinks: what is
read, stat'ed or created is inside the root even if a symlink is swapped in meanwhile. A symlink
met on the way is resolved once; if it leads out of the root the path is refused (`Refused`),
otherwise the walk is made again along the resolved path, and a symlink met then is refused too
(it changed under us). Files are created with ``O_EXCL``: the guard never overwrites one. A path
deeper or longer than its `PathLimits` is refused (`OverLimit`) before anything is touched, and
a file that cannot be written whole is removed with the directories made for it: a failed write
leaves no partial file and no empty folder chain.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import NamedTuple, TypeVar

from .claims import Refused
from .descriptors import (
    CREATE,
    DIRECTORY,
    READ,
    SYMLINK_ERRORS,
    Making,
    Symlink,
    close,
    is_symlink,
    make_chain,
    open_dir,
)
from .limits import DEFAULT_PATHS, OverLimit, PathLimits

ESCAPES = "a symlink that leads out of the public root"
CHANGED = "a symlink appeared while it was checked"
MAX_LISTING = 10_000  # entries of one directory kept for a check; a larger one is stat'ed

T = TypeVar("T")


class Version(NamedTuple):
    """What changes when a file does: a page whose version is known need not be read again."""

    size: int
    device: int
    inode: int
    modified_ns: int
    changed_ns: int


class PublicRoot:
    """One check's view of a public root; use it in a ``with`` block (it keeps directory
    descriptors open until the block ends).

    :param shown: the root as configured, filled in for this run: how paths are named to the
        agent and in the log.
    :param limits: how deep and how long a path under it may be.
    """

    def __init__(self, shown: str, limits: PathLimits = DEFAULT_PATHS) -> None:
        self.shown = shown
        self.real = os.path.realpath(shown)
        self.limits = limits
        self._dirs: dict[tuple[str, ...], int] = {}
        self._listings: dict[tuple[str, ...], dict[str, os.DirEntry[str]] | None] = {}

    def __enter__(self) -> PublicRoot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        self._listings.clear()

    def stat(self, relative: str) -> os.stat_result | None:
        """The regular file at `relative` (None: there is none)."""
        return self._followed(relative, lambda parts: self._stat(parts))

    def exists(self, relative: str) -> bool:
        """Whether a regular file is at `relative`."""
        return self._followed(relative, self._exists)

    def absent(self, relatives: Sequence[str]) -> tuple[list[str], list[Refused]]:
        """Which of `relatives` are no regular file, in their order, and which were refused.

        Each directory is listed once per check: a page's hundreds of images in one folder
        cost one listing and a lookup each. A path with a symlink on the way is checked alone.
        """
        listings: dict[str, dict[str, os.DirEntry[str]] | None] = {}
        missing: list[str] = []
        refused: list[Refused] = []
        for relative in relatives:
            try:
                self.limits.check(relative)
            except OverLimit as exc:  # it cannot be published, so it is not there
                missing.append(relative)
                refused.append(exc)
                continue
            parent, _, name = relative.rpartition("/")
            if parent not in listings:
                listings[parent] = self._plain_listing(parent)
            listing = listings[parent]
            entry = None if listing is None else listing.get(name)
            if listing is not None and (entry is None or not entry.is_symlink()):
                if entry is None or not entry.is_file(follow_symlinks=False):
                    missing.append(relative)
                continue
            try:
                if not self.exists(relative):
                    missing.append(relative)
            except Refused as exc:
                refused.append(exc)
        return missing, refused

    def read(
        self, relative: str, limit: int, known: Callable[[Version], bool] = lambda _: False
    ) -> tuple[Version, bytes | None] | None:
        """The version of the regular file at `relative` (its size, inode and times) and at
        most `limit` bytes of it, or no bytes when `known(version)`; None: there is none."""
        return self._followed(relative, lambda parts: self._read(parts, limit, known))

    def create(self, relative: str, content: bytes) -> bool:
        """Write a new file at `relative`, making its directories (and the root, with its
        missing parents); False when one is there. Whatever fails removes what it made."""
        return self._followed(relative, lambda parts: self._create(parts, content))

    # --- walking ------------------------------------------------------------------------------

    def _followed(self, relative: str, act: Callable[[tuple[str, ...]], T]) -> T:
        self.limits.check(relative)
        try:
            return act(tuple(relative.split("/")))
        except Symlink:
            pass
        resolved = os.path.realpath(os.path.join(self.real, relative))
        if os.path.commonpath([self.real, resolved]) != self.real or resolved == self.real:
            raise Refused(relative, ESCAPES)
        parts = tuple(os.path.relpath(resolved, self.real).split(os.sep))
        self.limits.check("/".join(parts))
        try:
            return act(parts)
        except Symlink:
            raise Refused(relative, CHANGED) from None

    def _dir(self, parts: tuple[str, ...], making: Making | None = None) -> int | None:
        """A descriptor of the directory `parts` under the root (None: it does not exist).
        With `making`, what is missing is made, and noted there."""
        known = len(parts)  # the deepest directory on the way already open
        while known and parts[:known] not in self._dirs:
            known -= 1
        if not known and () not in self._dirs:
            root = self._open_root(making)
            if root is None:
                return None
            self._dirs[()] = root
        fd = self._dirs[parts[:known]]
        for depth in range(known + 1, len(parts) + 1):
            found = open_dir(fd, parts[depth - 1], making is not None)
            if found is None:
                return None
            fd, made = found
            self._dirs[parts[:depth]] = fd
            if made and making is not None:
                making.dirs.append(parts[:depth])
        return fd

    def _open_root(self, making: Making | None) -> int | None:
        try:
            return os.open(self.real, DIRECTORY)
        except FileNotFoundError:
            if making is None:
                return None
        except OSError as exc:  # it became a symlink, or is no directory
            raise Refused(self.shown, f"the public root cannot be opened: {exc}") from None
        # Made only for a file to write; `root` of the guard checked it is under the fixed
        # part of its template.
        making.root = make_chain(self.real)
        try:
            return os.open(self.real, DIRECTORY)
        except OSError as exc:
            raise Refused(self.shown, f"the public root cannot be opened: {exc}") from None

    def _stat(self, parts: tuple[str, ...]) -> os.stat_result | None:
        fd = self._dir(parts[:-1])
        if fd is None:
            return None
        try:
            found = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        if stat.S_ISLNK(found.st_mode):
            raise Symlink
        return found if stat.S_ISREG(found.st_mode) else None

    def _exists(self, parts: tuple[str, ...]) -> bool:
        fd = self._dir(parts[:-1])
        if fd is None:
            return False
        listing = self._listing(parts[:-1], fd)
        if listing is None:  # too large to keep: one stat
            return self._stat(parts) is not None
        entry = listing.get(parts[-1])
        if entry is None:
            return False
        if entry.is_symlink():
            raise Symlink
        return entry.is_file(follow_symlinks=False)

    def _plain_listing(self, parent: str) -> dict[str, os.DirEntry[str]] | None:
        """The listing of `parent` reached without a symlink ({} when it does not exist);
        None when it cannot be used (a symlink on the way, too many entries)."""
        try:
            parts = tuple(parent.split("/")) if parent else ()
            fd = self._dir(parts)
        except Symlink:
            return None
        return {} if fd is None else self._listing(parts, fd)

    def _listing(self, parts: tuple[str, ...], fd: int) -> dict[str, os.DirEntry[str]] | None:
        if parts in self._listings:
            return self._listings[parts]
        listing: dict[str, os.DirEntry[str]] = {}
        with os.scandir(fd) as entries:
            for entry in entries:
                if len(listing) >= MAX_LISTING:
                    self._listings[parts] = None
                    return None
                listing[entry.name] = entry
        self._listings[parts] = listing
        return listing

    def _read(
        self, parts: tuple[str, ...], limit: int, known: Callable[[Version], bool]
    ) -> tuple[Version, bytes | None] | None:
        fd = self._dir(parts[:-1])
        if fd is None:
            return None
        try:
            file = os.open(parts[-1], READ, dir_fd=fd)
        except OSError as exc:
            if exc.errno in SYMLINK_ERRORS and is_symlink(fd, parts[-1]):
                raise Symlink from None
            return None
        try:
            found = os.fstat(file)
            if not stat.S_ISREG(found.st_mode):
                return None  # a FIFO or a device is no page: never read from it
            version = Version(found.st_size, found.st_dev, found.st_ino, found.st_mtime_ns,
                              found.st_ctime_ns)  # fmt: skip
            if known(version):
                return version, None
            with os.fdopen(file, "rb", closefd=False) as reading:
                return version, reading.read(limit)
        finally:
            os.close(file)

    def _create(self, parts: tuple[str, ...], content: bytes) -> bool:
        making = Making()
        try:
            created = self._write_new(parts, content, making)
        except BaseException:
            self._unmake(making)
            raise
        if not created:
            self._unmake(making)
        return created

    def _write_new(self, parts: tuple[str, ...], content: bytes, making: Making) -> bool:
        fd = self._dir(parts[:-1], making)
        if fd is None:
            return False
        try:
            file = os.open(parts[-1], CREATE, 0o644, dir_fd=fd)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in SYMLINK_ERRORS and is_symlink(fd, parts[-1]):
                raise Symlink from None
            raise
        try:
            with os.fdopen(file, "wb") as writing:
                writing.write(content)
        except BaseException:
            with contextlib.suppress(OSError):  # never a partial file
                os.unlink(parts[-1], dir_fd=fd)
            raise
        self._listings.pop(parts[:-1], None)
        return True

    def _unmake(self, making: Making) -> None:
        """Remove the directories `making` made, innermost first, as long as they are empty."""
        for parts in reversed(making.dirs):
            close(self._dirs.pop(parts, None))
            parent = self._dirs.get(parts[:-1])
            if parent is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(parts[-1], dir_fd=parent)
        if making.root:
            close(self._dirs.pop((), None))
            for path in reversed(making.root):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
        self._listings.clear()
