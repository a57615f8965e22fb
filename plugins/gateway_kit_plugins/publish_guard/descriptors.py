"""Directories opened and made one at a time, from their parent's descriptor and never through
a symlink: the steps `PublicRoot` walks its root with."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
SYMLINK_ERRORS = (errno.ELOOP, errno.ENOTDIR)


class Symlink(Exception):
    """A symlink on the way: resolve the path and walk again."""


@dataclass
class Making:
    """What making one file made on its way: directories under the root (innermost last), and
    the root with whichever of its parents were missing (outermost first)."""

    dirs: list[tuple[str, ...]] = field(default_factory=list)
    root: list[str] = field(default_factory=list)


def open_dir(parent: int, name: str, make: bool) -> tuple[int, bool] | None:
    """A descriptor of the directory `name` in `parent` and whether it was made now; None
    when there is none (and `make` is false, or none can be made there)."""
    try:
        return os.open(name, DIRECTORY, dir_fd=parent), False
    except FileNotFoundError:
        if not make:
            return None
    except OSError as exc:
        if exc.errno in SYMLINK_ERRORS and is_symlink(parent, name):
            raise Symlink from None
        return None  # a file where a directory would be, a name too long: nothing there
    made = True
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:  # made meanwhile: opened without following
        made = False
    try:
        return os.open(name, DIRECTORY, dir_fd=parent), made
    except OSError as exc:
        if exc.errno in SYMLINK_ERRORS and is_symlink(parent, name):
            raise Symlink from None
        return None


def make_chain(path: str) -> list[str]:
    """Make the directory `path` and whichever of its parents are missing (as ``mkdir -p``);
    the directories made, outermost first."""
    missing: list[str] = []
    while not os.path.lexists(path):
        missing.append(path)
        path = os.path.dirname(path)
    made: list[str] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            continue  # made meanwhile
        made.append(directory)
    return made


def close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def is_symlink(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False
