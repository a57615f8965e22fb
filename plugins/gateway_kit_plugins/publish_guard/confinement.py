"""`PublicRoot`: the only way the publish guard touches the disk, and never outside its root.

Paths reach it already made relative to the root (`claims.inside`). Every file is reached from
a descriptor of the root, one directory at a time, opened without following symlinks: what is
read, stat'ed or created is inside the root even if a symlink is swapped in meanwhile. A symlink
met on the way is resolved once; if it leads out of the root the path is refused (`Refused`),
otherwise the walk is made again along the resolved path, and a symlink met then is refused too
(it changed under us). Files are created with ``O_EXCL``: the guard never overwrites one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import NamedTuple, TypeVar

from .claims import Refused

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SYMLINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)
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


class _Symlink(Exception):
    """A symlink on the way: resolve the path and walk again."""


class PublicRoot:
    """One check's view of a public root; use it in a ``with`` block (it keeps directory
    descriptors open until the block ends).

    :param shown: the root as configured, filled in for this run: how paths are named to the
        agent and in the log.
    """

    def __init__(self, shown: str) -> None:
        self.shown = shown
        self.real = os.path.realpath(shown)
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

    def path(self, relative: str) -> str:
        return f"{self.shown.rstrip('/')}/{relative}"

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
        """Write a new file at `relative`, making its directories; False when one is there."""
        return self._followed(relative, lambda parts: self._create(parts, content))

    # --- walking ------------------------------------------------------------------------------

    def _followed(self, relative: str, act: Callable[[tuple[str, ...]], T]) -> T:
        try:
            return act(tuple(relative.split("/")))
        except _Symlink:
            pass
        resolved = os.path.realpath(os.path.join(self.real, relative))
        if os.path.commonpath([self.real, resolved]) != self.real or resolved == self.real:
            raise Refused(relative, ESCAPES)
        try:
            return act(tuple(os.path.relpath(resolved, self.real).split(os.sep)))
        except _Symlink:
            raise Refused(relative, CHANGED) from None

    def _dir(self, parts: tuple[str, ...], *, make: bool = False) -> int | None:
        """A descriptor of the directory `parts` under the root (None: it does not exist)."""
        if parts in self._dirs:
            return self._dirs[parts]
        found = self._open_root(make) if not parts else None
        if parts:
            parent = self._dir(parts[:-1], make=make)
            found = None if parent is None else self._open_dir(parent, parts[-1], make)
        if found is None:
            return None
        self._dirs[parts] = fd = found
        return fd

    def _open_root(self, make: bool) -> int | None:
        try:
            return os.open(self.real, DIRECTORY)
        except FileNotFoundError:
            if not make:
                return None
        except OSError as exc:  # it became a symlink, or is no directory
            raise Refused(self.shown, f"the public root cannot be opened: {exc}") from None
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.real, 0o755)  # the root itself; never its parents
        try:
            return os.open(self.real, DIRECTORY)
        except OSError as exc:
            raise Refused(self.shown, f"the public root cannot be opened: {exc}") from None

    def _open_dir(self, parent: int, name: str, make: bool) -> int | None:
        try:
            return os.open(name, DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            if not make:
                return None
        except OSError as exc:
            if exc.errno in SYMLINK_ERRORS and _is_symlink(parent, name):
                raise _Symlink from None
            return None  # a file where a directory would be, a name too long: nothing there
        with contextlib.suppress(FileExistsError):  # made meanwhile: opened without following
            os.mkdir(name, 0o755, dir_fd=parent)
        try:
            return os.open(name, DIRECTORY, dir_fd=parent)
        except OSError as exc:
            if exc.errno in SYMLINK_ERRORS and _is_symlink(parent, name):
                raise _Symlink from None
            return None

    def _stat(self, parts: tuple[str, ...]) -> os.stat_result | None:
        fd = self._dir(parts[:-1])
        if fd is None:
            return None
        try:
            found = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        if stat.S_ISLNK(found.st_mode):
            raise _Symlink
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
            raise _Symlink
        return entry.is_file(follow_symlinks=False)

    def _plain_listing(self, parent: str) -> dict[str, os.DirEntry[str]] | None:
        """The listing of `parent` reached without a symlink ({} when it does not exist);
        None when it cannot be used (a symlink on the way, too many entries)."""
        try:
            parts = tuple(parent.split("/")) if parent else ()
            fd = self._dir(parts)
        except _Symlink:
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
            if exc.errno in SYMLINK_ERRORS and _is_symlink(fd, parts[-1]):
                raise _Symlink from None
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
        fd = self._dir(parts[:-1], make=True)
        if fd is None:
            return False
        try:
            file = os.open(parts[-1], CREATE, 0o644, dir_fd=fd)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno in SYMLINK_ERRORS and _is_symlink(fd, parts[-1]):
                raise _Symlink from None
            raise
        with os.fdopen(file, "wb") as writing:
            writing.write(content)
        self._listings.pop(parts[:-1], None)
        return True


def _is_symlink(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False
