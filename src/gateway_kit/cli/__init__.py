"""The ``gateway-kit`` command line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib import metadata

from ..exceptions import GatewayKitError
from ..settings import DATABASE_URL_VAR, DEFAULT_DATABASE_URL, database_url
from . import adopt, bills, db, demo, heartbeat, plugins, serve, streams, tail, tokens
from .durable import refuse_in_memory
from .unreachable import UNREACHABLE_ERRORS, unreachable_message

DB_HELP = f"database URL (default: ${DATABASE_URL_VAR}, else {DEFAULT_DATABASE_URL})"


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None, help=DB_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway-kit", description="One durable event log behind every client."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (demo, serve, db, tail, plugins, bills, tokens, streams, heartbeat, adopt):
        module.register(commands, add_db_option)
    return parser


def version() -> str:
    try:
        return metadata.version("gateway-kit")
    except metadata.PackageNotFoundError:  # imported from a checkout, not installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    command = " ".join(filter(None, (args.command, getattr(args, "action", None))))
    try:
        db = getattr(args, "db", "")
        if db is None or db:  # "" is a command's own default (the demo's file)
            args.db = database_url(db, source="--db")
        refuse_in_memory(args)
        return int(args.run(args))
    # Before GatewayKitError: DatabaseUnavailable is one, and a database that cannot be opened
    # is no setting's fault.
    except UNREACHABLE_ERRORS as exc:  # a database that cannot be opened: say which, and why
        print(f"gateway-kit {command}: {unreachable_message(args, exc)}", file=sys.stderr)
        return 1
    except GatewayKitError as exc:  # a setting or a plugin that cannot work: say which
        print(f"gateway-kit {command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
