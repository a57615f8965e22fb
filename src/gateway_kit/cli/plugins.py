"""``gateway-kit plugins [MODULE:ATTR]``: the plugins a gateway loads, where from, which hooks.

Without MODULE:ATTR it lists what a `Gateway` made here would load: the built-ins and the
installed distributions' entry points. With it, the plugins of that `Gateway` (passed in ones
included).

Listing opens no database. MODULE is imported with ``$GATEWAY_KIT_DB`` naming an in-memory
one, so that a module that builds its log from it (as the contract's default does) creates or
migrates nothing; a module that names a database of its own opens it as it always does.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..gateway import Gateway
from ..hooks import PluginInfo, Plugins
from ..hooks.loading import entry_points
from ..settings import DATABASE_URL_VAR
from .serve import TargetError, load_target

NOT_A_GATEWAY = "{spec} is not a Gateway (a plain app gets the plugins listed without it)"
COLUMNS = ("NAME", "FROM", "HOOKS")
# What a module that builds its log from $GATEWAY_KIT_DB gets while its plugins are listed.
NO_DATABASE = "sqlite://"
UNKNOWN_BLOCK = "--block {name!r}: no installed plugin has that name (installed: {known})"
NOT_WITH_APP = (
    "{flags} cannot change the plugins of {spec}, a Gateway already built: "
    "pass load_entry_points= or block_plugins= to its Gateway(...) instead"
)


def register(commands: Any, add_db_option: Callable[[argparse.ArgumentParser], None]) -> None:
    listing = commands.add_parser("plugins", help="list the loaded plugins and their hooks")
    listing.add_argument(
        "app", nargs="?", metavar="MODULE:ATTR", help="a Gateway whose plugins to list"
    )
    listing.add_argument(
        "--no-entry-points",
        action="store_true",
        help="leave out other distributions' plugins (as Gateway(load_entry_points=False))",
    )
    listing.add_argument(
        "--block", action="append", default=[], metavar="NAME", help="leave out this plugin"
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per plugin")
    listing.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.app is None:
        known = sorted({entry.name for entry, _ in entry_points()})
        for name in args.block:
            if name not in known:
                error = UNKNOWN_BLOCK.format(name=name, known=", ".join(known))
                print(f"gateway-kit plugins: {error}", file=sys.stderr)
                return 2
        plugins = Plugins(load_entry_points=not args.no_entry_points, block=args.block)
    else:
        flags = [flag for flag, given in (("--no-entry-points", args.no_entry_points),
                                          ("--block", args.block)) if given]  # fmt: skip
        if flags:
            error = NOT_WITH_APP.format(flags=" and ".join(flags), spec=args.app)
            print(f"gateway-kit plugins: {error}", file=sys.stderr)
            return 2
        try:
            with database_from_env(NO_DATABASE):
                target = load_target(args.app)
        except TargetError as exc:
            print(f"gateway-kit plugins: {exc}", file=sys.stderr)
            return 2
        if not isinstance(target, Gateway):
            print(f"gateway-kit plugins: {NOT_A_GATEWAY.format(spec=args.app)}", file=sys.stderr)
            return 2
        plugins = target.plugins
    infos = plugins.describe()
    if args.json:
        for info in infos:
            print(json.dumps(as_json(info)))
    else:
        print(table(infos))
    return 0


@contextlib.contextmanager
def database_from_env(url: str) -> Iterator[None]:
    """``$GATEWAY_KIT_DB`` is `url` within the block, and as it was after."""
    before = os.environ.get(DATABASE_URL_VAR)
    os.environ[DATABASE_URL_VAR] = url
    try:
        yield
    finally:
        if before is None:
            del os.environ[DATABASE_URL_VAR]
        else:
            os.environ[DATABASE_URL_VAR] = before


def as_json(info: PluginInfo) -> dict[str, object]:
    return {
        "name": info.name,
        "from": info.source.kind,
        "distribution": info.source.distribution,
        "version": info.source.version,
        "hooks": list(info.hooks),
    }


def table(infos: list[PluginInfo]) -> str:
    rows = [COLUMNS] + [(i.name, str(i.source), ", ".join(i.hooks) or "-") for i in infos]
    widths = [max(len(row[col]) for row in rows) for col in range(2)]
    return "\n".join(
        f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}".rstrip() for row in rows
    )
